// Package history records what the fault suite's clients did and saw: one
// Op per client operation (invoke → ok | fail | info), the world log of side
// effects the workload performed, and the faults the nemeses injected.
// Checkers read it; reports print it. Times are offsets from the run start.
package history

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// OpType is the kind of client operation.
type OpType string

// Operation kinds.
const (
	OpClaim    OpType = "claim"
	OpComplete OpType = "complete"
	OpRead     OpType = "read"
)

// Outcome is Jepsen's classification of a completed operation.
type Outcome string

// Outcomes. Info means the outcome is unknown (timeout, 503
// outcome_unknown, connection reset after sending): the operation may or
// may not have taken effect, at any time after its invocation.
const (
	OutcomeOK   Outcome = "ok"
	OutcomeFail Outcome = "fail"
	OutcomeInfo Outcome = "info"
)

// Op is one client operation with its input and, once it returned, what
// the ledger answered.
type Op struct {
	ID      int    `json:"id"`
	Process int    `json:"process"` // client number; never reused for concurrent ops
	Node    string `json:"node"`    // node the request was sent to
	Type    OpType `json:"type"`
	Key     string `json:"key"`
	Owner   string `json:"owner,omitempty"`
	// Payload names the payload variant the client sent ("a", "b"): two
	// variants under one key are divergent.
	Payload string `json:"payload,omitempty"`
	// FencingToken is the input of a complete.
	FencingToken uint64 `json:"fencing_token,omitempty"`

	Invoke  time.Duration `json:"invoke_ns"`
	Return  time.Duration `json:"return_ns"` // 0 while pending
	Outcome Outcome       `json:"outcome,omitempty"`

	// Status is the ledger's answer word (granted, duplicate, in_flight,
	// in_doubt, divergent, fenced, ok, not_found, ...) or the problem code
	// of a failure (no_leader, outcome_unknown, ...).
	Status string `json:"status,omitempty"`
	// HTTP is the answer's HTTP status code (0: no answer).
	HTTP    int  `json:"http,omitempty"`
	Created bool `json:"created,omitempty"` // 201: a new generation was granted
	// The intent in the answer, when there was one.
	State       string `json:"state,omitempty"`
	IntentOwner string `json:"intent_owner,omitempty"`
	IntentFence uint64 `json:"intent_fence,omitempty"`
	Generation  uint64 `json:"generation,omitempty"`
	IntentTag   string `json:"intent_payload,omitempty"` // payload variant recorded in the intent
	Error       string `json:"error,omitempty"`
	// Local is true for an answer the node gave from its own copy of the
	// ledger, without the leader (a duplicate under --local-duplicates):
	// the checkers judge it like any other answer.
	Local bool `json:"local,omitempty"`
}

// Effect is one side effect the workload performed in its own world after
// being granted a key: the ground truth at-most-once is checked against.
type Effect struct {
	Key          string        `json:"key"`
	Owner        string        `json:"owner"`
	FencingToken uint64        `json:"fencing_token"`
	Process      int           `json:"process"`
	At           time.Duration `json:"at_ns"`
}

// Fault is one nemesis action and how long it lasted.
type Fault struct {
	Nemesis string        `json:"nemesis"`
	Detail  string        `json:"detail"`
	Targets []string      `json:"targets,omitempty"`
	Start   time.Duration `json:"start_ns"`
	End     time.Duration `json:"end_ns"` // 0 while active
	// LeaderBefore and LeaderAfter let a checker count leader changes.
	LeaderBefore string `json:"leader_before,omitempty"`
	LeaderAfter  string `json:"leader_after,omitempty"`
	// Cut says the run ended before the fault's hold was over: it was
	// healed early, so a checker that needs the whole fault (did it move
	// the leader?) does not judge it.
	Cut bool `json:"cut,omitempty"`
	// Failed is the harness's error when the fault could not be started,
	// healed or recovered from: a harness event, not a finding about the
	// system, and no checker judges the fault by what it was meant to do.
	Failed string `json:"failed,omitempty"`
	// Finding is what a nemesis that probes the cluster's trust boundary
	// (a rogue gossip member, a stranger on the Raft port) saw get through:
	// a safety finding the trust-boundary checker reports.
	Finding string `json:"finding,omitempty"`
}

// Recorder collects a run's history. It is safe for concurrent use. When
// a writer is set, every invoke and completion is also written as a JSON
// line as it happens, so a crashed run still leaves its history.
type Recorder struct {
	start   time.Time
	mu      sync.Mutex
	ops     []Op
	effects []Effect
	faults  []Fault
	enc     *json.Encoder
	werr    error
}

// NewRecorder starts the run clock now; w (may be nil) receives
// history.jsonl events.
func NewRecorder(w io.Writer) *Recorder {
	r := &Recorder{start: time.Now()}
	if w != nil {
		r.enc = json.NewEncoder(w)
	}
	return r
}

// Since is the offset of t from the run start.
func (r *Recorder) Since(t time.Time) time.Duration { return t.Sub(r.start) }

// Now is the current offset from the run start.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

type event struct {
	Event string  `json:"event"` // invoke, complete, effect, fault
	Op    *Op     `json:"op,omitempty"`
	Eff   *Effect `json:"effect,omitempty"`
	Fault *Fault  `json:"fault,omitempty"`
}

func (r *Recorder) write(e event) {
	if r.enc == nil || r.werr != nil {
		return
	}
	r.werr = r.enc.Encode(e)
}

// Invoke records the start of op (its ID and Invoke are set here) and
// returns its ID.
func (r *Recorder) Invoke(op Op) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = len(r.ops)
	op.Invoke = r.Now()
	op.Return, op.Outcome = 0, ""
	r.ops = append(r.ops, op)
	r.write(event{Event: "invoke", Op: &op})
	return op.ID
}

// Complete records the end of operation id; fill sets the outcome and
// what was observed.
func (r *Recorder) Complete(id int, fill func(*Op)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op := &r.ops[id]
	fill(op)
	op.Return = r.Now()
	if op.Outcome == "" {
		op.Outcome = OutcomeInfo
	}
	cp := *op
	r.write(event{Event: "complete", Op: &cp})
}

// Effect records a side effect in the workload's world log.
func (r *Recorder) Effect(e Effect) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e.At = r.Now()
	r.effects = append(r.effects, e)
	r.write(event{Event: "effect", Eff: &e})
}

// StartFault records the start of a fault and returns its index.
func (r *Recorder) StartFault(f Fault) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	f.Start = r.Now()
	r.faults = append(r.faults, f)
	r.write(event{Event: "fault", Fault: &f})
	return len(r.faults) - 1
}

// EndFault records the end of fault i; cut says the run ended before its
// hold was over.
func (r *Recorder) EndFault(i int, leaderAfter string, cut bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &r.faults[i]
	f.End = r.Now()
	f.LeaderAfter = leaderAfter
	f.Cut = cut
	cp := *f
	r.write(event{Event: "fault", Fault: &cp})
}

// FindFault records what fault i's nemesis saw get through.
func (r *Recorder) FindFault(i int, finding string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &r.faults[i]
	f.Finding = finding
	cp := *f
	r.write(event{Event: "fault", Fault: &cp})
}

// FailFault records that fault i failed (to start, heal or recover) with
// err: a harness event.
func (r *Recorder) FailFault(i int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := &r.faults[i]
	f.Failed = err.Error()
	if f.End == 0 {
		f.End = r.Now()
	}
	cp := *f
	r.write(event{Event: "fault", Fault: &cp})
}

// Snapshot returns copies of everything recorded so far. Ops still
// pending (Return 0) are returned as info: their outcome is unknown.
func (r *Recorder) Snapshot() (ops []Op, effects []Effect, faults []Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops = append([]Op(nil), r.ops...)
	for i := range ops {
		if ops[i].Return == 0 {
			ops[i].Outcome = OutcomeInfo
		}
	}
	return ops, append([]Effect(nil), r.effects...), append([]Fault(nil), r.faults...)
}

// Err reports a failure to write history.jsonl.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.werr != nil {
		return fmt.Errorf("history.jsonl: %w", r.werr)
	}
	return nil
}
