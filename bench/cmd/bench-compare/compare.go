package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/intentledger/intentd/internal/progress"
)

// report is everything one run measured.
type report struct {
	Date         string        `json:"date"`
	Note         string        `json:"note,omitempty"`
	GoVersion    string        `json:"go_version"`
	CPUs         int           `json:"cpus"`
	EtcdVersion  string        `json:"etcd_version"`
	Fsync        fsyncRates    `json:"fsync"`
	FsyncEnd     fsyncRates    `json:"fsync_end"`
	RTTMicros    float64       `json:"loopback_rtt_us"`
	Load1Start   float64       `json:"load1_start"`
	Load1End     float64       `json:"load1_end"`
	Warmup       string        `json:"warmup"`
	Duration     string        `json:"duration"`
	Reps         int           `json:"reps"`
	Claimants    int           `json:"claimants"`
	KeyBytes     int           `json:"key_bytes"`
	PayloadBytes int           `json:"payload_bytes"`
	IntentdArgs  []string      `json:"intentd_args,omitempty"`
	Clients      []int         `json:"clients"`
	Modes        []string      `json:"modes"`
	Routings     []string      `json:"routings,omitempty"`
	FrontEnds    []string      `json:"front_ends"`
	Levels       []levelResult `json:"levels"`
	Elapsed      string        `json:"elapsed"`
}

// compare runs every repetition: per repetition, each system gets a fresh
// cluster (the order alternates between repetitions) and runs every mode
// and concurrency level; etcd's gRPC and HTTP front ends alternate which
// goes first per level.
func compare(ctx context.Context, cfg config, stderr io.Writer) (*report, error) {
	began := time.Now()
	// Every line goes through prog: a level's status line is redrawn on a
	// terminal and thinned to plain lines in a log; the rest are events.
	prog := progress.New(stderr)
	if err := os.MkdirAll(cfg.workDir, 0o755); err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	if err := os.MkdirAll(cfg.outDir, 0o755); err != nil {
		return nil, fmt.Errorf("out dir: %w", err)
	}
	pidFile := filepath.Join(cfg.workDir, "pids")
	rep := &report{
		Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), Note: cfg.note, GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Load1Start: loadAvg(), Warmup: cfg.warmup.String(), Duration: cfg.duration.String(), Reps: cfg.reps,
		Claimants: cfg.claimants, KeyBytes: cfg.keyBytes, PayloadBytes: cfg.payloadBytes, IntentdArgs: cfg.intentdArgs,
		Clients: cfg.clients, Modes: cfg.modes, Routings: cfg.routings,
	}
	for _, s := range cfg.systems {
		rep.FrontEnds = append(rep.FrontEnds, cfg.frontEnds(s)...)
	}
	if hasSystem(cfg, "etcd") {
		rep.EtcdVersion = etcdVersion(cfg.etcdBin)
	}
	fmt.Fprintf(prog, "bench-compare: measuring fdatasync on %s ...\n", cfg.workDir)
	fr, err := measureFsync(cfg.workDir, time.Second)
	if err != nil {
		return nil, err
	}
	rep.Fsync = fr
	rtt, err := loopbackRTT()
	if err != nil {
		return nil, err
	}
	rep.RTTMicros = float64(rtt) / float64(time.Microsecond)
	fmt.Fprintf(prog, "bench-compare: fdatasync/s overwrite %.0f, append %.0f, preallocated append %.0f; %d levels, about %s plus cluster starts\n",
		fr.Overwrite, fr.Append, fr.Prealloc, cfg.levels(), cfg.planned().Round(time.Second))

	payload := payloadOf(cfg.payloadBytes)
	seq, total := 0, cfg.levels()
	for r := 1; r <= cfg.reps; r++ {
		order := append([]string(nil), cfg.systems...)
		if r%2 == 0 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, system := range order {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("stopped: %w", err)
			}
			dir := filepath.Join(cfg.workDir, fmt.Sprintf("rep%d-%s", r, system))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("data dir: %w", err)
			}
			var cl *cluster
			if system == "intentd" {
				cl, err = startIntentd(ctx, cfg, dir, pidFile)
			} else {
				cl, err = startEtcd(ctx, cfg, dir, pidFile)
			}
			if err != nil {
				return nil, err
			}
			// drivers by routing, then front end.
			drivers := map[string]map[string]driver{"leader": {}, "spread": {}}
			hc := newHTTPClient()
			var spreadCli closer
			if system == "intentd" {
				drivers["leader"]["intentd"] = &intentdDriver{hc: hc, bases: []string{cl.leader}}
				drivers["spread"]["intentd"] = &intentdDriver{hc: hc, bases: cl.addrs}
			} else {
				drivers["leader"]["etcd-grpc"] = &etcdGRPCDriver{cli: cl.etcdCli}
				drivers["leader"]["etcd-http"] = &etcdHTTPDriver{hc: hc, urls: []string{"http://" + cl.leader + "/v3/kv/txn"}}
				if hasRouting(cfg, "spread") {
					cli, err := newEtcdClient(cl.addrs)
					if err != nil {
						cl.stop(true)
						return nil, err
					}
					spreadCli = cli
					drivers["spread"]["etcd-grpc"] = &etcdGRPCDriver{cli: cli}
				}
				var urls []string
				for _, a := range cl.addrs {
					urls = append(urls, "http://"+a+"/v3/kv/txn")
				}
				drivers["spread"]["etcd-http"] = &etcdHTTPDriver{hc: hc, urls: urls}
			}
			fes := cfg.frontEnds(system)
			for _, routing := range cfg.routings {
				for _, fe := range fes {
					if err := checkDriver(ctx, drivers[routing][fe], keyOf(fmt.Sprintf("chk%02d%c", r, routing[0]), 0, 0, cfg.keyBytes), payload); err != nil {
						cl.stop(true)
						return nil, fmt.Errorf("%s (%s): %w", fe, routing, err)
					}
				}
			}
			// The routings take turns going first, as the systems do.
			routings := append([]string(nil), cfg.routings...)
			if r%2 == 0 {
				slices.Reverse(routings)
			}
			for _, mode := range cfg.modes {
				for _, routing := range routings {
					for ci, n := range cfg.clients {
						order := fes
						if (ci+r)%2 == 1 && len(fes) == 2 {
							order = []string{fes[1], fes[0]}
						}
						for _, fe := range order {
							if err := ctx.Err(); err != nil {
								cl.stop(true)
								return nil, fmt.Errorf("stopped: %w", err)
							}
							if err := cl.checkAlive(); err != nil {
								cl.stop(true)
								return nil, err
							}
							seq++
							spec := levelSpec{
								seq: seq, total: total, rep: r, frontEnd: fe, mode: mode, routing: routing, clients: n, claimants: cfg.claimants,
								prefix: fmt.Sprintf("L%04d", seq), keyBytes: cfg.keyBytes, payload: payload,
								warmup: cfg.warmup, duration: cfg.duration, pids: cl.pids(), leaderPid: cl.pids()[cl.leaderIx],
							}
							var stopProfile func()
							if fe == "intentd" && cfg.profiles(mode, routing, n) {
								stopProfile = captureProfiles(ctx, cl, cfg, fmt.Sprintf("intentd-%s-%s-%d-rep%d", mode, routing, n, r), prog)
							}
							fsyncRate := 0.0
							if n == 1 {
								if fsyncRate, err = fsyncLoop(cfg.workDir, time.Second, "prealloc"); err != nil {
									cl.stop(true)
									return nil, err
								}
							}
							res := runLevel(ctx, drivers[routing][fe], spec, prog)
							res.FsyncPerSec = fsyncRate
							if stopProfile != nil {
								stopProfile()
							}
							if err := ctx.Err(); err != nil { // cut short: not a measurement
								cl.stop(true)
								return nil, fmt.Errorf("stopped: %w", err)
							}
							rep.Levels = append(rep.Levels, res)
							fmt.Fprintf(prog, "[%d/%d] rep %d %-9s %-9s %-6s clients=%-3d ops/s=%-7.0f p50=%.2fms p99=%.2fms errors=%d cpu/1k=%.3fs leader-cpu/1k=%.3fs driver-cpu/1k=%.3fs load=%.1f\n",
								seq, total, r, fe, mode, routing, n, res.OpsPerSec, res.P50ms, res.P99ms, res.Errors, res.CPUPer1k, res.LeaderCPUPer1k, res.DriverCPUPer1k, res.Load1End)
						}
					}
				}
			}
			if spreadCli != nil {
				_ = spreadCli.Close()
			}
			hc.CloseIdleConnections()
			cl.stop(cfg.keepData)
		}
	}
	rep.Load1End = loadAvg()
	if rep.FsyncEnd, err = measureFsync(cfg.workDir, time.Second); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(began).Round(time.Second).String()
	return rep, nil
}

// closer is a client to close when its cluster stops.
type closer interface{ Close() error }

func hasRouting(cfg config, r string) bool {
	for _, x := range cfg.routings {
		if x == r {
			return true
		}
	}
	return false
}

func hasSystem(cfg config, s string) bool {
	for _, x := range cfg.systems {
		if x == s {
			return true
		}
	}
	return false
}

// captureProfiles fetches a CPU profile from every node's pprof listener
// (the leader's file is marked) for the warm-up plus measured time of a
// level, in the background.
func captureProfiles(ctx context.Context, cl *cluster, cfg config, name string, stderr io.Writer) (wait func()) {
	var waits []func()
	for i, addr := range cl.pprofs {
		n := fmt.Sprintf("%s-n%d", name, i+1)
		if i == cl.leaderIx {
			n += "-leader"
		}
		waits = append(waits, captureProfile(ctx, addr, cfg, n, stderr))
	}
	return func() {
		for _, w := range waits {
			w()
		}
	}
}

// captureProfile fetches a CPU profile from one pprof listener for the
// warm-up plus measured time of a level, in the background.
func captureProfile(ctx context.Context, addr string, cfg config, name string, stderr io.Writer) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		secs := int((cfg.warmup + cfg.duration).Seconds())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Fprintln(stderr, "bench-compare: profile:", err)
			return
		}
		defer resp.Body.Close()
		path := filepath.Join(cfg.profileDir, name+".pprof")
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(stderr, "bench-compare: profile:", err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			fmt.Fprintln(stderr, "bench-compare: profile:", err)
		}
	}()
	return func() { <-done }
}
