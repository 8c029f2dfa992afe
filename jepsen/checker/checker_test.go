package checker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// run is a hand-made history. Op IDs are indexes; times are milliseconds.
type run struct {
	ops     []history.Op
	effects []history.Effect
	faults  []history.Fault
	digests map[string]string
	panics  []string
}

// add appends op invoked at inv and returned at ret (ret < 0: still
// pending, an info op) and returns its ID.
func (r *run) add(op history.Op, inv, ret int) int {
	op.ID = len(r.ops)
	op.Invoke = ms(inv)
	if ret >= 0 {
		op.Return = ms(ret)
	}
	if op.Outcome == "" {
		op.Outcome = history.OutcomeOK
	}
	r.ops = append(r.ops, op)
	return op.ID
}

func (r *run) effect(key, owner string, fence uint64, at int) {
	r.effects = append(r.effects, history.Effect{Key: key, Owner: owner, FencingToken: fence, At: ms(at)})
}

func (r *run) check(opt Options) Result {
	res, _ := Check(r.ops, r.effects, r.faults, r.digests, r.panics, opt)
	return res
}

func grant(p int, key, owner string, fence uint64, created bool) history.Op {
	return history.Op{Process: p, Type: history.OpClaim, Key: key, Owner: owner, Payload: "a",
		Status: "granted", Created: created, State: "declared", IntentOwner: owner, IntentFence: fence,
		Generation: 1, IntentTag: "a"}
}

func refused(p int, key, owner, status, state, holder string, fence uint64) history.Op {
	return history.Op{Process: p, Type: history.OpClaim, Key: key, Owner: owner, Payload: "a",
		Status: status, State: state, IntentOwner: holder, IntentFence: fence, Generation: 1, IntentTag: "a"}
}

func complete(p int, key, owner string, fence uint64, status string) history.Op {
	return history.Op{Process: p, Type: history.OpComplete, Key: key, Owner: owner, FencingToken: fence, Status: status}
}

func completed(p int, key, owner string, fence uint64) history.Op {
	op := complete(p, key, owner, fence, "ok")
	op.State, op.IntentOwner, op.IntentFence, op.Generation = "executed", owner, fence, 1
	return op
}

func read(p int, key, state, owner string, fence uint64) history.Op {
	return history.Op{Process: p, Type: history.OpRead, Key: key, Status: "ok", State: state,
		IntentOwner: owner, IntentFence: fence, Generation: 1, IntentTag: "a"}
}

func readNotFound(p int, key string) history.Op {
	return history.Op{Process: p, Type: history.OpRead, Key: key, Status: "not_found"}
}

// unknown turns op into an info op: its answer was never seen.
func unknown(op history.Op) history.Op {
	op.Outcome, op.Status = history.OutcomeInfo, "outcome_unknown"
	op.Created, op.State, op.IntentOwner, op.IntentFence, op.Generation, op.IntentTag = false, "", "", 0, 0, ""
	return op
}

func failed(op history.Op, status string) history.Op {
	op = unknown(op)
	op.Outcome, op.Status = history.OutcomeFail, status
	return op
}

// validRun is a W1/W2 history with contention, a lost answer that the
// same owner's retry recovers, refusals, a failed op and final reads.
func validRun() *run {
	r := &run{digests: map[string]string{"n1": "abc", "n2": "abc", "n3": "abc"}}
	// k1: o0 wins, o1 is told in_flight, o2 arrives after the effect.
	r.add(grant(0, "k1", "o0", 10, true), 0, 5)                              // 0
	r.add(refused(1, "k1", "o1", "in_flight", "declared", "o0", 10), 1, 6)   // 1
	r.effect("k1", "o0", 10, 6)                                              //
	r.add(completed(0, "k1", "o0", 10), 7, 9)                                // 2
	r.add(refused(2, "k1", "o2", "duplicate", "executed", "o0", 10), 10, 12) // 3
	r.add(failed(grant(1, "k1", "o1", 0, false), "no_leader"), 11, 13)       // 4
	r.add(read(5, "k1", "executed", "o0", 10), 20, 21)                       // 5
	// k2: o3's first claim is lost but took effect; its retry is granted.
	r.add(unknown(grant(3, "k2", "o3", 0, false)), 2, 4)                     // 6
	r.add(grant(3, "k2", "o3", 11, false), 8, 10)                            // 7
	r.effect("k2", "o3", 11, 10)                                             //
	r.add(completed(3, "k2", "o3", 11), 11, 12)                              // 8
	r.add(refused(4, "k2", "o4", "duplicate", "executed", "o3", 11), 13, 15) // 9
	r.add(read(5, "k2", "executed", "o3", 11), 20, 22)                       // 10
	r.faults = []history.Fault{{Nemesis: "kill-leader", Start: ms(1), End: ms(9), LeaderBefore: "n1", LeaderAfter: "n2"}}
	return r
}

var requireAll = Options{Timeout: 10 * time.Second,
	RequireOK: []history.OpType{history.OpClaim, history.OpComplete, history.OpRead}}

func TestCheckers(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *run)
		opt    Options
		want   string // checker that must report; "" for a valid history
		wantOp []int  // op IDs one of its violations must name
		detail string // text that violation's detail must contain
	}{
		{name: "valid history", mutate: func(*run) {}},
		{name: "two owners granted one key", want: CheckAtMostOnce, wantOp: []int{0, 11}, detail: "granted to 2 owners", mutate: func(r *run) {
			r.add(grant(1, "k1", "o1", 12, true), 5, 7)
		}},
		{name: "two effects for one key", want: CheckAtMostOnce, detail: "2 side effects", mutate: func(r *run) {
			r.effect("k1", "o0", 10, 15)
		}},
		{name: "effect by an owner never granted", want: CheckAtMostOnce, detail: "never granted", mutate: func(r *run) {
			r.effect("k3", "o9", 40, 15)
		}},
		{name: "effect with another token than granted", want: CheckAtMostOnce, detail: "granted another token", mutate: func(r *run) {
			r.effects[1].FencingToken = 12
		}},
		{name: "one fencing token for two keys", want: CheckAtMostOnce, wantOp: []int{0, 11}, detail: "granted for key", mutate: func(r *run) {
			r.add(grant(6, "k3", "o6", 10, true), 30, 31)
			r.add(read(6, "k3", "declared", "o6", 10), 32, 33)
		}},
		{name: "grant created after a larger grant returned", want: CheckAtMostOnce, wantOp: []int{7, 11}, detail: "had returned", mutate: func(r *run) {
			r.add(grant(6, "k3", "o6", 9, true), 30, 31)
			r.add(read(6, "k3", "declared", "o6", 9), 32, 33)
		}},
		{name: "grant for a divergent payload", want: CheckNoDivergentGrant, wantOp: []int{0, 11}, mutate: func(r *run) {
			op := grant(0, "k1", "o0", 10, false)
			op.Payload = "b"
			r.add(op, 5, 6)
		}},
		{name: "duplicate for a divergent payload", want: CheckNoDivergentGrant, mutate: func(r *run) {
			r.ops[3].Payload = "b"
		}},
		{name: "acknowledged complete lost", want: CheckNoLostAck, wantOp: []int{2, 5}, mutate: func(r *run) {
			r.ops[5] = read(5, "k1", "declared", "o0", 10)
			r.ops[5].ID, r.ops[5].Invoke, r.ops[5].Return, r.ops[5].Outcome = 5, ms(20), ms(21), history.OutcomeOK
		}},
		{name: "acknowledged grant lost", want: CheckNoLostAck, wantOp: []int{7, 10}, mutate: func(r *run) {
			r.ops[10] = readNotFound(5, "k2")
			r.ops[10].ID, r.ops[10].Invoke, r.ops[10].Return, r.ops[10].Outcome = 10, ms(20), ms(22), history.OutcomeOK
		}},
		{name: "acknowledged grant shown with an older token", want: CheckNoLostAck, wantOp: []int{11, 12},
			detail: "acknowledged grant", mutate: func(r *run) {
				r.add(grant(6, "k3", "o6", 30, true), 30, 31)
				r.add(read(7, "k3", "declared", "o6", 29), 40, 41)
			}},
		{name: "stale read after a newer write", want: CheckLinearizable, wantOp: []int{11}, detail: "no linearization", mutate: func(r *run) {
			r.add(read(6, "k1", "declared", "o0", 10), 13, 14)
		}},
		{name: "read of a record nobody created", want: CheckLinearizable, wantOp: []int{11}, mutate: func(r *run) {
			r.add(read(6, "k3", "declared", "o6", 30), 40, 41)
		}},
		{name: "info claim explains a later record", mutate: func(r *run) {
			r.add(unknown(grant(6, "k3", "o6", 0, true)), 30, -1)
			r.add(read(7, "k3", "declared", "o6", 30), 40, 41)
		}},
		{name: "info complete explains an executed record", mutate: func(r *run) {
			r.add(grant(6, "k3", "o6", 30, true), 30, 31)
			r.effect("k3", "o6", 30, 32)
			r.add(unknown(complete(6, "k3", "o6", 30, "")), 33, -1)
			r.add(read(7, "k3", "executed", "o6", 30), 40, 41)
		}},
		{name: "token seen first by a complete fixes an info grant", mutate: func(r *run) {
			r.add(unknown(grant(6, "k3", "o6", 0, true)), 30, 31)
			r.add(completed(6, "k3", "o6", 30), 32, 33)
			r.add(read(7, "k3", "executed", "o6", 30), 40, 41)
		}},
		{name: "a read cannot see two tokens for one unknown grant", want: CheckLinearizable, mutate: func(r *run) {
			r.add(unknown(grant(6, "k3", "o6", 0, true)), 30, 31)
			r.add(read(7, "k3", "declared", "o6", 30), 32, 33)
			r.add(read(7, "k3", "declared", "o6", 31), 34, 35)
		}},
		{name: "in_doubt answer with leases longer than the run", want: CheckLinearizable, mutate: func(r *run) {
			r.add(refused(6, "k1", "o6", "in_doubt", "in_doubt", "o0", 10), 4, 5)
		}},
		{name: "complete fenced although owner and token match", want: CheckLinearizable, mutate: func(r *run) {
			r.add(complete(0, "k1", "o0", 10, "fenced"), 13, 14)
		}},
		{name: "ok op with a failure status", want: CheckHistory, wantOp: []int{11}, mutate: func(r *run) {
			op := grant(6, "k3", "o6", 0, false)
			op.Status = "no_leader"
			r.add(op, 30, 31)
		}},
		{name: "grant without a fencing token", want: CheckHistory, mutate: func(r *run) {
			r.add(grant(6, "k3", "o6", 0, true), 30, 31)
		}},
		{name: "digests differ", want: CheckDigestsEqual, mutate: func(r *run) {
			r.digests["n3"] = "abd"
		}},
		{name: "digests not collected", want: CheckDigestsEqual, mutate: func(r *run) {
			r.digests = nil
		}},
		{name: "panic in a node log", want: CheckNoPanic, mutate: func(r *run) {
			r.panics = []string{"n2: panic: fsm: claim on unknown state \"x\""}
		}},
		{name: "no ok read", want: CheckEveryOpOK, mutate: func(r *run) {
			r.ops[5] = failed(r.ops[5], "no_leader")
			r.ops[10] = unknown(r.ops[10])
		}},
		{name: "no ok read but reads not required", opt: Options{RequireOK: []history.OpType{history.OpClaim}}, mutate: func(r *run) {
			r.ops[5] = failed(r.ops[5], "no_leader")
			r.ops[10] = unknown(r.ops[10])
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := validRun()
			tc.mutate(r)
			opt := tc.opt
			if opt.RequireOK == nil {
				opt = requireAll
			}
			res := r.check(opt)
			if tc.want == "" {
				if !res.Valid || len(res.Violations) != 0 {
					t.Fatalf("want a valid history, got violations:\n%s", violationLines(res))
				}
				return
			}
			if res.Valid {
				t.Fatalf("want a %s violation, history judged valid", tc.want)
			}
			var found bool
			for _, v := range res.Violations {
				if v.Checker != tc.want {
					continue
				}
				if containsAll(v.OpIDs, tc.wantOp) && strings.Contains(v.Detail, tc.detail) {
					found = true
				}
			}
			if !found {
				t.Fatalf("want a %s violation naming ops %v and saying %q, got:\n%s", tc.want, tc.wantOp, tc.detail, violationLines(res))
			}
		})
	}
}

func containsAll(have, want []int) bool {
	for _, id := range want {
		if !slices.Contains(have, id) {
			return false
		}
	}
	return true
}

func violationLines(res Result) string {
	var b strings.Builder
	for _, v := range res.Violations {
		b.WriteString("  " + v.String() + "\n")
	}
	return b.String()
}

func TestCheckCounts(t *testing.T) {
	r := validRun()
	res := r.check(requireAll)
	tests := []struct {
		name      string
		got, want int
	}{
		{"ok claims", res.OpsByTypeOutcome["claim"]["ok"], 5},
		{"failed claims", res.OpsByTypeOutcome["claim"]["fail"], 1},
		{"info claims", res.OpsByTypeOutcome["claim"]["info"], 1},
		{"ok reads", res.OpsByTypeOutcome["read"]["ok"], 2},
		{"granted answers", res.StatusCounts["claim:granted"], 2},
		{"no_leader answers", res.StatusCounts["claim:no_leader"], 1},
		{"linearizability keys", res.Linearizability.Keys, 2},
		{"linearizability ops (failed op dropped)", res.Linearizability.Ops, 10},
		{"linearizability info ops", res.Linearizability.InfoOps, 1},
		{"acks checked", res.Acks.Checked, 4},
		{"checkers reported", len(res.Checkers), len(CheckerNames())},
		{"leader changes", res.LeaderChanges, 1},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	if res.Linearizability.Result != "Ok" {
		t.Errorf("porcupine result %q, want Ok", res.Linearizability.Result)
	}
}

// TestLinearizabilityTimeout gives porcupine a key it cannot finish in
// time: many lost claims by different owners, then a read no order of
// them explains. An unknown verdict must be a violation, not a pass.
func TestLinearizabilityTimeout(t *testing.T) {
	r := &run{digests: map[string]string{"n1": "d"}}
	for i := range 40 {
		r.add(unknown(grant(i, "k", fmt.Sprintf("o%d", i), 0, true)), i, -1)
	}
	r.add(read(99, "k", "declared", "nobody", 7), 100, 101)
	start := time.Now()
	res := r.check(Options{Timeout: 50 * time.Millisecond})
	if elapsed := time.Since(start); elapsed > 30*time.Second {
		t.Errorf("check took %v with a 50ms timeout", elapsed)
	}
	var timedOut bool
	for _, v := range res.Violations {
		if v.Checker == CheckLinearizable && strings.Contains(v.Detail, "did not finish") {
			timedOut = true
		}
	}
	if !timedOut || res.Valid {
		t.Fatalf("porcupine %s: want a timeout violation, got:\n%s", res.Linearizability.Result, violationLines(res))
	}
}

// A claim refused with 507 ledger_full (a full disk) is a definite
// refusal: the history stays valid, and the 5xx answers are counted by
// code and problem.
func TestCheckCountsServerErrors(t *testing.T) {
	r := validRun()
	r.ops[4].HTTP = 503 // no_leader
	full := failed(grant(6, "k3", "o6", 0, false), "ledger_full")
	full.HTTP = 507
	r.add(full, 14, 15)
	res := r.check(requireAll)
	if !res.Valid {
		t.Fatalf("a ledger_full refusal made the history invalid:\n%s", violationLines(res))
	}
	want := map[string]int{"507 ledger_full": 1, "503 no_leader": 1}
	if !maps.Equal(res.ServerErrors, want) {
		t.Fatalf("server errors %v, want %v", res.ServerErrors, want)
	}
}
