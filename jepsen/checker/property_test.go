package checker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/jepsen/history"
)

// simulation generates valid single-copy histories: concurrent W1/W2
// clients whose ops take effect atomically, at one point between
// invocation and return, on the real state machine (fsm.Machine). Answers
// are lost at random (info), some ops never reach the ledger, and some
// are refused before it (fail).
type simulation struct {
	rng     *rand.Rand
	ledger  *fsm.Machine
	index   uint64
	now     time.Duration
	ops     []history.Op
	effects []history.Effect
	keys    []string
	tasks   int
	window  int
	perKey  int
}

// simClient works through tasks: claim a key until a definite answer,
// perform the effect once if granted, complete until a definite answer.
type simClient struct {
	process int
	key     string
	owner   string
	variant string
	fence   uint64
	done    bool // effect performed for this task
	phase   history.OpType
	// the op in flight
	pending int  // op index, -1 when idle
	applied bool // it reached the ledger
	lost    bool // it never will
	answer  history.Op
}

// newSimulation draws each task's key from the window most recent keys;
// a new key opens every perKey tasks (W1: a few claimants race per key).
func newSimulation(seed uint64, window, perKey int) *simulation {
	return &simulation{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), ledger: fsm.New(),
		window: window, perKey: perKey}
}

func (s *simulation) newTask(c *simClient) {
	s.tasks++
	for len(s.keys) <= s.tasks/s.perKey {
		s.keys = append(s.keys, fmt.Sprintf("charge:%d", len(s.keys)))
	}
	c.key = s.keys[max(0, len(s.keys)-1-s.rng.IntN(s.window))]
	c.owner = fmt.Sprintf("p%d/t%d", c.process, s.tasks)
	c.variant = "a"
	if s.rng.IntN(20) == 0 {
		c.variant = "b"
	}
	c.fence, c.done, c.phase = 0, false, history.OpClaim
}

// apply runs op on the ledger now and returns the op with the answer.
func (s *simulation) apply(op history.Op) history.Op {
	at := fsm.Header{At: int64(s.now)}
	var r *fsm.Result
	switch op.Type {
	case history.OpClaim:
		s.index++
		r = s.ledger.ApplyCommand(s.index, &fsm.Claim{Header: at, Namespace: "default", Key: op.Key, Tool: "t",
			Owner: op.Owner, Payload: json.RawMessage(`{"v":"` + op.Payload + `"}`), Fingerprint: op.Payload,
			LeaseMS: int64(time.Hour / time.Millisecond), DedupeWindowMS: int64(time.Hour / time.Millisecond)})
	case history.OpComplete:
		s.index++
		r = s.ledger.ApplyCommand(s.index, &fsm.Complete{Header: at, Namespace: "default", Key: op.Key,
			Owner: op.Owner, FencingToken: op.FencingToken, Outcome: fsm.OutcomeExecuted,
			Result: json.RawMessage(`{"key":"` + op.Key + `"}`)})
	case history.OpRead:
		r = &fsm.Result{Status: fsm.StatusNotFound}
		if in := s.ledger.Get("default", op.Key); in != nil {
			r = &fsm.Result{Status: fsm.StatusOK, Intent: in}
		}
	}
	op.Status, op.Created = string(r.Status), r.Created
	if in := r.Intent; in != nil {
		op.State, op.IntentOwner, op.IntentFence, op.Generation, op.IntentTag =
			string(in.State), in.Owner, in.FencingToken, in.Generation, in.Fingerprint
	}
	return op
}

func (s *simulation) invoke(op history.Op) int {
	op.ID = len(s.ops)
	op.Invoke = s.now
	s.ops = append(s.ops, op)
	return op.ID
}

// step advances the clock and moves one client on.
func (s *simulation) step(c *simClient) {
	s.now += time.Duration(1+s.rng.IntN(3)) * time.Millisecond
	if c.pending < 0 {
		op := history.Op{Process: c.process, Type: c.phase, Key: c.key, Owner: c.owner}
		switch c.phase {
		case history.OpClaim:
			op.Payload = c.variant
		case history.OpComplete:
			op.FencingToken = c.fence
		case history.OpRead:
			op.Key, op.Owner = s.keys[s.rng.IntN(len(s.keys))], ""
		}
		if s.rng.IntN(25) == 0 { // refused before the ledger: no leader
			op.Outcome, op.Status, op.Return = history.OutcomeFail, "no_leader", s.now
			s.invoke(op)
			return
		}
		c.pending, c.applied, c.lost = s.invoke(op), false, false
		return
	}
	op := &s.ops[c.pending]
	if !c.applied && !c.lost {
		switch n := s.rng.IntN(100); {
		case n < 5:
			c.lost = true
		case n < 60:
			c.applied, c.answer = true, s.apply(*op)
		}
		return
	}
	// Return now.
	c.pending = -1
	if c.lost || s.rng.IntN(10) == 0 {
		op.Outcome, op.Status, op.Return = history.OutcomeInfo, "outcome_unknown", s.now
		if s.rng.IntN(4) == 0 {
			op.Return = 0 // never returned
		}
		return // same phase again: retry with the same owner and token
	}
	ans := c.answer
	ans.Outcome, ans.Return = history.OutcomeOK, s.now
	*op = ans
	switch ans.Type {
	case history.OpClaim:
		if ans.Status == "granted" {
			c.fence = ans.IntentFence
			if !c.done {
				c.done = true
				s.effects = append(s.effects, history.Effect{Key: c.key, Owner: c.owner, FencingToken: c.fence,
					Process: c.process, At: s.now})
			}
			c.phase = history.OpComplete
			return
		}
		s.nextTask(c)
	case history.OpComplete, history.OpRead:
		s.nextTask(c)
	}
}

func (s *simulation) nextTask(c *simClient) {
	if s.rng.IntN(5) == 0 {
		c.phase = history.OpRead
		return
	}
	s.newTask(c)
}

// generate runs clients until about n ops were invoked, then reads every
// key once more after everything settled (W2).
func (s *simulation) generate(clients, n int) {
	cs := make([]*simClient, clients)
	for i := range cs {
		cs[i] = &simClient{process: i, pending: -1}
		s.newTask(cs[i])
	}
	for len(s.ops) < n {
		s.step(cs[s.rng.IntN(len(cs))])
	}
	for _, c := range cs {
		if c.pending >= 0 {
			op := &s.ops[c.pending]
			op.Outcome, op.Status, op.Return = history.OutcomeInfo, "outcome_unknown", 0
		}
	}
	for _, key := range s.keys {
		s.now += time.Millisecond
		id := s.invoke(history.Op{Process: clients, Type: history.OpRead, Key: key})
		s.now += time.Millisecond
		ans := s.apply(s.ops[id])
		ans.Outcome, ans.Return = history.OutcomeOK, s.now
		s.ops[id] = ans
	}
}

func TestRandomValidHistoriesAreValid(t *testing.T) {
	tests := []struct {
		seed                    uint64
		clients, window, perKey int
		ops                     int
	}{
		{seed: 1, clients: 10, window: 3, perKey: 4, ops: 3000},
		{seed: 2, clients: 20, window: 5, perKey: 4, ops: 4000},
		{seed: 3, clients: 5, window: 5, perKey: 400, ops: 2000}, // long per-key histories
		{seed: 4, clients: 16, window: 2, perKey: 3, ops: 5000},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("seed %d", tc.seed), func(t *testing.T) {
			s := newSimulation(tc.seed, tc.window, tc.perKey)
			s.generate(tc.clients, tc.ops)
			res, _ := Check(s.ops, s.effects, nil, map[string]string{"n1": "d", "n2": "d"}, nil, Options{
				Timeout:   time.Minute,
				RequireOK: []history.OpType{history.OpClaim, history.OpComplete, history.OpRead},
			})
			if !res.Valid {
				t.Fatalf("valid history judged invalid:\n%s", violationLines(res))
			}
			if res.Linearizability.Result != "Ok" {
				t.Fatalf("porcupine: %s", res.Linearizability.Result)
			}
			// The generator must exercise what the checkers look at.
			for _, st := range []string{"claim:granted", "claim:in_flight", "claim:duplicate", "claim:divergent",
				"claim:outcome_unknown", "complete:ok", "complete:outcome_unknown", "read:ok"} {
				if res.StatusCounts[st] == 0 {
					t.Errorf("generator produced no %s answer: %v", st, res.StatusCounts)
				}
			}
			if res.Acks.Checked == 0 {
				t.Error("no acknowledged write was checked against a final read")
			}
			t.Logf("%d ops, %d keys, %d info ops (%d more dropped): porcupine %v", res.Linearizability.Ops,
				res.Linearizability.Keys, res.Linearizability.InfoOps, res.Linearizability.InfoDropped,
				res.Linearizability.Duration)
		})
	}
}

// TestRandomHistoryWithLostAckIsInvalid breaks one acknowledged complete
// in a large valid history: the final read no longer shows it.
func TestRandomHistoryWithLostAckIsInvalid(t *testing.T) {
	tests := []struct {
		name   string
		seed   uint64
		mutate func(final *history.Op)
		want   []string
	}{
		{name: "final read shows the grant, not the complete", seed: 5,
			mutate: func(r *history.Op) { r.State = "declared" }, want: []string{CheckNoLostAck, CheckLinearizable}},
		{name: "final read finds nothing", seed: 6,
			mutate: func(r *history.Op) {
				r.Status, r.State, r.IntentOwner, r.IntentFence, r.Generation, r.IntentTag = "not_found", "", "", 0, 0, ""
			}, want: []string{CheckNoLostAck, CheckLinearizable}},
		{name: "final read shows another token", seed: 7,
			mutate: func(r *history.Op) { r.IntentFence += 1000000 }, want: []string{CheckNoLostAck, CheckLinearizable}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSimulation(tc.seed, 3, 4)
			s.generate(10, 3000)
			var victim string
			for _, op := range s.ops {
				if op.Type == history.OpComplete && op.Outcome == history.OutcomeOK && op.Status == "ok" {
					victim = op.Key
					break
				}
			}
			if victim == "" {
				t.Fatal("no acknowledged complete to break")
			}
			for i := len(s.ops) - 1; i >= 0; i-- {
				if s.ops[i].Type == history.OpRead && s.ops[i].Key == victim {
					tc.mutate(&s.ops[i])
					break
				}
			}
			res, _ := Check(s.ops, s.effects, nil, map[string]string{"n1": "d"}, nil, Options{Timeout: time.Minute})
			got := map[string]bool{}
			for _, v := range res.Violations {
				got[v.Checker] = true
				if v.Key != victim && v.Key != "" {
					t.Errorf("violation on an unbroken key: %s", v)
				}
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("no %s violation; got:\n%s", w, violationLines(res))
				}
			}
		})
	}
}

// corrupt changes one answer of a random ok op, which usually (not
// always) makes the history non-linearizable.
func corrupt(rng *rand.Rand, ops []history.Op) {
	var okIDs []int
	for i, op := range ops {
		if op.Outcome == history.OutcomeOK {
			okIDs = append(okIDs, i)
		}
	}
	op := &ops[okIDs[rng.IntN(len(okIDs))]]
	switch rng.IntN(5) {
	case 0:
		statuses, _ := ledgerStatuses(op.Type)
		op.Status = statuses[rng.IntN(len(statuses))]
	case 1:
		op.IntentFence += uint64(rng.IntN(3)) + 1
	case 2:
		op.State = []string{"declared", "executed", "in_doubt"}[rng.IntN(3)]
	case 3:
		op.Created = !op.Created
	default:
		op.IntentOwner = fmt.Sprintf("p%d/t%d", rng.IntN(5), rng.IntN(20))
	}
}

// TestReductionKeepsVerdicts checks that leaving out the unknown writes
// redundantUnknown names never changes porcupine's verdict, on valid and
// corrupted random histories.
func TestReductionKeepsVerdicts(t *testing.T) {
	illegal, droppedAll := 0, 0
	for seed := uint64(100); seed < 160; seed++ {
		s := newSimulation(seed, 2, 3)
		s.generate(6, 150)
		if seed%4 != 0 {
			corrupt(s.rng, s.ops)
		}
		h := checkHistory(s.ops)
		end := int64(span(s.ops, nil, nil)) + 1
		full, _ := linearizableHistory(h, end, false)
		reduced, dropped := linearizableHistory(h, end, true)
		want := porcupineResult(full)
		got := porcupineResult(reduced)
		if want == "Unknown" || got == "Unknown" {
			continue
		}
		if got != want {
			t.Fatalf("seed %d: %s with all %d ops, %s without %d redundant unknown writes", seed, want, len(full), got, dropped)
		}
		if want == "Illegal" {
			illegal++
		}
		droppedAll += dropped
	}
	if droppedAll == 0 {
		t.Fatal("no unknown write was redundant: the test compares nothing")
	}
	if illegal == 0 {
		t.Fatal("no corrupted history was illegal: the test compares nothing interesting")
	}
	t.Logf("%d illegal histories, %d redundant unknown writes", illegal, droppedAll)
}

func porcupineResult(hist []porcupine.Operation) string {
	return string(porcupine.CheckOperationsTimeout(Model(), hist, 10*time.Second))
}
