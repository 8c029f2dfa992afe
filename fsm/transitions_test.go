package fsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// Shared fixtures for the fsm tests.
const (
	ns       = "ns"
	tool     = "payments.charge"
	leaseMS  = int64(1000)
	dedupeMS = int64(60_000)

	payloadA = `{"amount":100,"currency":"EUR"}`
	payloadB = `{"amount":200,"currency":"EUR"}`
	resultOK = `{"charge":"ch_1"}`
	resultNo = `{"error":"card declined"}`
)

// t0 is the proposal time of the first command of every harness.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano()

// ms converts milliseconds to the ledger's nanoseconds.
func ms(n int64) int64 { return n * int64(time.Millisecond) }

// harness applies encoded commands to a fresh ledger at increasing log
// indexes (1, 2, 3 ...) and at a clock the test moves.
type harness struct {
	tb  testing.TB
	l   *fsm.Machine
	idx uint64
	at  int64
}

func newHarness(tb testing.TB) *harness {
	return &harness{tb: tb, l: fsm.New(), at: t0}
}

// advance moves the proposal clock by d nanoseconds.
func (h *harness) advance(d int64) { h.at += d }

func (h *harness) apply(cmd fsm.Command) *fsm.Result { return h.applyAt(h.at, cmd) }

// applyAt encodes cmd with the proposal time at and applies it at the next
// index.
func (h *harness) applyAt(at int64, cmd fsm.Command) *fsm.Result {
	h.tb.Helper()
	data, err := fsm.Encode(at, cmd)
	if err != nil {
		h.tb.Fatalf("encode %T: %v", cmd, err)
	}
	h.idx++
	r := h.l.Apply(h.idx, data)
	if r == nil {
		h.tb.Fatalf("Apply(%d, %T) returned nil", h.idx, cmd)
	}
	if r.Index != h.idx || h.l.AppliedIndex() != h.idx {
		h.tb.Fatalf("Apply(%d): result index %d, applied index %d", h.idx, r.Index, h.l.AppliedIndex())
	}
	return r
}

// must applies cmd and fails unless it answers want.
func (h *harness) must(cmd fsm.Command, want fsm.Status) *fsm.Result {
	h.tb.Helper()
	r := h.apply(cmd)
	if r.Status != want {
		h.tb.Fatalf("%T at index %d: status %q (%s), want %q", cmd, r.Index, r.Status, r.Detail, want)
	}
	checkErr(h.tb, r)
	return r
}

func (h *harness) get(key string) *fsm.Intent { return h.l.Get(ns, key) }

// sentinels maps every refusal status to the error Result.Err must wrap;
// success statuses map to nil.
var sentinels = map[fsm.Status]error{
	fsm.StatusGranted:         nil,
	fsm.StatusDuplicate:       nil,
	fsm.StatusPendingApproval: nil,
	fsm.StatusOK:              nil,
	fsm.StatusIgnored:         nil,
	fsm.StatusInFlight:        fsm.ErrInFlight,
	fsm.StatusInDoubt:         fsm.ErrInDoubt,
	fsm.StatusDivergent:       fsm.ErrDivergent,
	fsm.StatusFenced:          fsm.ErrFenced,
	fsm.StatusRejected:        fsm.ErrRejected,
	fsm.StatusNotFound:        fsm.ErrNotFound,
	fsm.StatusInvalidState:    fsm.ErrInvalidState,
	fsm.StatusNotPending:      fsm.ErrNotPending,
	fsm.StatusMalformed:       fsm.ErrMalformed,
	fsm.StatusBlocked:         fsm.ErrBlocked,
	fsm.StatusUnknownPolicy:   fsm.ErrUnknownPolicy,
	fsm.StatusTooLarge:        fsm.ErrTooLarge,
	fsm.StatusVersionMismatch: fsm.ErrVersionMismatch,
	fsm.StatusAlreadyApproved: fsm.ErrAlreadyApproved,
	fsm.StatusNotAnApprover:   fsm.ErrNotAnApprover,
	fsm.StatusTokenUsed:       fsm.ErrTokenUsed,
	fsm.StatusTokenExpired:    fsm.ErrTokenExpired,
	fsm.StatusTokenMismatch:   fsm.ErrTokenMismatch,
	fsm.StatusNotGrantHolder:  fsm.ErrNotGrantHolder,
	fsm.StatusSelfApproval:    fsm.ErrSelfApproval,
}

// fataler is what the check helpers need from a *testing.T, *testing.F or
// *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// checkErr asserts that r.Err() matches r.Status.
func checkErr(tb fataler, r *fsm.Result) {
	tb.Helper()
	want, known := sentinels[r.Status]
	if !known {
		tb.Fatalf("unexpected status %q", r.Status)
	}
	err := r.Err()
	if want == nil {
		if err != nil {
			tb.Fatalf("status %q: Err() = %v, want nil", r.Status, err)
		}
		return
	}
	if !errors.Is(err, want) {
		tb.Fatalf("status %q: Err() = %v, want errors.Is %v", r.Status, err, want)
	}
	var re *fsm.RefusalError
	if !errors.As(err, &re) || re.Status != r.Status || re.Intent != r.Intent || re.Detail != r.Detail {
		tb.Fatalf("status %q: Err() = %#v, want a RefusalError carrying the result", r.Status, err)
	}
	for other, s := range sentinels {
		if s != nil && other != r.Status && errors.Is(err, s) {
			tb.Fatalf("status %q: Err() also matches %v", r.Status, s)
		}
	}
}

func fingerprint(tb testing.TB, payload string) (json.RawMessage, string) {
	tb.Helper()
	canonical, fp, err := fsm.Fingerprint(tool, []byte(payload))
	if err != nil {
		tb.Fatalf("Fingerprint(%s): %v", payload, err)
	}
	return canonical, fp
}

func mustFP(payload string) string {
	_, fp, err := fsm.Fingerprint(tool, []byte(payload))
	if err != nil {
		panic(err)
	}
	return fp
}

// Command builders. Each returns a fresh command: Encode stamps the time
// into the command it is given.

func claim(key, owner, payload string) *fsm.Claim {
	canonical, fp, err := fsm.Fingerprint(tool, []byte(payload))
	if err != nil {
		panic(err)
	}
	return &fsm.Claim{Namespace: ns, Key: key, Tool: tool, Owner: owner, Payload: canonical, Fingerprint: fp,
		LeaseMS: leaseMS, DedupeWindowMS: dedupeMS}
}

func claimApproval(key, owner, payload string) *fsm.Claim {
	c := claim(key, owner, payload)
	c.RequireApproval = true
	return c
}

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func complete(key, owner string, token uint64, o fsm.Outcome, result string) *fsm.Complete {
	return &fsm.Complete{Namespace: ns, Key: key, Owner: owner, FencingToken: token, Outcome: o, Result: raw(result)}
}

func renew(key, owner string, token uint64, lease int64) *fsm.Renew {
	return &fsm.Renew{Namespace: ns, Key: key, Owner: owner, FencingToken: token, LeaseMS: lease}
}

func commit(key, owner string) *fsm.Commit {
	return &fsm.Commit{Namespace: ns, Key: key, Owner: owner}
}

func resolve(key string, o fsm.Outcome, result string) *fsm.Resolve {
	return &fsm.Resolve{Namespace: ns, Key: key, Outcome: o, Result: raw(result), Actor: "ops@example.com",
		Reason: "checked the provider"}
}

func approve(key string) *fsm.Approve {
	return &fsm.Approve{Namespace: ns, Key: key, Actor: "lead@example.com", Reason: "looks fine"}
}

func reject(key string) *fsm.Reject {
	return &fsm.Reject{Namespace: ns, Key: key, Actor: "lead@example.com", Reason: "too large"}
}

func refs(keys ...string) []fsm.Ref {
	out := make([]fsm.Ref, len(keys))
	for i, k := range keys {
		out[i] = fsm.Ref{Namespace: ns, Key: k}
	}
	return out
}

func expire(keys ...string) *fsm.Expire { return &fsm.Expire{Keys: refs(keys...)} }
func purge(keys ...string) *fsm.Purge   { return &fsm.Purge{Keys: refs(keys...)} }

// step is one command of a scenario and the status it must get.
type step struct {
	advance int64 // nanoseconds to move the clock before the command
	cmd     fsm.Command
	want    fsm.Status
}

// toState returns the steps that bring key "k" (owner A, payloadA) into
// state s. The grant is always the first command, so its fencing token is 1.
func toState(s fsm.State) []step {
	const k = "k"
	switch s {
	case fsm.StateDeclared:
		return []step{{cmd: claim(k, "A", payloadA), want: fsm.StatusGranted}}
	case fsm.StateExecuted:
		return append(toState(fsm.StateDeclared),
			step{cmd: complete(k, "A", 1, fsm.OutcomeExecuted, resultOK), want: fsm.StatusOK})
	case fsm.StateCommitted:
		return append(toState(fsm.StateExecuted), step{cmd: commit(k, "A"), want: fsm.StatusOK})
	case fsm.StateFailed:
		return append(toState(fsm.StateDeclared),
			step{cmd: complete(k, "A", 1, fsm.OutcomeFailed, resultNo), want: fsm.StatusOK})
	case fsm.StateInDoubt:
		return append(toState(fsm.StateDeclared),
			step{advance: ms(leaseMS) + 1, cmd: expire(k), want: fsm.StatusOK})
	case fsm.StatePendingApproval:
		return []step{{cmd: claimApproval(k, "A", payloadA), want: fsm.StatusPendingApproval}}
	case fsm.StateApproved:
		return append(toState(fsm.StatePendingApproval), step{cmd: approve(k), want: fsm.StatusOK})
	case fsm.StateRejected:
		return append(toState(fsm.StatePendingApproval), step{cmd: reject(k), want: fsm.StatusOK})
	}
	panic("no setup for state " + string(s))
}

func (h *harness) run(steps []step) *fsm.Result {
	h.tb.Helper()
	var r *fsm.Result
	for _, s := range steps {
		h.advance(s.advance)
		r = h.must(s.cmd, s.want)
	}
	return r
}

func lastEvent(t *testing.T, in *fsm.Intent) fsm.AuditEvent {
	t.Helper()
	if in == nil || len(in.Audit) == 0 {
		t.Fatalf("intent %+v has no audit events", in)
	}
	return in.Audit[len(in.Audit)-1]
}

func wantEvent(t *testing.T, got, want fsm.AuditEvent) {
	t.Helper()
	if got != want {
		t.Fatalf("audit event\n got %+v\nwant %+v", got, want)
	}
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// transitionCase is one scenario on key "k": every step must answer its
// status, then the record must be in state (absent when state is ""), and
// check may look closer at the last result.
type transitionCase struct {
	name  string
	steps []step
	state fsm.State
	check func(t *testing.T, h *harness, last *fsm.Result)
}

func then(setup []step, more ...step) []step { return append(setup, more...) }

func transitionCases() []transitionCase {
	lease := ms(leaseMS)
	fpA := mustFP(payloadA)
	return []transitionCase{
		// ---- claim ----
		{
			name:  "claim/absent is granted",
			steps: []step{{advance: ms(5), cmd: claim("k", "A", payloadA), want: fsm.StatusGranted}},
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "Created", r.Created, true)
				eq(t, "FencingToken", in.FencingToken, r.Index)
				eq(t, "FencingToken", in.FencingToken, uint64(1))
				eq(t, "Generation", in.Generation, uint64(1))
				eq(t, "LeaseDeadline", in.LeaseDeadline, t0+ms(5)+lease)
				eq(t, "LeaseMS", in.LeaseMS, leaseMS)
				eq(t, "Owner", in.Owner, "A")
				eq(t, "Tool", in.Tool, tool)
				eq(t, "Fingerprint", in.Fingerprint, fpA)
				eq(t, "Payload", string(in.Payload), `{"amount":100,"currency":"EUR"}`)
				eq(t, "CreatedAt", in.CreatedAt, t0+ms(5))
				eq(t, "UpdatedAt", in.UpdatedAt, t0+ms(5))
				eq(t, "DedupeWindowMS", in.DedupeWindowMS, dedupeMS)
				eq(t, "Version", in.Version, uint64(1))
				eq(t, "Len", h.l.Len(), 1)
				wantEvent(t, lastEvent(t, in), fsm.AuditEvent{Index: 1, At: t0 + ms(5), Op: "claim",
					Status: fsm.StatusGranted, State: fsm.StateDeclared, Owner: "A", Fingerprint: fpA, FencingToken: 1})
				if !reflect.DeepEqual(h.get("k"), in) {
					t.Fatalf("Get returned a different record than the result")
				}
			},
		},
		{
			name: "claim/same owner again while declared gets the same grant",
			steps: then(toState(fsm.StateDeclared),
				step{advance: ms(10), cmd: claim("k", "A", payloadA), want: fsm.StatusGranted}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "Created", r.Created, false)
				eq(t, "FencingToken", in.FencingToken, uint64(1))
				eq(t, "Generation", in.Generation, uint64(1))
				eq(t, "LeaseDeadline", in.LeaseDeadline, t0+lease)
				eq(t, "UpdatedAt", in.UpdatedAt, t0)
				eq(t, "Version", in.Version, uint64(2))
				eq(t, "len(Audit)", len(in.Audit), 2)
				wantEvent(t, lastEvent(t, in), fsm.AuditEvent{Index: 2, At: t0 + ms(10), Op: "claim",
					Status: fsm.StatusGranted, State: fsm.StateDeclared, Owner: "A", Fingerprint: fpA, FencingToken: 1,
					Reason: "repeated by owner"})
			},
		},
		{
			name:  "claim/other owner while declared is in flight",
			steps: then(toState(fsm.StateDeclared), step{cmd: claim("k", "B", payloadA), want: fsm.StatusInFlight}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "Owner", in.Owner, "A")
				eq(t, "FencingToken", in.FencingToken, uint64(1))
				eq(t, "Version", in.Version, uint64(2))
				wantEvent(t, lastEvent(t, in), fsm.AuditEvent{Index: 2, At: t0, Op: "claim",
					Status: fsm.StatusInFlight, State: fsm.StateDeclared, Owner: "B", Fingerprint: fpA})
				if !strings.Contains(r.Detail, `"A"`) {
					t.Fatalf("detail %q does not name the holder", r.Detail)
				}
			},
		},
		{
			name: "claim/executed is a duplicate with the result",
			steps: then(toState(fsm.StateExecuted),
				step{cmd: claim("k", "B", payloadA), want: fsm.StatusDuplicate},
				step{cmd: claim("k", "A", payloadA), want: fsm.StatusDuplicate}),
			state: fsm.StateExecuted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "Duplicates", in.Duplicates, uint64(2))
				eq(t, "Result", string(in.Result), resultOK)
				eq(t, "Owner", in.Owner, "A")
				eq(t, "Created", r.Created, false)
				wantEvent(t, lastEvent(t, in), fsm.AuditEvent{Index: 4, At: t0, Op: "claim",
					Status: fsm.StatusDuplicate, State: fsm.StateExecuted, Owner: "A", Fingerprint: fpA})
			},
		},
		{
			name:  "claim/committed is a duplicate",
			steps: then(toState(fsm.StateCommitted), step{cmd: claim("k", "B", payloadA), want: fsm.StatusDuplicate}),
			state: fsm.StateCommitted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Duplicates", r.Intent.Duplicates, uint64(1))
				eq(t, "Result", string(r.Intent.Result), resultOK)
			},
		},
		{
			name: "claim/failed grants a new generation",
			steps: then(toState(fsm.StateFailed),
				step{advance: ms(7), cmd: claim("k", "B", payloadA), want: fsm.StatusGranted}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "Created", r.Created, true)
				eq(t, "Generation", in.Generation, uint64(2))
				eq(t, "FencingToken", in.FencingToken, uint64(3))
				eq(t, "Owner", in.Owner, "B")
				eq(t, "Result", string(in.Result), "")
				eq(t, "LeaseDeadline", in.LeaseDeadline, t0+ms(7)+lease)
				eq(t, "CreatedAt", in.CreatedAt, t0)
				eq(t, "UpdatedAt", in.UpdatedAt, t0+ms(7))
			},
		},
		{
			name:  "claim/in_doubt is refused for the holder",
			steps: then(toState(fsm.StateInDoubt), step{cmd: claim("k", "A", payloadA), want: fsm.StatusInDoubt}),
			state: fsm.StateInDoubt,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Owner", r.Intent.Owner, "A")
				eq(t, "FencingToken", r.Intent.FencingToken, uint64(1))
				eq(t, "last audit status", lastEvent(t, r.Intent).Status, fsm.StatusInDoubt)
			},
		},
		{
			name:  "claim/in_doubt is refused for another owner",
			steps: then(toState(fsm.StateInDoubt), step{cmd: claim("k", "B", payloadA), want: fsm.StatusInDoubt}),
			state: fsm.StateInDoubt,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Owner", r.Intent.Owner, "A")
				eq(t, "Generation", r.Intent.Generation, uint64(1))
			},
		},
		{
			name: "claim/lease exactly at its deadline is still held",
			steps: then(toState(fsm.StateDeclared),
				step{advance: lease, cmd: claim("k", "B", payloadA), want: fsm.StatusInFlight}),
			state: fsm.StateDeclared,
		},
		{
			name: "claim/lazy expiry once the lease passed",
			steps: then(toState(fsm.StateDeclared),
				step{advance: lease + 1, cmd: claim("k", "B", payloadA), want: fsm.StatusInDoubt}),
			state: fsm.StateInDoubt,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "UpdatedAt", in.UpdatedAt, t0+lease+1)
				eq(t, "len(Audit)", len(in.Audit), 3)
				wantEvent(t, in.Audit[1], fsm.AuditEvent{Index: 2, At: t0 + lease + 1, Op: "expire",
					Status: fsm.StatusExpired, State: fsm.StateInDoubt, Owner: "A", FencingToken: 1,
					Reason: "lease passed without a report"})
				wantEvent(t, in.Audit[2], fsm.AuditEvent{Index: 2, At: t0 + lease + 1, Op: "claim",
					Status: fsm.StatusInDoubt, State: fsm.StateInDoubt, Owner: "B", Fingerprint: fpA})
				if got := h.l.DueLeases(t0+lease+10, 10); len(got) != 0 {
					t.Fatalf("expired intent still in the lease index: %v", got)
				}
			},
		},
		{
			name: "claim/lazy expiry refuses the holder too",
			steps: then(toState(fsm.StateDeclared),
				step{advance: lease + 1, cmd: claim("k", "A", payloadA), want: fsm.StatusInDoubt}),
			state: fsm.StateInDoubt,
		},
		{
			name:  "claim/approval required records pending_approval",
			steps: toState(fsm.StatePendingApproval),
			state: fsm.StatePendingApproval,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "Created", r.Created, false)
				eq(t, "RequireApproval", in.RequireApproval, true)
				eq(t, "Owner", in.Owner, "")
				eq(t, "FencingToken", in.FencingToken, uint64(0))
				eq(t, "Generation", in.Generation, uint64(0))
				wantEvent(t, lastEvent(t, in), fsm.AuditEvent{Index: 1, At: t0, Op: "claim",
					Status: fsm.StatusPendingApproval, State: fsm.StatePendingApproval, Owner: "A", Fingerprint: fpA,
					Reason: "policy default version 0 requires 1 approval(s)"})
				eq(t, "ApprovalsRequired", in.ApprovalsRequired, 1)
				if got := h.l.DueLeases(t0+10*lease, 10); len(got) != 0 {
					t.Fatalf("pending intent in the lease index: %v", got)
				}
			},
		},
		{
			name: "claim/pending_approval stays pending",
			steps: then(toState(fsm.StatePendingApproval),
				step{cmd: claim("k", "B", payloadA), want: fsm.StatusPendingApproval}),
			state: fsm.StatePendingApproval,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "len(Audit)", len(r.Intent.Audit), 2)
				eq(t, "Version", r.Intent.Version, uint64(2))
			},
		},
		{
			name:  "claim/approved is granted",
			steps: then(toState(fsm.StateApproved), step{cmd: claim("k", "B", payloadA), want: fsm.StatusGranted}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Created", r.Created, true)
				eq(t, "Owner", r.Intent.Owner, "B")
				eq(t, "Generation", r.Intent.Generation, uint64(1))
				eq(t, "FencingToken", r.Intent.FencingToken, uint64(3))
				eq(t, "LeaseDeadline", r.Intent.LeaseDeadline, t0+lease)
			},
		},
		{
			name:  "claim/rejected is refused",
			steps: then(toState(fsm.StateRejected), step{cmd: claim("k", "B", payloadA), want: fsm.StatusRejected}),
			state: fsm.StateRejected,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Owner", r.Intent.Owner, "")
				eq(t, "last audit status", lastEvent(t, r.Intent).Status, fsm.StatusRejected)
			},
		},

		// ---- complete ----
		{
			name: "complete/declared to executed",
			steps: then(toState(fsm.StateDeclared), step{advance: ms(2),
				cmd:  complete("k", "A", 1, fsm.OutcomeExecuted, "{ \"charge\" :\n \"ch_1\" }"),
				want: fsm.StatusOK}),
			state: fsm.StateExecuted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "Result (compacted)", string(in.Result), resultOK)
				eq(t, "UpdatedAt", in.UpdatedAt, t0+ms(2))
				eq(t, "Version", in.Version, uint64(2))
				wantEvent(t, lastEvent(t, in), fsm.AuditEvent{Index: 2, At: t0 + ms(2), Op: "complete",
					Status: fsm.StatusOK, State: fsm.StateExecuted, Owner: "A", FencingToken: 1,
					Outcome: fsm.OutcomeExecuted})
				if got := h.l.DueLeases(t0+10*lease, 10); len(got) != 0 {
					t.Fatalf("executed intent still in the lease index: %v", got)
				}
			},
		},
		{
			name: "complete/declared to failed",
			steps: then(toState(fsm.StateDeclared),
				step{cmd: complete("k", "A", 1, fsm.OutcomeFailed, resultNo), want: fsm.StatusOK}),
			state: fsm.StateFailed,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Result", string(r.Intent.Result), resultNo)
			},
		},
		{
			name: "complete/late report by the lease holder on in_doubt is accepted",
			steps: then(toState(fsm.StateInDoubt),
				step{cmd: complete("k", "A", 1, fsm.OutcomeExecuted, resultOK), want: fsm.StatusOK}),
			state: fsm.StateExecuted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				ev := lastEvent(t, r.Intent)
				eq(t, "audit reason", ev.Reason, "late report after the lease passed")
				eq(t, "Result", string(r.Intent.Result), resultOK)
			},
		},
		{
			name: "complete/late report that itself passes the lease",
			steps: then(toState(fsm.StateDeclared),
				step{advance: lease + 1, cmd: complete("k", "A", 1, fsm.OutcomeFailed, ""), want: fsm.StatusOK}),
			state: fsm.StateFailed,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				ops := []string{}
				for _, ev := range r.Intent.Audit {
					ops = append(ops, ev.Op)
				}
				eq(t, "audit ops", strings.Join(ops, ","), "claim,expire,complete")
			},
		},
		{
			name: "complete/wrong owner is fenced",
			steps: then(toState(fsm.StateDeclared),
				step{cmd: complete("k", "B", 1, fsm.OutcomeExecuted, resultOK), want: fsm.StatusFenced}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Owner", r.Intent.Owner, "A")
				eq(t, "Result", string(r.Intent.Result), "")
				wantEvent(t, lastEvent(t, r.Intent), fsm.AuditEvent{Index: 2, At: t0, Op: "complete",
					Status: fsm.StatusFenced, State: fsm.StateDeclared, Owner: "B", FencingToken: 1,
					Outcome: fsm.OutcomeExecuted})
			},
		},
		{
			name: "complete/wrong token is fenced",
			steps: then(toState(fsm.StateDeclared),
				step{cmd: complete("k", "A", 2, fsm.OutcomeExecuted, resultOK), want: fsm.StatusFenced}),
			state: fsm.StateDeclared,
		},
		{
			name: "complete/stale token after a regrant is fenced",
			steps: then(toState(fsm.StateFailed),
				step{cmd: claim("k", "B", payloadA), want: fsm.StatusGranted},
				step{cmd: complete("k", "A", 1, fsm.OutcomeExecuted, resultOK), want: fsm.StatusFenced}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Owner", r.Intent.Owner, "B")
				eq(t, "FencingToken", r.Intent.FencingToken, uint64(3))
			},
		},
		{
			name: "complete/stale token of the same owner after a regrant is fenced",
			steps: then(toState(fsm.StateFailed),
				step{cmd: claim("k", "A", payloadA), want: fsm.StatusGranted},
				step{cmd: complete("k", "A", 1, fsm.OutcomeExecuted, resultOK), want: fsm.StatusFenced}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "FencingToken", r.Intent.FencingToken, uint64(3))
				eq(t, "Generation", r.Intent.Generation, uint64(2))
			},
		},
		{
			name: "complete/same report twice changes nothing",
			steps: then(toState(fsm.StateExecuted), step{advance: ms(3),
				cmd: complete("k", "A", 1, fsm.OutcomeExecuted, resultOK), want: fsm.StatusOK}),
			state: fsm.StateExecuted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Version", r.Intent.Version, uint64(2))
				eq(t, "len(Audit)", len(r.Intent.Audit), 2)
				eq(t, "UpdatedAt", r.Intent.UpdatedAt, t0)
				if !reflect.DeepEqual(r.Intent, h.get("k")) {
					t.Fatalf("an unchanged answer should be the stored record")
				}
			},
		},
		{
			name: "complete/same failed report twice changes nothing",
			steps: then(toState(fsm.StateFailed),
				step{cmd: complete("k", "A", 1, fsm.OutcomeFailed, resultNo), want: fsm.StatusOK}),
			state: fsm.StateFailed,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Version", r.Intent.Version, uint64(2))
			},
		},
		{
			name: "complete/same report after commit changes nothing",
			steps: then(toState(fsm.StateCommitted),
				step{cmd: complete("k", "A", 1, fsm.OutcomeExecuted, resultOK), want: fsm.StatusOK}),
			state: fsm.StateCommitted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Version", r.Intent.Version, uint64(3))
			},
		},
		{
			name: "complete/conflicting outcome is invalid_state",
			steps: then(toState(fsm.StateExecuted),
				step{cmd: complete("k", "A", 1, fsm.OutcomeFailed, resultOK), want: fsm.StatusInvalidState}),
			state: fsm.StateExecuted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Result", string(r.Intent.Result), resultOK)
				eq(t, "Version", r.Intent.Version, uint64(3))
				eq(t, "last audit status", lastEvent(t, r.Intent).Status, fsm.StatusInvalidState)
			},
		},
		{
			name: "complete/conflicting result is invalid_state",
			steps: then(toState(fsm.StateExecuted),
				step{cmd: complete("k", "A", 1, fsm.OutcomeExecuted, `{"charge":"ch_2"}`), want: fsm.StatusInvalidState}),
			state: fsm.StateExecuted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Result", string(r.Intent.Result), resultOK)
			},
		},
		{
			name: "complete/pending_approval has no grant to complete",
			steps: then(toState(fsm.StatePendingApproval),
				step{cmd: complete("k", "A", 1, fsm.OutcomeExecuted, ""), want: fsm.StatusFenced}),
			state: fsm.StatePendingApproval,
		},
		{
			name: "complete/invalid outcome is malformed and changes nothing",
			steps: then(toState(fsm.StateDeclared),
				step{cmd: complete("k", "A", 1, "done", ""), want: fsm.StatusMalformed}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Version", r.Intent.Version, uint64(1))
				eq(t, "len(Audit)", len(r.Intent.Audit), 1)
			},
		},

		// ---- renew ----
		{
			name: "renew/extends the lease",
			steps: then(toState(fsm.StateDeclared),
				step{advance: ms(600), cmd: renew("k", "A", 1, 2000), want: fsm.StatusOK},
				// Past the original deadline, before the renewed one.
				step{advance: ms(401), cmd: claim("k", "B", payloadA), want: fsm.StatusInFlight}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "LeaseMS", in.LeaseMS, int64(2000))
				eq(t, "LeaseDeadline", in.LeaseDeadline, t0+ms(600)+ms(2000))
				eq(t, "renew audit status", in.Audit[1].Status, fsm.StatusOK)
				eq(t, "renew audit op", in.Audit[1].Op, "renew")
				if got := h.l.DueLeases(t0+ms(2600), 10); len(got) != 0 {
					t.Fatalf("renewed lease due at its deadline: %v", got)
				}
				if got := h.l.DueLeases(t0+ms(2600)+1, 10); len(got) != 1 {
					t.Fatalf("renewed lease not due after its deadline: %v", got)
				}
			},
		},
		{
			name: "renew/wrong owner is fenced",
			steps: then(toState(fsm.StateDeclared),
				step{cmd: renew("k", "B", 1, 2000), want: fsm.StatusFenced}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "LeaseDeadline", r.Intent.LeaseDeadline, t0+lease)
			},
		},
		{
			name: "renew/wrong token is fenced",
			steps: then(toState(fsm.StateDeclared),
				step{cmd: renew("k", "A", 7, 2000), want: fsm.StatusFenced}),
			state: fsm.StateDeclared,
		},
		{
			name: "renew/stale token after a regrant is fenced",
			steps: then(toState(fsm.StateFailed),
				step{cmd: claim("k", "B", payloadA), want: fsm.StatusGranted},
				step{cmd: renew("k", "A", 1, 2000), want: fsm.StatusFenced}),
			state: fsm.StateDeclared,
		},
		{
			name:  "renew/in_doubt is refused",
			steps: then(toState(fsm.StateInDoubt), step{cmd: renew("k", "A", 1, 2000), want: fsm.StatusInDoubt}),
			state: fsm.StateInDoubt,
		},
		{
			name: "renew/after the lease passed is refused in_doubt",
			steps: then(toState(fsm.StateDeclared),
				step{advance: lease + 1, cmd: renew("k", "A", 1, 2000), want: fsm.StatusInDoubt}),
			state: fsm.StateInDoubt,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "LeaseDeadline", r.Intent.LeaseDeadline, t0+lease)
			},
		},
		{
			name:  "renew/executed is invalid_state",
			steps: then(toState(fsm.StateExecuted), step{cmd: renew("k", "A", 1, 2000), want: fsm.StatusInvalidState}),
			state: fsm.StateExecuted,
		},
		{
			name:  "renew/non-positive lease is malformed",
			steps: then(toState(fsm.StateDeclared), step{cmd: renew("k", "A", 1, 0), want: fsm.StatusMalformed}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Version", r.Intent.Version, uint64(1))
				eq(t, "LeaseDeadline", r.Intent.LeaseDeadline, t0+lease)
			},
		},

		// ---- commit ----
		{
			name:  "commit/executed becomes committed",
			steps: then(toState(fsm.StateExecuted), step{advance: ms(4), cmd: commit("k", "A"), want: fsm.StatusOK}),
			state: fsm.StateCommitted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "UpdatedAt", r.Intent.UpdatedAt, t0+ms(4))
				eq(t, "Result", string(r.Intent.Result), resultOK)
				wantEvent(t, lastEvent(t, r.Intent), fsm.AuditEvent{Index: 3, At: t0 + ms(4), Op: "commit",
					Status: fsm.StatusOK, State: fsm.StateCommitted, Owner: "A"})
			},
		},
		{
			name:  "commit/again changes nothing",
			steps: then(toState(fsm.StateCommitted), step{advance: ms(4), cmd: commit("k", "A"), want: fsm.StatusOK}),
			state: fsm.StateCommitted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Version", r.Intent.Version, uint64(3))
				eq(t, "UpdatedAt", r.Intent.UpdatedAt, t0)
			},
		},
		{
			name:  "commit/wrong owner is fenced",
			steps: then(toState(fsm.StateExecuted), step{cmd: commit("k", "B"), want: fsm.StatusFenced}),
			state: fsm.StateExecuted,
		},
		{
			name:  "commit/declared is invalid_state",
			steps: then(toState(fsm.StateDeclared), step{cmd: commit("k", "A"), want: fsm.StatusInvalidState}),
			state: fsm.StateDeclared,
		},
		{
			name:  "commit/failed is invalid_state",
			steps: then(toState(fsm.StateFailed), step{cmd: commit("k", "A"), want: fsm.StatusInvalidState}),
			state: fsm.StateFailed,
		},
		{
			name:  "commit/in_doubt is invalid_state",
			steps: then(toState(fsm.StateInDoubt), step{cmd: commit("k", "A"), want: fsm.StatusInvalidState}),
			state: fsm.StateInDoubt,
		},

		// ---- resolve ----
		{
			name: "resolve/in_doubt to executed",
			steps: then(toState(fsm.StateInDoubt),
				step{advance: ms(9), cmd: resolve("k", fsm.OutcomeExecuted, `{ "found": true }`), want: fsm.StatusOK},
				step{cmd: claim("k", "B", payloadA), want: fsm.StatusDuplicate}),
			state: fsm.StateExecuted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				in := r.Intent
				eq(t, "Result", string(in.Result), `{"found":true}`)
				eq(t, "UpdatedAt", in.UpdatedAt, t0+lease+1+ms(9))
				wantEvent(t, in.Audit[len(in.Audit)-2], fsm.AuditEvent{Index: 3, At: t0 + lease + 1 + ms(9),
					Op: "resolve", Status: fsm.StatusOK, State: fsm.StateExecuted, Actor: "ops@example.com",
					Outcome: fsm.OutcomeExecuted, Reason: "checked the provider"})
			},
		},
		{
			name: "resolve/in_doubt to failed lets the key be granted again",
			steps: then(toState(fsm.StateInDoubt),
				step{cmd: resolve("k", fsm.OutcomeFailed, ""), want: fsm.StatusOK},
				step{cmd: claim("k", "B", payloadA), want: fsm.StatusGranted}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Generation", r.Intent.Generation, uint64(2))
				eq(t, "FencingToken", r.Intent.FencingToken, uint64(4))
				eq(t, "Created", r.Created, true)
			},
		},
		{
			name: "resolve/repeat changes nothing",
			steps: then(toState(fsm.StateInDoubt),
				step{cmd: resolve("k", fsm.OutcomeExecuted, resultOK), want: fsm.StatusOK},
				step{cmd: resolve("k", fsm.OutcomeExecuted, resultOK), want: fsm.StatusOK}),
			state: fsm.StateExecuted,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Version", r.Intent.Version, uint64(3))
			},
		},
		{
			name: "resolve/a different verdict after resolution is invalid_state",
			steps: then(toState(fsm.StateInDoubt),
				step{cmd: resolve("k", fsm.OutcomeExecuted, resultOK), want: fsm.StatusOK},
				step{cmd: resolve("k", fsm.OutcomeFailed, ""), want: fsm.StatusInvalidState}),
			state: fsm.StateExecuted,
		},
		{
			name:  "resolve/declared is invalid_state",
			steps: then(toState(fsm.StateDeclared), step{cmd: resolve("k", fsm.OutcomeFailed, ""), want: fsm.StatusInvalidState}),
			state: fsm.StateDeclared,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "last audit op", lastEvent(t, r.Intent).Op, "resolve")
			},
		},
		{
			name: "resolve/pending_approval is invalid_state",
			steps: then(toState(fsm.StatePendingApproval),
				step{cmd: resolve("k", fsm.OutcomeFailed, ""), want: fsm.StatusInvalidState}),
			state: fsm.StatePendingApproval,
		},
		{
			name: "resolve/failed with another outcome is invalid_state",
			steps: then(toState(fsm.StateFailed),
				step{cmd: resolve("k", fsm.OutcomeExecuted, resultOK), want: fsm.StatusInvalidState}),
			state: fsm.StateFailed,
		},
		{
			name: "resolve/invalid outcome is malformed",
			steps: then(toState(fsm.StateInDoubt),
				step{cmd: resolve("k", "unknown", ""), want: fsm.StatusMalformed}),
			state: fsm.StateInDoubt,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Version", r.Intent.Version, uint64(2))
			},
		},

		// ---- approve / reject ----
		{
			name:  "approve/pending becomes approved",
			steps: then(toState(fsm.StatePendingApproval), step{advance: ms(1), cmd: approve("k"), want: fsm.StatusOK}),
			state: fsm.StateApproved,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "UpdatedAt", r.Intent.UpdatedAt, t0+ms(1))
				wantEvent(t, lastEvent(t, r.Intent), fsm.AuditEvent{Index: 2, At: t0 + ms(1), Op: "approve",
					Status: fsm.StatusOK, State: fsm.StateApproved, Actor: "lead@example.com", Reason: "looks fine"})
			},
		},
		{
			name:  "reject/pending becomes rejected",
			steps: then(toState(fsm.StatePendingApproval), step{cmd: reject("k"), want: fsm.StatusOK}),
			state: fsm.StateRejected,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "last audit op", lastEvent(t, r.Intent).Op, "reject")
			},
		},
		{
			name:  "approve/again by the same approver is refused and audited",
			steps: then(toState(fsm.StateApproved), step{cmd: approve("k"), want: fsm.StatusAlreadyApproved}),
			state: fsm.StateApproved,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "approvals", len(r.Intent.Approvals), 1)
				eq(t, "last audit status", lastEvent(t, r.Intent).Status, fsm.StatusAlreadyApproved)
			},
		},
		{
			name:  "reject/again changes nothing",
			steps: then(toState(fsm.StateRejected), step{cmd: reject("k"), want: fsm.StatusOK}),
			state: fsm.StateRejected,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "Version", r.Intent.Version, uint64(2))
			},
		},
		{
			name:  "approve/declared is not pending",
			steps: then(toState(fsm.StateDeclared), step{cmd: approve("k"), want: fsm.StatusNotPending}),
			state: fsm.StateDeclared,
		},
		{
			name:  "approve/rejected is not pending",
			steps: then(toState(fsm.StateRejected), step{cmd: approve("k"), want: fsm.StatusNotPending}),
			state: fsm.StateRejected,
		},
		{
			name:  "reject/approved is not pending",
			steps: then(toState(fsm.StateApproved), step{cmd: reject("k"), want: fsm.StatusNotPending}),
			state: fsm.StateApproved,
			check: func(t *testing.T, h *harness, r *fsm.Result) {
				eq(t, "last audit status", lastEvent(t, r.Intent).Status, fsm.StatusNotPending)
			},
		},
		{
			name:  "reject/executed is not pending",
			steps: then(toState(fsm.StateExecuted), step{cmd: reject("k"), want: fsm.StatusNotPending}),
			state: fsm.StateExecuted,
		},
	}
}

func TestTransitions(t *testing.T) {
	for _, tc := range transitionCases() {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			last := h.run(tc.steps)
			in := h.get("k")
			switch {
			case tc.state == "" && in != nil:
				t.Fatalf("record exists in state %s, want none", in.State)
			case tc.state != "" && in == nil:
				t.Fatalf("no record, want state %s", tc.state)
			case in != nil && in.State != tc.state:
				t.Fatalf("state %s, want %s", in.State, tc.state)
			}
			if last.Intent != nil && !reflect.DeepEqual(last.Intent, in) {
				t.Fatalf("result intent is not the stored record")
			}
			if in != nil && in.Version > uint64(len(tc.steps)) {
				t.Fatalf("Version %d beyond the last index %d", in.Version, len(tc.steps))
			}
			if tc.check != nil {
				tc.check(t, h, last)
			}
		})
	}
}

func TestClaimDivergentInEveryState(t *testing.T) {
	fpA, fpB := mustFP(payloadA), mustFP(payloadB)
	for _, s := range fsm.States {
		t.Run(string(s), func(t *testing.T) {
			h := newHarness(t)
			h.run(toState(s))
			before := h.get("k")
			r := h.must(claim("k", "B", payloadB), fsm.StatusDivergent)
			in := r.Intent
			eq(t, "State", in.State, s)
			eq(t, "Divergent", in.Divergent, uint64(1))
			eq(t, "Result.Fingerprint", r.Fingerprint, fpB)
			eq(t, "Intent.Fingerprint", in.Fingerprint, fpA)
			eq(t, "Owner", in.Owner, before.Owner)
			eq(t, "FencingToken", in.FencingToken, before.FencingToken)
			eq(t, "Generation", in.Generation, before.Generation)
			eq(t, "Payload", string(in.Payload), string(before.Payload))
			eq(t, "Version", in.Version, h.idx)
			wantEvent(t, lastEvent(t, in), fsm.AuditEvent{Index: h.idx, At: h.at, Op: "claim",
				Status: fsm.StatusDivergent, State: s, Owner: "B", Fingerprint: fpB})
			if !strings.Contains(r.Detail, fpA) || !strings.Contains(r.Detail, fpB) {
				t.Fatalf("detail %q does not show both fingerprints", r.Detail)
			}
			// The same owner with a different payload is divergent too, and counted.
			r = h.must(claim("k", "A", payloadB), fsm.StatusDivergent)
			eq(t, "Divergent", r.Intent.Divergent, uint64(2))
		})
	}
}

func TestClaimDivergentTool(t *testing.T) {
	h := newHarness(t)
	h.must(claim("k", "A", payloadA), fsm.StatusGranted)
	c := claim("k", "A", payloadA)
	_, fp, err := fsm.Fingerprint("email.send", []byte(payloadA))
	if err != nil {
		t.Fatal(err)
	}
	c.Tool, c.Fingerprint = "email.send", fp
	r := h.must(c, fsm.StatusDivergent)
	eq(t, "Tool", r.Intent.Tool, tool)
	eq(t, "Divergent", r.Intent.Divergent, uint64(1))
}

func TestMalformedClaimWritesNothing(t *testing.T) {
	cases := map[string]func(c *fsm.Claim){
		"no owner":       func(c *fsm.Claim) { c.Owner = "" },
		"zero lease":     func(c *fsm.Claim) { c.LeaseMS = 0 },
		"negative lease": func(c *fsm.Claim) { c.LeaseMS = -5 },
		// Windows no snapshot could hold (restore refuses them).
		"lease over MaxWindowMS":         func(c *fsm.Claim) { c.LeaseMS = fsm.MaxWindowMS + 1 },
		"dedupe window over MaxWindowMS": func(c *fsm.Claim) { c.DedupeWindowMS = fsm.MaxWindowMS + 1 },
		"default lease over MaxWindowMS": func(c *fsm.Claim) { c.LeaseMS, c.DefaultLeaseMS = 0, fsm.MaxWindowMS+1 },
		"negative dedupe window":         func(c *fsm.Claim) { c.DedupeWindowMS = -1 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			c := claim("k", "A", payloadA)
			mutate(c)
			r := h.must(c, fsm.StatusMalformed)
			if r.Intent != nil || h.l.Len() != 0 {
				t.Fatalf("malformed claim created a record: %+v", r.Intent)
			}
		})
	}
	t.Run("payload not JSON", func(t *testing.T) {
		h := newHarness(t)
		c := claim("k", "A", payloadA)
		c.Payload = json.RawMessage(`{"amount":`)
		r := h.l.ApplyCommand(1, c)
		eq(t, "Status", r.Status, fsm.StatusMalformed)
		eq(t, "Len", h.l.Len(), 0)
	})
}

// What apply accepts, a snapshot can hold: a command stamped outside
// 0..MaxSnapshotTime, or a renewal past MaxWindowMS, changes nothing, and
// the ledger still restores from its own snapshot.
func TestApplyRefusesWhatNoSnapshotCouldHold(t *testing.T) {
	h := newHarness(t)
	g := h.must(claim("k", "A", payloadA), fsm.StatusGranted)
	h.must(&fsm.Renew{Namespace: ns, Key: "k", Owner: "A", FencingToken: g.Intent.FencingToken, LeaseMS: fsm.MaxWindowMS + 1},
		fsm.StatusMalformed)
	for _, at := range []int64{fsm.MaxSnapshotTime + 1, -1} {
		if r := h.applyAt(at, claim("k2", "B", payloadA)); r.Status != fsm.StatusMalformed {
			t.Fatalf("a claim stamped %d: %v, want malformed", at, r.Status)
		}
	}
	if h.l.Len() != 1 || h.l.Now() > fsm.MaxSnapshotTime {
		t.Fatalf("refused commands changed the ledger: %d intents, clock %d", h.l.Len(), h.l.Now())
	}
	var buf bytes.Buffer
	if err := h.l.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := fsm.Restore(&buf)
	if err != nil {
		t.Fatalf("the ledger cannot restore its own snapshot: %v", err)
	}
	if back.Len() != 1 || back.Digest() != h.l.Digest() {
		t.Fatalf("restored %d intents", back.Len())
	}
}

func TestMalformedResultChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	before := h.get("k")
	c := complete("k", "A", 1, fsm.OutcomeExecuted, "")
	c.Result = json.RawMessage(`{"charge":`)
	c.At = t0
	r := h.l.ApplyCommand(2, c)
	eq(t, "Status", r.Status, fsm.StatusMalformed)
	if !reflect.DeepEqual(h.get("k"), before) {
		t.Fatalf("malformed complete changed the record")
	}

	h = newHarness(t)
	h.run(toState(fsm.StateInDoubt))
	before = h.get("k")
	rs := resolve("k", fsm.OutcomeExecuted, "")
	rs.Result = json.RawMessage(`[1,`)
	rs.At = h.at
	r = h.l.ApplyCommand(3, rs)
	eq(t, "Status", r.Status, fsm.StatusMalformed)
	if !reflect.DeepEqual(h.get("k"), before) {
		t.Fatalf("malformed resolve changed the record")
	}
}

func TestUnknownKeyIsNotFound(t *testing.T) {
	cmds := []fsm.Command{
		complete("missing", "A", 1, fsm.OutcomeExecuted, ""),
		renew("missing", "A", 1, 1000),
		commit("missing", "A"),
		resolve("missing", fsm.OutcomeFailed, ""),
		approve("missing"),
		reject("missing"),
	}
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	for _, c := range cmds {
		t.Run(fmt.Sprintf("%T", c), func(t *testing.T) {
			r := h.must(c, fsm.StatusNotFound)
			if r.Intent != nil {
				t.Fatalf("not_found carries an intent: %+v", r.Intent)
			}
			if !errors.Is(r.Err(), fsm.ErrNotFound) {
				t.Fatalf("Err() = %v", r.Err())
			}
			if !strings.Contains(r.Detail, `"missing"`) {
				t.Fatalf("detail %q does not name the key", r.Detail)
			}
			eq(t, "Len", h.l.Len(), 1)
		})
	}
	// Another namespace is another key.
	c := complete("k", "A", 1, fsm.OutcomeExecuted, "")
	c.Namespace = "other"
	h.must(c, fsm.StatusNotFound)
}

func TestExpireSweep(t *testing.T) {
	h := newHarness(t)
	lease := ms(leaseMS)
	h.must(claim("old", "A", payloadA), fsm.StatusGranted)  // deadline t0+lease
	h.must(claim("done", "A", payloadA), fsm.StatusGranted) // token 2
	h.must(complete("done", "A", 2, fsm.OutcomeExecuted, ""), fsm.StatusOK)
	h.advance(ms(500))
	h.must(claim("young", "B", payloadA), fsm.StatusGranted) // deadline t0+500ms+lease
	h.advance(lease - ms(500) + 1)                           // past "old", not past "young"

	due := h.l.DueLeases(h.at, 10)
	if len(due) != 1 || due[0] != (fsm.Ref{Namespace: ns, Key: "old"}) {
		t.Fatalf("DueLeases = %v, want only old", due)
	}
	youngBefore := h.get("young")
	r := h.must(expire("old", "young", "done", "missing", "old"), fsm.StatusOK)
	eq(t, "Count", r.Count, 1)
	if r.Intent != nil {
		t.Fatalf("sweep result carries an intent")
	}
	old := h.get("old")
	eq(t, "old.State", old.State, fsm.StateInDoubt)
	eq(t, "old.UpdatedAt", old.UpdatedAt, h.at)
	eq(t, "old.Version", old.Version, r.Index)
	wantEvent(t, lastEvent(t, old), fsm.AuditEvent{Index: r.Index, At: h.at, Op: "expire",
		Status: fsm.StatusExpired, State: fsm.StateInDoubt, Owner: "A", FencingToken: 1,
		Reason: "lease passed without a report"})
	if !reflect.DeepEqual(h.get("young"), youngBefore) {
		t.Fatalf("expire touched a live lease")
	}
	eq(t, "done.State", h.get("done").State, fsm.StateExecuted)

	// Applied again (a repeated sweep), it changes nothing more.
	r = h.must(expire("old"), fsm.StatusOK)
	eq(t, "Count", r.Count, 0)
	eq(t, "old.Version", h.get("old").Version, r.Index-1)

	counts := h.l.Counts()
	eq(t, "in_doubt", counts[fsm.StateInDoubt], 1)
	eq(t, "declared", counts[fsm.StateDeclared], 1)
	eq(t, "executed", counts[fsm.StateExecuted], 1)
}

func TestPurgeSweep(t *testing.T) {
	h := newHarness(t)
	window := ms(dedupeMS)
	lease := ms(leaseMS)
	// One record in each state, all last changed at t0 (in_doubt a little later).
	for i, s := range fsm.States {
		key := "k" + fmt.Sprint(i)
		grant := h.idx + 1
		for _, st := range toState(s) {
			h.advance(st.advance)
			h.must(rekey(st.cmd, key, grant), st.want)
		}
	}
	byState := func(s fsm.State) string {
		for i, st := range fsm.States {
			if st == s {
				return "k" + fmt.Sprint(i)
			}
		}
		panic(s)
	}
	for _, s := range fsm.States {
		eq(t, "state of "+byState(s), h.get(byState(s)).State, s)
	}
	all := make([]string, len(fsm.States))
	for i := range fsm.States {
		all[i] = "k" + fmt.Sprint(i)
	}
	finishedAt := h.get(byState(fsm.StateExecuted)).UpdatedAt

	// Before the window passes nothing goes.
	h.at = finishedAt + window - 1
	r := h.must(purge(all...), fsm.StatusOK)
	eq(t, "Count before window", r.Count, 0)
	if got := h.l.DuePurges(h.at, 100); len(got) != 0 {
		t.Fatalf("DuePurges before the window = %v", got)
	}

	// Far past every window: only finished records go.
	h.at = finishedAt + 10*window + lease
	due := h.l.DuePurges(h.at, 100)
	eq(t, "len(DuePurges)", len(due), 4)
	r = h.must(purge(all...), fsm.StatusOK)
	eq(t, "Count", r.Count, 4)
	for _, s := range fsm.States {
		in := h.get(byState(s))
		if s.Finished() != (in == nil) {
			t.Fatalf("state %s: finished=%v but record present=%v", s, s.Finished(), in != nil)
		}
	}
	eq(t, "Len", h.l.Len(), 4)
	counts := h.l.Counts()
	for _, s := range fsm.States {
		want := 0
		if !s.Finished() {
			want = 1
		}
		eq(t, "count "+string(s), counts[s], want)
	}
	if got := h.l.DuePurges(h.at, 100); len(got) != 0 {
		t.Fatalf("DuePurges after purge = %v", got)
	}

	// The key is free again: a fresh record, generation 1, a new token.
	key := byState(fsm.StateExecuted)
	r = h.must(claim(key, "Z", payloadB), fsm.StatusGranted)
	eq(t, "Created", r.Created, true)
	eq(t, "Generation", r.Intent.Generation, uint64(1))
	eq(t, "FencingToken", r.Intent.FencingToken, r.Index)
	eq(t, "Fingerprint", r.Intent.Fingerprint, mustFP(payloadB))
	eq(t, "CreatedAt", r.Intent.CreatedAt, h.at)
	eq(t, "Divergent", r.Intent.Divergent, uint64(0))
	eq(t, "Duplicates", r.Intent.Duplicates, uint64(0))
	eq(t, "len(Audit)", len(r.Intent.Audit), 1)
}

func TestPurgeAtExactWindow(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateExecuted))
	at := h.get("k").UpdatedAt + ms(dedupeMS)
	if got := h.l.DuePurges(at-1, 10); len(got) != 0 {
		t.Fatalf("due before the window: %v", got)
	}
	if got := h.l.DuePurges(at, 10); len(got) != 1 {
		t.Fatalf("not due at the end of the window: %v", got)
	}
	h.at = at
	r := h.must(purge("k"), fsm.StatusOK)
	eq(t, "Count", r.Count, 1)
	if h.get("k") != nil {
		t.Fatalf("record not purged")
	}
}

// A duplicate claim does not restart the dedupe window: it runs from the
// last state change.
func TestDuplicateDoesNotExtendWindow(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateExecuted))
	h.advance(ms(dedupeMS) - 1)
	h.must(claim("k", "B", payloadA), fsm.StatusDuplicate)
	h.advance(1)
	r := h.must(purge("k"), fsm.StatusOK)
	eq(t, "Count", r.Count, 1)
}

// rekey returns a copy of a toState command for another key; tokens that
// referred to index 1 refer to the grant made at index grant.
func rekey(cmd fsm.Command, key string, grant uint64) fsm.Command {
	switch c := cmd.(type) {
	case *fsm.Claim:
		cp := *c
		cp.Key = key
		return &cp
	case *fsm.Complete:
		cp := *c
		cp.Key = key
		cp.FencingToken = grant
		return &cp
	case *fsm.Commit:
		cp := *c
		cp.Key = key
		return &cp
	case *fsm.Approve:
		cp := *c
		cp.Key = key
		return &cp
	case *fsm.Reject:
		cp := *c
		cp.Key = key
		return &cp
	case *fsm.Expire:
		return expire(key)
	}
	panic(fmt.Sprintf("rekey %T", cmd))
}

func TestTimeNeverRunsBackwards(t *testing.T) {
	h := newHarness(t)
	h.at = t0 + ms(10_000)
	h.must(claim("a", "A", payloadA), fsm.StatusGranted)
	eq(t, "Now", h.l.Now(), t0+ms(10_000))

	// A command stamped earlier (an older leader's clock) uses the ledger's time.
	r := h.applyAt(t0, claim("b", "A", payloadA))
	eq(t, "Status", r.Status, fsm.StatusGranted)
	eq(t, "Now", h.l.Now(), t0+ms(10_000))
	eq(t, "CreatedAt", r.Intent.CreatedAt, t0+ms(10_000))
	eq(t, "LeaseDeadline", r.Intent.LeaseDeadline, t0+ms(10_000)+ms(leaseMS))
	eq(t, "audit At", lastEvent(t, r.Intent).At, t0+ms(10_000))

	// An old timestamp cannot revive a lease either: once the ledger's time
	// passed the deadline, an earlier-stamped command still sees it passed.
	h.at = t0 + ms(10_000) + ms(leaseMS) + 1
	h.must(claim("c", "A", payloadA), fsm.StatusGranted) // moves time past a's lease
	r = h.applyAt(t0, complete("a", "A", 1, fsm.OutcomeExecuted, ""))
	eq(t, "Status", r.Status, fsm.StatusOK)
	eq(t, "audit ops", r.Intent.Audit[1].Op, "expire")
	eq(t, "UpdatedAt", r.Intent.UpdatedAt, h.at)

	// A renew stamped in the past extends from the ledger's time.
	r = h.applyAt(t0, renew("c", "A", 3, 5000))
	eq(t, "Status", r.Status, fsm.StatusOK)
	eq(t, "LeaseDeadline", r.Intent.LeaseDeadline, h.at+ms(5000))
	eq(t, "Now", h.l.Now(), h.at)
}

func TestAuditBounded(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	const attempts = fsm.MaxAuditEvents + 6
	for i := 0; i < attempts; i++ {
		h.must(claim("k", fmt.Sprintf("other-%d", i), payloadA), fsm.StatusInFlight)
	}
	in := h.get("k")
	eq(t, "len(Audit)", len(in.Audit), fsm.MaxAuditEvents)
	// 1 grant + attempts refusals were recorded; the oldest went.
	eq(t, "AuditDropped", in.AuditDropped, uint64(1+attempts-fsm.MaxAuditEvents))
	eq(t, "last event index", in.Audit[len(in.Audit)-1].Index, h.idx)
	eq(t, "first kept event index", in.Audit[0].Index, h.idx-fsm.MaxAuditEvents+1)
	eq(t, "last event owner", in.Audit[len(in.Audit)-1].Owner, fmt.Sprintf("other-%d", attempts-1))
	for i := 1; i < len(in.Audit); i++ {
		if in.Audit[i].Index != in.Audit[i-1].Index+1 {
			t.Fatalf("audit not contiguous at %d: %d after %d", i, in.Audit[i].Index, in.Audit[i-1].Index)
		}
	}
}

// Records handed out are never changed by later commands.
func TestReturnedIntentsAreImmutable(t *testing.T) {
	h := newHarness(t)
	first := h.must(claim("k", "A", payloadA), fsm.StatusGranted).Intent
	snap, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	h.must(claim("k", "B", payloadA), fsm.StatusInFlight)
	h.must(complete("k", "A", 1, fsm.OutcomeExecuted, resultOK), fsm.StatusOK)
	h.must(commit("k", "A"), fsm.StatusOK)
	after, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "first grant after later commands", string(after), string(snap))
	eq(t, "State", first.State, fsm.StateDeclared)
}

func TestResultErr(t *testing.T) {
	var nilResult *fsm.Result
	if nilResult.Err() != nil {
		t.Fatalf("nil result has an error")
	}
	for status, want := range sentinels {
		r := &fsm.Result{Status: status, Detail: "why"}
		err := r.Err()
		if want == nil {
			if err != nil {
				t.Fatalf("%s: Err() = %v", status, err)
			}
			continue
		}
		if !errors.Is(err, want) {
			t.Fatalf("%s: Err() = %v, want %v", status, err, want)
		}
		eq(t, "Error()", err.Error(), want.Error()+": why")
		r.Detail = ""
		eq(t, "Error() without detail", r.Err().Error(), want.Error())
	}
	for _, s := range []fsm.Status{fsm.StatusExpired, fsm.StatusPurged} {
		if err := (&fsm.Result{Status: s}).Err(); err != nil {
			t.Fatalf("%s: Err() = %v", s, err)
		}
	}
}
