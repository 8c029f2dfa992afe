package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentledger/intentd/jepsen/report"
)

func writeRun(t *testing.T, dir, name string, res report.Results) {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, report.ResultsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// aggregate reads a soak's runs, prints the table, writes it between the
// markers of a document, and fails when a control was missed.
func TestAggregateWritesTheSoakTable(t *testing.T) {
	dir := t.TempDir()
	window := func(ms float64) report.WindowInfo { return report.WindowInfo{LengthMS: ms, Recovered: true} }
	writeRun(t, dir, "a", report.Results{Valid: true, Ops: 1000, LeaderChanges: 2,
		OpsByTypeOutcome: map[string]map[string]int{"claim": {"ok": 900, "info": 50}, "read": {"ok": 40, "info": 10}},
		Unavailability:   report.UnavailabilityInfo{Windows: []report.WindowInfo{window(1000), window(3000)}}})
	writeRun(t, dir, "b", report.Results{Valid: true, Ops: 2000, LeaderChanges: 1,
		Unavailability: report.UnavailabilityInfo{Windows: []report.WindowInfo{window(2000)}},
		Failover:       &report.UnavailabilityInfo{Windows: []report.WindowInfo{window(2500)}}})
	writeRun(t, dir, "c", report.Results{Ops: 500, Violations: []report.ViolationInfo{{Checker: "linearizable"}},
		Run: report.RunInfo{Network: "regions eu n1"}})
	tsv := "a\t3 nodes, lan, net\t\t0\t31\nb\t3 nodes, wan, net\t\t0\t33\nc\tcontrols, wan\tstale-reads\t0\t40\n"
	if err := os.WriteFile(filepath.Join(dir, "runs.tsv"), []byte(tsv), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "doc.md")
	if err := os.WriteFile(doc, []byte("# Doc\n\n"+soakBegin+"\nold table\n"+soakEnd+"\n\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"aggregate", "--doc", doc, "--wall-seconds", "120", "--matrix", "SEEDS=1", dir}, &out, &errOut); code != exitValid {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		"| 1 | 3 nodes, lan, net | 1,000 | 0 | 0 | 6.0% | 1.00 / 3.00 / 3.00 s (2) | 2 | - |",
		"| 1 | 3 nodes, wan, net | 2,000 | 0 | 0 | 0.0% | 2.00 / 2.00 / 2.00 s (1) | 1 | 2.50 / 2.50 / 2.50 s (1) |",
		"| 2 | **all runs** | 3,000 | 0 | 0 | 2.0% | 2.00 / 3.00 / 3.00 s (3) | 3 |",
		"| `stale-reads` | regions eu n1 | 500 | linearizable 1 | caught |",
		"2 runs, 3,000 operations checked, 0 violations, 0 failed runs; 1 of 1 controls caught. The runs took 2 min of machine time, one after another; the soak took 2 min of wall time.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); strings.Contains(s, "old table") || !strings.Contains(s, "**all runs**") || !strings.HasSuffix(s, soakEnd+"\n\nafter\n") {
		t.Errorf("doc after splice:\n%s", s)
	}

	// A missed control (exit 1) fails the soak, after writing the table.
	tsv = strings.Replace(tsv, "stale-reads\t0", "stale-reads\t1", 1)
	if err := os.WriteFile(filepath.Join(dir, "runs.tsv"), []byte(tsv), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(t.Context(), []string{"aggregate", dir}, &out, &errOut); code != exitInvalid || !strings.Contains(out.String(), "**MISSED**") {
		t.Errorf("a missed control: exit %d\n%s", code, out.String())
	}
	if code := run(t.Context(), []string{"aggregate", "--doc", filepath.Join(dir, "runs.tsv"), dir}, &out, &errOut); code != exitError {
		t.Errorf("a document without markers: exit %d", code)
	}
}
