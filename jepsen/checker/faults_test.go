package checker

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

func TestNemesisStatsAndUnavailability(t *testing.T) {
	r := &run{digests: map[string]string{"n1": "x"}}
	r.faults = []history.Fault{
		// The leader is killed at 100 ms; of the writes invoked after it,
		// the one invoked later returns first, at 350 ms: 250 ms.
		{Nemesis: "kill-leader", Start: ms(100), End: ms(200), LeaderBefore: "n1", LeaderAfter: "n2"},
		// A partition moves the leader: it counts too (50 ms).
		{Nemesis: "partition-halves", Start: ms(500), End: ms(600), LeaderBefore: "n2", LeaderAfter: "n3"},
		// A partition that keeps the leader does not.
		{Nemesis: "partition-halves", Start: ms(700), End: ms(800), LeaderBefore: "n3", LeaderAfter: "n3"},
		// Nothing succeeds after this one: not recovered.
		{Nemesis: "isolate-leader", Start: ms(900), LeaderBefore: "n3"},
		// Cut short by the run's end: counted as a fault, not as a window.
		{Nemesis: "kill-leader", Start: ms(1000), End: ms(1010), LeaderBefore: "n3", LeaderAfter: "n3", Cut: true},
	}
	r.add(grant(0, "k1", "o1", 10, true), 0, 10)                                   // before any fault
	r.add(unknown(grant(1, "k2", "o2", 0, true)), 110, 150)                        // during kill-leader
	r.add(unknown(grant(2, "k3", "o3", 0, true)), 120, -1)                         // during kill-leader
	r.add(grant(3, "k4", "o4", 11, true), 130, 400)                                // during kill-leader
	r.add(completed(4, "k1", "o1", 10), 250, 350)                                  // between faults
	r.add(failed(grant(5, "k5", "o5", 0, true), "no_leader"), 510, 520)            // during partition
	r.add(grant(5, "k5", "o5", 12, true), 530, 550)                                // during partition
	r.add(read(6, "k1", "executed", "o1", 10), 710, 720)                           // during the second partition
	r.add(failed(complete(0, "k1", "o1", 10, "no_leader"), "no_leader"), 950, 960) // during isolate-leader
	res := r.check(Options{})

	byName := map[string]NemesisStats{}
	for _, n := range res.Nemeses {
		byName[n.Name] = n
	}
	counts := []struct {
		name        string
		got         OutcomeCounts
		faults      int
		ops, info   int
		wantFaultsN int
	}{
		{name: "kill-leader", got: byName["kill-leader"].OutcomeCounts, faults: byName["kill-leader"].Faults, ops: 3, info: 2, wantFaultsN: 2},
		{name: "partition-halves", got: byName["partition-halves"].OutcomeCounts, faults: byName["partition-halves"].Faults, ops: 3, info: 0, wantFaultsN: 2},
		{name: "isolate-leader", got: byName["isolate-leader"].OutcomeCounts, faults: byName["isolate-leader"].Faults, ops: 1, info: 0, wantFaultsN: 1},
		{name: "no fault", got: res.NoFault, ops: 2, info: 0},
	}
	for _, c := range counts {
		if c.got.Ops != c.ops || c.got.Info != c.info || c.faults != c.wantFaultsN {
			t.Errorf("%s: got %d ops, %d info, %d faults; want %d ops, %d info, %d faults",
				c.name, c.got.Ops, c.got.Info, c.faults, c.ops, c.info, c.wantFaultsN)
		}
	}
	if got, want := byName["kill-leader"].InfoRate, 2.0/3.0; got != want {
		t.Errorf("kill-leader info rate %v, want %v", got, want)
	}

	u := res.Unavailability
	want := Unavailability{Faults: 3, Recovered: 2, P50: ms(50), P99: ms(250), Max: ms(250)}
	if u.Faults != want.Faults || u.Recovered != want.Recovered || u.P50 != want.P50 || u.P99 != want.P99 || u.Max != want.Max {
		t.Errorf("unavailability %+v, want %+v", u, want)
	}
	windows := []struct {
		length    time.Duration
		recovered bool
		opID      int
	}{{ms(250), true, 4}, {ms(50), true, 6}, {0, false, -1}}
	if len(u.Windows) != len(windows) {
		t.Fatalf("%d windows, want %d", len(u.Windows), len(windows))
	}
	for i, w := range windows {
		if got := u.Windows[i]; got.Length != w.length || got.Recovered != w.recovered || got.OpID != w.opID {
			t.Errorf("window %d: %+v, want length %v recovered %v op %d", i, got, w.length, w.recovered, w.opID)
		}
	}
	if res.LeaderChanges != 2 {
		t.Errorf("%d leader changes, want 2", res.LeaderChanges)
	}
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		values []time.Duration
		q      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{[]time.Duration{5}, 0.99, 5},
		{[]time.Duration{1, 2, 3, 4}, 0.5, 2},
		{[]time.Duration{1, 2, 3, 4}, 0.99, 4},
		{[]time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9},
	}
	for _, tc := range tests {
		if got := percentile(tc.values, tc.q); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.values, tc.q, got, tc.want)
		}
	}
}

func TestFaultsHitNeedsALeaderChange(t *testing.T) {
	faults := []history.Fault{
		{Nemesis: "kill-leader", LeaderBefore: "n1", LeaderAfter: "n2", Start: time.Second, End: 2 * time.Second},
		{Nemesis: "isolate-leader", LeaderBefore: "n2", LeaderAfter: "n2", Start: 3 * time.Second, End: 4 * time.Second},
		{Nemesis: "pause-leader", LeaderBefore: "n2", LeaderAfter: "", Start: 5 * time.Second, End: 6 * time.Second},
		{Nemesis: "loss", LeaderBefore: "n2", LeaderAfter: "n2", Start: 7 * time.Second, End: 8 * time.Second},
		{Nemesis: "deafen-leader", LeaderBefore: "n2", Start: 9 * time.Second}, // still active: not judged
		{Nemesis: "kill-leader", LeaderBefore: "n2", LeaderAfter: "n2", Start: 10 * time.Second,
			End: 10500 * time.Millisecond, Cut: true}, // healed early by the run's end: not judged
		{Nemesis: "kill-leader", LeaderBefore: "n2", LeaderAfter: "n2", Start: 11 * time.Second,
			End: 12 * time.Second, Failed: "heal: no exit"}, // a harness failure: not judged
	}
	vs := checkFaultsHit(faults)
	if len(vs) != 2 || vs[0].Checker != CheckFaultsHit || !strings.Contains(vs[0].Detail, "isolate-leader") ||
		!strings.Contains(vs[1].Detail, "pause-leader") {
		t.Fatalf("violations = %v", vs)
	}
}

func TestTrustBoundaryReportsFindings(t *testing.T) {
	faults := []history.Fault{
		{Nemesis: "rogue-member", Start: time.Second, End: 2 * time.Second},
		{Nemesis: "rogue-member", Start: 3 * time.Second, End: 4 * time.Second, Finding: "n2 lists n1 (http 10.213.0.1:4000)"},
		{Nemesis: "raft-poke", Start: 5 * time.Second, End: 6 * time.Second},
	}
	vs := checkTrustBoundary(faults)
	if len(vs) != 1 || vs[0].Checker != CheckTrustBoundary || !strings.Contains(vs[0].Detail, "n2 lists n1") {
		t.Fatalf("violations = %v", vs)
	}
	if !slices.Contains(SafetyCheckers, CheckTrustBoundary) || !slices.Contains(CheckerNames(), CheckTrustBoundary) {
		t.Fatal("trust-boundary is not a safety checker that Check runs")
	}
}

// Failover after a lost region counts only ok writes through nodes
// outside it: an ok write through the lost region's node (a late answer
// of the old leader) does not end the window.
func TestFailoverCountsWritesElsewhere(t *testing.T) {
	write := func(id int, node string, invoke, ret int) history.Op {
		return history.Op{ID: id, Node: "http://" + node, Type: history.OpClaim, Outcome: history.OutcomeOK,
			Invoke: ms(invoke), Return: ms(ret)}
	}
	local := write(6, "n3", 150, 151) // a duplicate n3 answered from its own copy: no write
	local.Local = true
	ops := []history.Op{
		write(1, "n1", 90, 95),   // before the fault
		write(2, "n1", 110, 120), // through the lost region: not failover
		local,
		write(3, "n3", 130, 900),   // elsewhere, slow
		write(4, "n4", 200, 700),   // elsewhere: the first to return, 600 ms after the start
		write(5, "n3", 2100, 2400), // after the second fault, elsewhere: 400 ms
	}
	faults := []history.Fault{
		{Nemesis: "isolate-leader-region", Targets: []string{"n1", "n2"}, Start: ms(100), End: ms(1000), LeaderBefore: "n1", LeaderAfter: "n3"},
		{Nemesis: "kill-leader", Targets: []string{"n3"}, Start: ms(1500), End: ms(1600)}, // not a region loss
		{Nemesis: "kill-leader-region", Targets: []string{"n3", "n4"}, Start: ms(2000), End: ms(2500)},
		{Nemesis: "kill-leader-region", Targets: []string{"n1"}, Start: ms(3000), End: ms(3010), Cut: true},
	}
	nodeOf := func(s string) string { return strings.TrimPrefix(s, "http://") }
	u := failover(ops, faults, nodeOf)
	// The second region loss took n3 and n4, yet write 5 went through n3:
	// it is not elsewhere, so that window never recovers.
	if u.Faults != 2 || u.Recovered != 1 || u.P50 != ms(600) || u.Max != ms(600) {
		t.Fatalf("failover %+v", u)
	}
	if w := u.Windows[0]; w.OpID != 4 || w.Nemesis != "isolate-leader-region" {
		t.Errorf("first window %+v, want op 4", w)
	}
	if res, _ := Check(ops, nil, faults, nil, nil, Options{NodeOf: nodeOf}); res.Failover.Faults != 2 {
		t.Errorf("Check's failover %+v", res.Failover)
	}
	if res, _ := Check(ops, nil, faults, nil, nil, Options{}); res.Failover.Faults != 0 {
		t.Errorf("without NodeOf, failover %+v", res.Failover)
	}
}
