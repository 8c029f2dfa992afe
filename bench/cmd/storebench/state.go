package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/intentledger/intentd/bench/storeeval"
)

// stateMain runs one phase of a state run and prints its report as a
// JSON line.
func stateMain(args []string) int {
	fs := flag.NewFlagSet("storebench state", flag.ExitOnError)
	var cfg storeeval.StateConfig
	fs.StringVar(&cfg.Engine, "engine", storeeval.EngineFsmPebble, "fsm-pebble or fsm-memory")
	fs.StringVar(&cfg.Phase, "phase", storeeval.PhaseFill, "fill, restore, restart or restart-tail (in that order, on one -dir)")
	fs.IntVar(&cfg.N, "n", 1_000_000, "intents claimed and completed by the fill, all retained")
	fs.IntVar(&cfg.Tail, "tail", 100_000, "entries applied after the last sync, for a restart to replay")
	fs.IntVar(&cfg.Reads, "reads", 100_000, "point reads, cold and hot each")
	fs.IntVar(&cfg.Batch, "batch", storeeval.DefaultStateBatch, "log entries per apply batch (the cluster's MaxAppendEntries)")
	fs.StringVar(&cfg.Dir, "dir", "", "the run's directory, the same for every phase (required)")
	build := fs.String("build", "", "the build's name in the report")
	fs.DurationVar(&cfg.ProgressEvery, "progress", 10*time.Second, "a progress line on stderr this often during the fill (0: none)")
	fs.Parse(args)
	if cfg.Dir == "" {
		fmt.Fprintln(os.Stderr, "storebench state: -dir is required")
		return 2
	}
	cfg.Progress = os.Stderr
	rep, err := storeeval.RunState(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "storebench state: %v\n", err)
		return 1
	}
	rep.Build = *build
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintf(os.Stderr, "storebench state: %v\n", err)
		return 1
	}
	return 0
}

func stateTableMain(args []string) int {
	fs := flag.NewFlagSet("storebench state-table", flag.ExitOnError)
	base := fs.String("base", "base", "the build name of lines from the plain run (the build before the change)")
	fs.Parse(args)
	if err := stateTable(os.Stdin, os.Stdout, *base); err != nil {
		fmt.Fprintf(os.Stderr, "storebench state-table: %v\n", err)
		return 1
	}
	return 0
}

// stateTable merges the phase lines of each run (build, engine, n) and
// writes two Markdown tables. A line without a phase is the plain run's
// (storeeval.Report) of the build before the change.
func stateTable(r io.Reader, w io.Writer, base string) error {
	type key struct {
		build, engine string
		n             int
	}
	var order []key
	reps := map[key]*storeeval.StateReport{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var probe struct {
			Phase  *string `json:"phase"`
			Build  string  `json:"build"`
			Engine string  `json:"engine"`
			N      int     `json:"n"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			return fmt.Errorf("line %q: %w", line, err)
		}
		if probe.Phase == nil {
			var old storeeval.Report
			if err := json.Unmarshal(line, &old); err != nil {
				return fmt.Errorf("line %q: %w", line, err)
			}
			rep := storeeval.FromLegacy(&old)
			rep.Build = base
			k := key{base, rep.Engine, rep.N}
			if reps[k] == nil {
				order = append(order, k)
			}
			reps[k] = rep
			continue
		}
		k := key{probe.Build, probe.Engine, probe.N}
		rep := reps[k]
		if rep == nil {
			rep = &storeeval.StateReport{}
			reps[k] = rep
			order = append(order, k)
		}
		// Each phase sets its own fields: decoding into the run's report
		// overlays them.
		if err := json.Unmarshal(line, rep); err != nil {
			return fmt.Errorf("line %q: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	mib := func(b uint64) string {
		if b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f", float64(b)/(1<<20))
	}
	secs := func(s float64) string {
		if s == 0 {
			return "–"
		}
		if s < 10 {
			return fmt.Sprintf("%.2f", s)
		}
		return fmt.Sprintf("%.1f", s)
	}
	fmt.Fprintln(w, "| build | engine | intents | load (1, 5, 15 min) | fill intents/s | apply entries/s | batch p50 / p99 ms | Go heap MiB (B/intent) | RSS MiB: anon + file | peak RSS MiB | disk MiB (B/intent) | cold read p50 / p99 µs | hot read p50 / p99 µs |")
	fmt.Fprintln(w, "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, k := range order {
		r := reps[k]
		disk := "–"
		if r.DiskBytes > 0 {
			disk = fmt.Sprintf("%.0f (%.0f)", float64(r.DiskBytes)/(1<<20), r.DiskPerIntent)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %.0f | %.0f | %.2f / %.1f | %.0f (%.0f) | %s + %s | %s | %s | %.1f / %.0f | %.1f / %.0f |\n",
			r.Build, r.Engine, r.N, r.FillLoad, r.FillIntentsPerSec, r.FillApplyPerSec, r.FillBatchP50us/1e3, r.FillBatchP99us/1e3,
			float64(r.HeapBytes)/(1<<20), r.HeapPerIntent, mib(r.RssAnonBytes), mib(r.RssFileBytes), mib(r.PeakRssBytes), disk,
			r.ReadColdP50us, r.ReadColdP99us, r.ReadHotP50us, r.ReadHotP99us)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| build | engine | intents | snapshot s (Sync s) | snapshot MB | snapshot peak +MiB | checkpoint s | restore s | restore peak RSS MiB (after) | clean restart: open s, tail skipped s | restart replaying the tail: open s + replay s (entries) | RSS after restart MiB |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, k := range order {
		r := reps[k]
		snap := secs(r.SnapshotSec)
		if r.SnapshotSyncSec > 0 {
			snap += fmt.Sprintf(" (%s)", secs(r.SnapshotSyncSec))
		}
		restorePeak := mib(r.RestorePeakRss) + " (" + mib(r.RestoreRss) + ")"
		if r.InProcess {
			restorePeak = "in the fill's process (" + mib(r.RestoreRss) + ")"
		}
		clean := "–"
		if r.RestartOpenSec > 0 {
			clean = secs(r.RestartOpenSec) + ", " + secs(r.RestartSkipSec)
		}
		tail := "–"
		if r.TailRestartOpenSec > 0 {
			tail = fmt.Sprintf("%s + %s (%d)", secs(r.TailRestartOpenSec), secs(r.TailRestartReplaySec), r.TailRestartReplayed)
		}
		rss := mib(r.TailRestartRss)
		if r.RestartRss > 0 {
			rss = mib(r.RestartRss) + " clean, " + rss + " with the tail"
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %.0f | %d | %s | %s | %s | %s | %s | %s |\n",
			r.Build, r.Engine, r.N, snap, float64(r.SnapshotBytes)/1e6, r.SnapshotPeakExtra>>20, secs(r.CheckpointSec),
			secs(r.RestoreSec), restorePeak, clean, tail, rss)
	}
	return nil
}
