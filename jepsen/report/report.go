// Package report writes what a fault run found into a results directory:
// results.json (machine-readable figures and violations),
// linearizability.html (porcupine's visualization, with the faults as
// annotations), latency.svg (latency of ok ops and throughput over time,
// fault periods shaded) and summary.txt (the one-screen summary, with the
// command line that reproduces the run).
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/intentledger/intentd/jepsen/checker"
	"github.com/intentledger/intentd/jepsen/history"
)

// Files Write creates in the results directory.
const (
	ResultsFile         = "results.json"
	LinearizabilityFile = "linearizability.html"
	LatencyFile         = "latency.svg"
	SummaryFile         = "summary.txt"
)

const (
	maxViolationsSummary = 20 // violations listed in the summary
	maxViolationNotes    = 50 // violations annotated in the HTML
)

// Run describes how a run was made, so a report can say what it tested
// and how to reproduce it.
type Run struct {
	Seed      int64
	Command   string // the command line that reproduces the run
	Nodes     int
	Nemeses   []string
	Workloads []string
	Duration  time.Duration
	Started   time.Time
	// Harness is the harness's own trouble (a fault step that failed), ""
	// when none: the checkers still judged the history it left, and the
	// verdict names both.
	Harness string
	// Network describes the link-delay layer ("" without one): the
	// regions layout, the round trips and the jitter.
	Network string
	// Notes are what the harness wants the reader to know about how the
	// run differs from what was asked (e.g. node flags the binary lacked).
	Notes []string
}

// Write writes results.json, linearizability.html, latency.svg and
// summary.txt into dir, creating it if needed. lin is what checker.Check
// returned with res.
func Write(dir string, run Run, ops []history.Op, effects []history.Effect, faults []history.Fault, res checker.Result, lin checker.Linearization) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	results, err := json.MarshalIndent(resultsDocument(run, faults, res), "", "  ")
	if err != nil {
		return fmt.Errorf("report: encode %s: %w", ResultsFile, err)
	}
	var html bytes.Buffer
	if err := visualize(&html, ops, faults, res, lin); err != nil {
		return fmt.Errorf("report: render %s: %w", LinearizabilityFile, err)
	}
	files := []struct {
		name string
		data []byte
	}{
		{ResultsFile, append(results, '\n')},
		{LinearizabilityFile, html.Bytes()},
		{LatencyFile, latencySVG(run, ops, faults)},
		{SummaryFile, []byte(Summary(run, res))},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}

// faultEnd is when a fault stopped; one still active lasts until end.
func faultEnd(f history.Fault, end time.Duration) time.Duration {
	if f.End == 0 || f.End < f.Start {
		return end
	}
	return f.End
}

// nemesisColors gives each nemesis name a stable colour (by sorted name).
func nemesisColors(faults []history.Fault) map[string]string {
	palette := []string{"#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#2ca02c"}
	var names []string
	seen := map[string]bool{}
	for _, f := range faults {
		if !seen[f.Nemesis] {
			seen[f.Nemesis] = true
			names = append(names, f.Nemesis)
		}
	}
	sort.Strings(names)
	colors := make(map[string]string, len(names))
	for i, n := range names {
		colors[n] = palette[i%len(palette)]
	}
	return colors
}

// visualize writes porcupine's HTML for lin, with each fault as an
// annotation row per nemesis, leader changes, and the violations' ops.
func visualize(w *bytes.Buffer, ops []history.Op, faults []history.Fault, res checker.Result, lin checker.Linearization) error {
	model := lin.Model
	if model.Step == nil && model.StepContext == nil {
		model = checker.Model()
	}
	info := lin.Info // a copy: the annotations below stay out of the caller's
	end := lin.End
	if end <= 0 {
		end = int64(res.Span) + 1
	}
	colors := nemesisColors(faults)
	var notes []porcupine.Annotation
	for _, f := range faults {
		fEnd := int64(f.End)
		if f.End == 0 || f.End < f.Start {
			fEnd = end
		}
		details := f.Detail
		if len(f.Targets) > 0 {
			details += fmt.Sprintf(" targets=%v", f.Targets)
		}
		details += fmt.Sprintf(" leader %s → %s", orNone(f.LeaderBefore), orNone(f.LeaderAfter))
		notes = append(notes, porcupine.Annotation{Tag: "nemesis " + f.Nemesis, Start: int64(f.Start), End: fEnd,
			Description: f.Nemesis, Details: details, BackgroundColor: colors[f.Nemesis], TextColor: "#ffffff"})
		if f.LeaderBefore != "" && f.LeaderAfter != "" && f.LeaderBefore != f.LeaderAfter {
			notes = append(notes, porcupine.Annotation{Tag: "leader", Start: fEnd,
				Description: f.LeaderBefore + "→" + f.LeaderAfter, Details: "leader changed across " + f.Nemesis})
		}
	}
	byID := make(map[int]history.Op, len(ops))
	for _, op := range ops {
		byID[op.ID] = op
	}
	for i, v := range res.Violations {
		if i == maxViolationNotes {
			break
		}
		start, stop, found := int64(0), int64(0), false
		for _, id := range v.OpIDs {
			op, ok := byID[id]
			if !ok {
				continue
			}
			ret := op.Return
			if ret < op.Invoke {
				ret = op.Invoke
			}
			if !found || int64(op.Invoke) < start {
				start = int64(op.Invoke)
			}
			stop = max(stop, int64(ret))
			found = true
		}
		if !found {
			continue
		}
		notes = append(notes, porcupine.Annotation{Tag: "violations", Start: start, End: stop,
			Description: v.Checker, Details: v.String(), BackgroundColor: "#ff0000", TextColor: "#ffffff"})
	}
	info.AddAnnotations(notes)
	return porcupine.Visualize(model, info, w)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
