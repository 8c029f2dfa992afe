package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The settings each system runs with, printed in every report. Keep
// intentdSettings in step with cluster.Config's defaults.
const (
	intentdSettings = "hashicorp/raft v1.7.3, heartbeat and election timeout 1 s, leader lease 500 ms, commit timeout 50 ms, " +
		"`MaxAppendEntries` 256, `BatchApplyCh` on, `BatchingFSM`, snapshot threshold 8192, trailing logs 10240; " +
		"log store raft-wal (one append + fsync per `StoreLogs`, leader and followers) behind a 1024-entry `LogCache`"
	etcdSettings = "etcd defaults: heartbeat 100 ms, election timeout 1000 ms, snapshot count 100000; " +
		"WAL fdatasync on every Raft `Ready` batch (leader and followers), bbolt backend committed in batches"
)

// README markers between which the latest table is written.
const (
	markerBegin = "<!-- bench-compare:begin -->"
	markerEnd   = "<!-- bench-compare:end -->"
)

// summary is the median over repetitions of one (mode, routing, system,
// clients).
type summary struct {
	mode, routing, system    string
	clients, reps            int
	ops, p50, p99, p999, cpu float64
	leaderCPU, driverCPU     float64
	errors                   int64
	load1Min, load1Max       float64
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summaries groups the levels and takes the median of each metric.
func (r *report) summaries() map[string]summary {
	type acc struct{ ops, p50, p99, p999, cpu, leaderCPU, driverCPU, load []float64 }
	groups := map[string]*acc{}
	errs := map[string]int64{}
	for _, l := range r.Levels {
		k := sumKey(l.Mode, routingOf(l), l.System, l.Clients)
		a := groups[k]
		if a == nil {
			a = &acc{}
			groups[k] = a
		}
		a.ops = append(a.ops, l.OpsPerSec)
		a.p50 = append(a.p50, l.P50ms)
		a.p99 = append(a.p99, l.P99ms)
		a.p999 = append(a.p999, l.P999ms)
		a.cpu = append(a.cpu, l.CPUPer1k)
		a.leaderCPU = append(a.leaderCPU, l.LeaderCPUPer1k)
		a.driverCPU = append(a.driverCPU, l.DriverCPUPer1k)
		a.load = append(a.load, l.Load1Start, l.Load1End)
		errs[k] += l.Errors
	}
	out := map[string]summary{}
	for _, l := range r.Levels {
		k := sumKey(l.Mode, routingOf(l), l.System, l.Clients)
		a := groups[k]
		out[k] = summary{mode: l.Mode, routing: routingOf(l), system: l.System, clients: l.Clients, reps: len(a.ops),
			ops: median(a.ops), p50: median(a.p50), p99: median(a.p99), p999: median(a.p999), cpu: median(a.cpu),
			leaderCPU: median(a.leaderCPU), driverCPU: median(a.driverCPU), errors: errs[k], load1Min: slices.Min(a.load), load1Max: slices.Max(a.load)}
	}
	return out
}

func sumKey(mode, routing, system string, clients int) string {
	return fmt.Sprintf("%s|%s|%s|%d", mode, routing, system, clients)
}

// routingOf is where a level's clients sent (results from before the
// spread routing existed sent to the leader).
func routingOf(l levelResult) string {
	if l.Routing == "" {
		return "leader"
	}
	return l.Routing
}

// routings is the run's routings, in order (leader for results from
// before the spread routing existed).
func (r *report) routings() []string {
	if len(r.Routings) == 0 {
		return []string{"leader"}
	}
	return r.Routings
}

var frontEndNames = map[string]string{"intentd": "intentd", "etcd-grpc": "etcd gRPC", "etcd-http": "etcd HTTP/JSON"}

// markdown renders the header and one table per mode.
func (r *report) markdown() string {
	var b strings.Builder
	sums := r.summaries()
	loadMin, loadMax := r.Load1Start, r.Load1Start
	for _, l := range r.Levels {
		loadMin = min(loadMin, l.Load1Start, l.Load1End)
		loadMax = max(loadMax, l.Load1Start, l.Load1End)
	}
	fmt.Fprintf(&b, "Measured %s by `make bench-compare`: %d repetition(s), median of each metric; %s warm-up + %s measured per level; "+
		"closed-loop clients; %d-byte keys, %d-byte payloads; contended = %d claimants per key (fewer when there are fewer clients: with one client every key is claimed once). ",
		r.Date, r.Reps, r.Warmup, r.Duration, r.KeyBytes, r.PayloadBytes, r.Claimants)
	fmt.Fprintf(&b, "Machine: %d CPUs shared by the 3 servers and the load generator; 1-minute load average %.2f at the start, %.2f at the end, %.2f–%.2f during the levels; "+
		"fdatasync/s on the data filesystem at the start (end): %.0f (%.0f) rewriting a 4 KiB block, %.0f (%.0f) appending 256 B to a growing file, "+
		"%.0f (%.0f) appending 256 B records to a preallocated file (a log append); loopback round trip %.0f µs. etcd %s; %s.",
		r.CPUs, r.Load1Start, r.Load1End, loadMin, loadMax, r.Fsync.Overwrite, r.FsyncEnd.Overwrite, r.Fsync.Append, r.FsyncEnd.Append,
		r.Fsync.Prealloc, r.FsyncEnd.Prealloc, r.RTTMicros, r.EtcdVersion, r.GoVersion)
	if r.Note != "" {
		fmt.Fprintf(&b, " Note: %s.", r.Note)
	}
	b.WriteString("\n\n")
	args := ""
	if len(r.IntentdArgs) > 0 {
		args = " (extra flags: `" + strings.Join(r.IntentdArgs, " ") + "`)"
	}
	fmt.Fprintf(&b, "- intentd%s: %s.\n- etcd: %s.\n", args, intentdSettings, etcdSettings)
	b.WriteString("- Sent to: *leader*: every client sends every request to the leader (as the Go SDK does; etcd's client is given only the leader's endpoint); " +
		"*spread*: requests go round-robin over all three nodes (intentd: each request to the next HTTP address; etcd gRPC: one client with all three endpoints, which balances round-robin; etcd HTTP: the next gateway address), " +
		"as clients without discovery or behind a load balancer do.\n")
	b.WriteString("- CPU-s / 1k ops: user+system CPU of the three server processes over the measured window, per 1,000 ops; leader CPU-s / 1k ops: the leader process's alone; " +
		"driver CPU-s / 1k ops: the load generator's own, on the same cores. " +
		"Ratios are intentd ÷ etcd gRPC sent the same way (ops/s: higher is better for intentd; p99: lower is).\n")
	if line := r.limitLine(); line != "" {
		b.WriteString(line)
	}
	for _, mode := range r.Modes {
		title := "Unique-key claims (one claimant per key)"
		if mode == "contended" {
			title = fmt.Sprintf("Contended claims (%d claimants race for each key; losers get in_flight / the Else branch)", r.Claimants)
		}
		fmt.Fprintf(&b, "\n**%s**\n\n", title)
		b.WriteString("| clients | sent to | system | ops/s | p50 ms | p99 ms | p99.9 ms | errors | CPU-s / 1k ops | leader CPU-s / 1k ops | driver CPU-s / 1k ops | ops/s ÷ etcd gRPC | p99 ÷ etcd gRPC |\n")
		b.WriteString("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, routing := range r.routings() {
			for _, n := range r.Clients {
				base, hasBase := sums[sumKey(mode, routing, "etcd-grpc", n)]
				for _, fe := range r.FrontEnds {
					s, ok := sums[sumKey(mode, routing, fe, n)]
					if !ok {
						continue
					}
					ratioOps, ratioP99 := "", ""
					if fe == "intentd" && hasBase && base.ops > 0 && base.p99 > 0 {
						ratioOps = fmt.Sprintf("**%.2f×**", s.ops/base.ops)
						ratioP99 = fmt.Sprintf("**%.2f×**", s.p99/base.p99)
					}
					// "–": results.json from before this was measured.
					leader, driver := "–", "–"
					if s.leaderCPU > 0 {
						leader = fmt.Sprintf("%.3f", s.leaderCPU)
					}
					if s.driverCPU > 0 {
						driver = fmt.Sprintf("%.3f", s.driverCPU)
					}
					fmt.Fprintf(&b, "| %d | %s | %s | %.0f | %.2f | %.2f | %.2f | %d | %.3f | %s | %s | %s | %s |\n",
						n, routing, frontEndNames[fe], s.ops, s.p50, s.p99, s.p999, s.errors, s.cpu, leader, driver, ratioOps, ratioP99)
				}
			}
		}
	}
	return b.String()
}

// limitLine compares intentd's 1-client unique-claim rate with the
// fsync-bound limit of an unbatched commit: hashicorp/raft stores the entry
// on the leader (one log fsync) before it sends it, then a follower stores
// it (a second fsync) and answers, so one commit takes at least two
// sequential log-append fsyncs plus a round trip: limit = 1 / (2/f + rtt),
// with f the preallocated-append fdatasync rate measured just before the
// level. The median over repetitions of the measured ÷ limit is reported.
func (r *report) limitLine() string {
	var limits, ratios, fs []float64
	for _, l := range r.Levels {
		if l.System != "intentd" || l.Mode != "unique" || l.Clients != 1 || l.FsyncPerSec <= 0 {
			continue
		}
		limit := 1 / (2/l.FsyncPerSec + r.RTTMicros/1e6)
		limits = append(limits, limit)
		ratios = append(ratios, l.OpsPerSec/limit)
		fs = append(fs, l.FsyncPerSec)
	}
	if len(limits) == 0 {
		return ""
	}
	return fmt.Sprintf("- 1-client limit (one unbatched commit = leader log fsync, then a follower log fsync, plus a round trip: 1 / (2/f + rtt), "+
		"f = %.0f preallocated-append fdatasync/s measured just before the level): %.0f claims/s; intentd reached **%.0f%%** of it (median).\n",
		median(fs), median(limits), 100*median(ratios))
}

// loadReport reads a results.json written by an earlier run.
func loadReport(path string) (*report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	var r report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("--from %s: %w", path, err)
	}
	return &r, nil
}

// write stores results.json, table.md and the plot, and updates the README
// between its markers when asked.
func (r *report) write(cfg config, md string) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.outDir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.outDir, "table.md"), []byte(md+"\n"), 0o644); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	svg, err := r.plot(false)
	if err != nil {
		return err
	}
	png, err := r.plot(true)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.outDir, "bench-compare.png"), png, 0o644); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg.outDir, "bench-compare.svg"), svg, 0o644); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if cfg.svg != "" {
		if err := os.WriteFile(cfg.svg, svg, 0o644); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	if cfg.readme != "" {
		if err := replaceBetweenMarkers(cfg.readme, md); err != nil {
			return err
		}
	}
	return nil
}

// replaceBetweenMarkers rewrites what lies between the markers in path.
func replaceBetweenMarkers(path, content string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("readme: %w", err)
	}
	i := bytes.Index(b, []byte(markerBegin))
	j := bytes.Index(b, []byte(markerEnd))
	if i < 0 || j < i {
		return errors.New("readme: markers " + markerBegin + " ... " + markerEnd + " not found")
	}
	var out bytes.Buffer
	out.Write(b[:i+len(markerBegin)])
	out.WriteString("\n")
	out.WriteString(content)
	out.WriteString("\n")
	out.Write(b[j:])
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("readme: %w", err)
	}
	return nil
}
