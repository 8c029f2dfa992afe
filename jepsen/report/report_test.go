package report

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/checker"
	"github.com/intentledger/intentd/jepsen/history"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// synthetic is a small run: two keys claimed under contention across a
// leader kill, one answer lost, final reads, and a partition still active
// at the end.
func synthetic() ([]history.Op, []history.Effect, []history.Fault) {
	var ops []history.Op
	add := func(op history.Op, inv, ret int) {
		op.ID, op.Invoke, op.Return = len(ops), ms(inv), ms(ret)
		if op.Outcome == "" {
			op.Outcome = history.OutcomeOK
		}
		ops = append(ops, op)
	}
	grant := func(p int, key, owner string, fence uint64) history.Op {
		return history.Op{Process: p, Type: history.OpClaim, Key: key, Owner: owner, Payload: "a", Status: "granted",
			Created: true, State: "declared", IntentOwner: owner, IntentFence: fence, Generation: 1, IntentTag: "a"}
	}
	complete := func(p int, key, owner string, fence uint64) history.Op {
		return history.Op{Process: p, Type: history.OpComplete, Key: key, Owner: owner, FencingToken: fence, Status: "ok",
			State: "executed", IntentOwner: owner, IntentFence: fence}
	}
	read := func(p int, key, owner string, fence uint64) history.Op {
		return history.Op{Process: p, Type: history.OpRead, Key: key, Status: "ok", State: "executed",
			IntentOwner: owner, IntentFence: fence}
	}
	add(grant(0, "k1", "o0", 10), 0, 40)
	add(history.Op{Process: 1, Type: history.OpClaim, Key: "k1", Owner: "o1", Payload: "a", Status: "in_flight"}, 50, 60)
	add(complete(0, "k1", "o0", 10), 100, 130)
	add(history.Op{Process: 2, Type: history.OpClaim, Key: "k2", Owner: "o2", Payload: "a",
		Outcome: history.OutcomeInfo, Status: "outcome_unknown"}, 1200, 2200)
	add(history.Op{Process: 3, Type: history.OpClaim, Key: "k2", Owner: "o3", Payload: "a",
		Outcome: history.OutcomeFail, Status: "no_leader"}, 1300, 1310)
	add(grant(2, "k2", "o2", 12), 2600, 3100)
	add(complete(2, "k2", "o2", 12), 3200, 3250)
	add(read(4, "k1", "o0", 10), 4000, 4010)
	add(read(4, "k2", "o2", 12), 4020, 4030)
	effects := []history.Effect{
		{Key: "k1", Owner: "o0", FencingToken: 10, At: ms(50)},
		{Key: "k2", Owner: "o2", FencingToken: 12, At: ms(3150)},
	}
	faults := []history.Fault{
		{Nemesis: "kill-leader", Detail: "kill -9 n1", Targets: []string{"n1"}, Start: ms(1000), End: ms(2500),
			LeaderBefore: "n1", LeaderAfter: "n2"},
		{Nemesis: "partition-halves", Detail: "n1 | n2 n3", Start: ms(3500), LeaderBefore: "n2"},
	}
	return ops, effects, faults
}

func testRun() Run {
	return Run{Seed: 42, Command: "go run ./cmd/jepsen --seed 42 --nodes 3", Nodes: 3,
		Nemeses: []string{"kill-leader", "partition-halves"}, Workloads: []string{"w1", "w2"},
		Duration: 5 * time.Second, Started: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
}

func writeSynthetic(t *testing.T) (string, checker.Result) {
	t.Helper()
	ops, effects, faults := synthetic()
	res, lin := checker.Check(ops, effects, faults, map[string]string{"n1": "d", "n2": "d", "n3": "d"}, nil,
		checker.Options{Timeout: 10 * time.Second})
	if !res.Valid {
		t.Fatalf("synthetic history is invalid: %v", res.Violations)
	}
	dir := filepath.Join(t.TempDir(), "results")
	if err := Write(dir, testRun(), ops, effects, faults, res, lin); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return dir, res
}

func TestWriteResultsJSON(t *testing.T) {
	dir, _ := writeSynthetic(t)
	data, err := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("results.json does not parse: %v", err)
	}
	tests := []struct {
		path string
		want any // nil: the field must exist
	}{
		{"valid", true},
		{"run.seed", 42.0},
		{"run.command", "go run ./cmd/jepsen --seed 42 --nodes 3"},
		{"run.nodes", 3.0},
		{"run.started", "2026-12-01T10:00:00Z"},
		{"ops", 9.0},
		{"ops_by_type_outcome.claim.ok", 3.0},
		{"ops_by_type_outcome.claim.info", 1.0},
		{"ops_by_type_outcome.claim.fail", 1.0},
		{"ops_by_type_outcome.read.ok", 2.0},
		{"status_counts.claim:granted", 2.0},
		{"info_rate_per_nemesis.kill-leader.ops", 2.0},
		{"info_rate_per_nemesis.kill-leader.info", 1.0},
		{"info_rate_per_nemesis.kill-leader.info_rate", 0.5},
		{"info_rate_per_nemesis.partition-halves.ops", 2.0},
		{"no_fault.ops", 5.0},
		{"violations", nil},
		{"unavailability.leader_faults", 1.0}, // the partition still active at the end moved no known leader
		{"unavailability.p50_ms", nil},
		{"unavailability.p99_ms", nil},
		{"unavailability.max_ms", 2100.0}, // kill at 1000 ms, first ok write after it returns at 3100 ms
		{"leader_changes", 1.0},
		{"linearizability.result", "Ok"},
		{"checkers", nil},
		{"faults", nil},
	}
	for _, tc := range tests {
		got, ok := lookup(doc, tc.path)
		if !ok {
			t.Errorf("results.json has no %s", tc.path)
			continue
		}
		if tc.want != nil && got != tc.want {
			t.Errorf("%s = %v (%T), want %v (%T)", tc.path, got, got, tc.want, tc.want)
		}
	}
	if v, _ := lookup(doc, "violations"); v == nil {
		t.Error("violations is null, want []")
	}
}

// lookup follows a dotted path through decoded JSON objects.
func lookup(doc map[string]any, path string) (any, bool) {
	var cur any = doc
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func TestWriteLatencySVG(t *testing.T) {
	dir, _ := writeSynthetic(t)
	_, _, faults := synthetic()
	f, err := os.Open(filepath.Join(dir, LatencyFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[string]int{}
	dec := xml.NewDecoder(f)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("latency.svg is not well-formed XML: %v", err)
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		counts[el.Name.Local]++
		for _, a := range el.Attr {
			if a.Name.Local == "class" {
				counts[el.Name.Local+"."+a.Value]++
			}
		}
	}
	tests := []struct {
		what string
		want int
	}{
		{"svg", 1},
		{"rect.fault", len(faults)},
		{"circle", 5}, // one dot per ok claim (3) and ok complete (2)
		{"polyline.throughput", 1},
	}
	for _, tc := range tests {
		if counts[tc.what] != tc.want {
			t.Errorf("%d %s elements, want %d", counts[tc.what], tc.what, tc.want)
		}
	}
}

func TestWriteLinearizabilityHTML(t *testing.T) {
	dir, _ := writeSynthetic(t)
	data, err := os.ReadFile(filepath.Join(dir, LinearizabilityFile))
	if err != nil {
		t.Fatal(err)
	}
	html := string(data)
	for _, want := range []string{"<html", `"Description":"kill-leader"`, `"Description":"partition-halves"`, `"n1→n2"`} {
		if !strings.Contains(html, want) {
			t.Errorf("linearizability.html (%d bytes) lacks %q", len(data), want)
		}
	}
}

func TestWriteSummaryFile(t *testing.T) {
	dir, res := writeSynthetic(t)
	data, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), Summary(testRun(), res); got != want {
		t.Errorf("summary.txt differs from Summary:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteFailsWhereItCannotWrite(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ops, effects, faults := synthetic()
	res, lin := checker.Check(ops, effects, faults, nil, nil, checker.Options{})
	err := Write(filepath.Join(file, "results"), testRun(), ops, effects, faults, res, lin)
	var pathErr *fs.PathError
	if !errors.As(err, &pathErr) {
		t.Fatalf("Write under a file: got %v, want a wrapped *fs.PathError", err)
	}
}

func TestSummary(t *testing.T) {
	_, res := writeSynthetic(t)
	invalid := res
	invalid.Valid = false
	invalid.Violations = nil
	for i := range 25 {
		invalid.Violations = append(invalid.Violations, checker.Violation{Checker: checker.CheckAtMostOnce,
			Key: fmt.Sprintf("k%d", i), Detail: fmt.Sprintf("violation number %d", i), OpIDs: []int{i, i + 100}})
	}
	tests := []struct {
		name      string
		harness   string
		res       checker.Result
		firstLine string
		contains  []string
		lacks     []string
	}{
		{name: "valid", res: res, firstLine: "valid",
			contains: []string{"reproduce: go run ./cmd/jepsen --seed 42 --nodes 3", "kill-leader", "(no fault)",
				"leader changes: 1", "porcupine Ok", "seed 42"},
			lacks: []string{"INVALID", "violations (first"}},
		{name: "invalid", res: invalid, firstLine: "INVALID (25 violations)",
			contains: []string{"violations (first 20 of 25)", "violation number 19 (ops 19,119)", "reproduce: go run"},
			lacks:    []string{"violation number 20"}},
		{name: "harness trouble", harness: "nemesis membership: heal: no exit", res: res,
			firstLine: "valid but HARNESS TROUBLE",
			contains:  []string{"harness: nemesis membership: heal: no exit", "checkers judged the history"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := testRun()
			run.Harness = tc.harness
			s := Summary(run, tc.res)
			first, _, _ := strings.Cut(s, "\n")
			if !strings.Contains(first, tc.firstLine) {
				t.Errorf("first line %q lacks %q", first, tc.firstLine)
			}
			for _, want := range tc.contains {
				if !strings.Contains(s, want) {
					t.Errorf("summary lacks %q:\n%s", want, s)
				}
			}
			for _, bad := range tc.lacks {
				if strings.Contains(s, bad) {
					t.Errorf("summary has %q:\n%s", bad, s)
				}
			}
			if lines := strings.Count(s, "\n"); lines > 60 {
				t.Errorf("summary is %d lines, want one screen", lines)
			}
		})
	}
}
