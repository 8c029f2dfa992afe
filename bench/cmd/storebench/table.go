package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/intentledger/intentd/bench/storeeval"
)

// table reads storebench's JSON lines and writes two Markdown tables:
// applies and reads, then memory, disk, checkpoint and restart.
func table(r io.Reader, w io.Writer) error {
	var reps []storeeval.Report
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rep storeeval.Report
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			return fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		reps = append(reps, rep)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	name := func(r storeeval.Report) string {
		if r.ScanFromStart {
			return r.Engine + " (scan from start)"
		}
		return r.Engine
	}
	ms := func(us float64) float64 { return us / 1e3 }
	mb := func(b uint64) float64 { return float64(b) / (1 << 20) }
	fmt.Fprintln(w, "| engine | intents | load (1, 5, 15 min) | fill applies/s | fill batch p50 / p99 ms | steady applies/s | steady batch p50 / p99 ms | cold read p50 / p99 µs | hot read p50 / p99 µs |")
	fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range reps {
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %.1f / %.1f | %.0f | %.1f / %.1f | %.1f / %.0f | %.1f / %.0f |\n",
			name(r), r.N, r.LoadStart, r.FillApplyPerSec, ms(r.FillBatchP50us), ms(r.FillBatchP99us),
			r.SteadyApplyPerSec, ms(r.SteadyBatchP50us), ms(r.SteadyBatchP99us),
			r.ReadColdP50us, r.ReadColdP99us, r.ReadHotP50us, r.ReadHotP99us)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| engine | live intents | Go heap MiB (B/intent) | RSS MiB: anon + file | peak RSS MiB | disk B/intent | written by syscalls ÷ logical | checkpoint s, MB, peak +MiB | pebble link checkpoint s | restart s (RSS MiB after) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range reps {
		link := "–"
		if r.LinkCheckpoint > 0 {
			link = fmt.Sprintf("%.2f", r.LinkCheckpoint)
		}
		disk, amp := "–", "–"
		if r.DiskBytes > 0 {
			disk = fmt.Sprintf("%.0f", r.DiskPerIntent)
			amp = fmt.Sprintf("%.1f", r.WriteAmp)
		}
		fmt.Fprintf(w, "| %s | %d | %.0f (%.0f) | %.0f + %.0f | %.0f | %s | %s | %.2f, %.0f, %.0f | %s | %.2f (%.0f) |\n",
			name(r), r.Live, mb(r.HeapBytes), r.HeapPerIntent, mb(r.RssAnonBytes), mb(r.RssFileBytes), mb(r.PeakRssBytes),
			disk, amp, r.CheckpointSec, float64(r.CheckpointBytes)/1e6, float64(r.CheckpointPeak)/(1<<20), link,
			r.RestartSec, mb(r.RestartRss))
	}
	return nil
}
