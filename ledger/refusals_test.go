package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// refusalSetup is a service over m whose refusal notes are proposed only
// when it closes (an hour's interval), on m's clock.
func refusalSetup(t *testing.T, r ledger.Replicator, m *ledgertest.Memory) *ledger.Service {
	t.Helper()
	s := ledgertest.NewService(t, r, ledger.Config{Node: "n1", RefusalNotes: ledger.RefusalNotes{Interval: time.Hour, Now: m.Now}})
	t.Cleanup(s.Close)
	return s
}

func lastAudit(t *testing.T, m *ledgertest.Memory, k string) fsm.AuditEvent {
	t.Helper()
	in := m.Ledger().Get("default", k)
	if in == nil || len(in.Audit) == 0 {
		t.Fatalf("no trail for %s", k)
	}
	return in.Audit[len(in.Audit)-1]
}

// applyClaim applies the claim the service makes of req to l at m's time
// and the next index, and returns the state machine's answer: what the
// log answers where a note test's claim was answered from the state.
func applyClaim(t *testing.T, s *ledger.Service, m *ledgertest.Memory, l *fsm.Machine, req ledger.ClaimRequest) *fsm.Result {
	t.Helper()
	canonical, fp, err := fsm.Fingerprint(req.Tool, req.Payload)
	if err != nil {
		t.Fatal(err)
	}
	c := &fsm.Claim{Namespace: "default", Key: req.Key, Tool: req.Tool, Owner: req.Owner, Payload: canonical, Fingerprint: fp,
		DefaultLeaseMS: s.Limits().DefaultLease.Milliseconds(), DedupeWindowMS: s.Limits().DedupeWindow.Milliseconds()}
	data, err := fsm.Encode(m.Now().UnixNano(), c)
	if err != nil {
		t.Fatal(err)
	}
	return l.Apply(l.AppliedIndex()+1, data)
}

// logStep is a claim of a sequence on one key: made advance after the
// one before, it is answered want, from the leader's state (local, no
// entry) or through the log (one entry).
type logStep struct {
	name    string
	advance time.Duration
	req     ledger.ClaimRequest
	want    fsm.Status
	local   bool
}

// runSteps makes the claims of steps in order and checks each answer and
// where it came from.
func runSteps(t *testing.T, s *ledger.Service, m *ledgertest.Memory, steps []logStep) {
	t.Helper()
	for _, st := range steps {
		m.Advance(st.advance)
		before := m.Proposed()
		r := mustClaim(t, s, st.req, st.want)
		eq(t, st.name+": local", r.Local, st.local)
		proposed := 1
		if st.local {
			proposed = 0
		}
		eq(t, st.name+": proposed", m.Proposed()-before, proposed)
	}
}

// waitFor waits until cond holds (bounded: a hang guard, not a
// threshold); state says what was seen, for the failure.
func waitFor(t *testing.T, what string, cond func() bool, state func() any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v", what, state())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNotesEveryInterval: refusal, divergent and duplicate notes are
// proposed each Interval, not only at Close; they count every claim of
// the storm answered from the state, and they are all the entries the
// storm costs.
func TestNotesEveryInterval(t *testing.T) {
	const storm = 100
	for _, tc := range []struct {
		name string
		// mark makes the key's claims answerable from the state; then
		// the storm's claims (payload) are answered want.
		mark    func(t *testing.T, s *ledger.Service)
		payload string
		want    fsm.Status
		noted   func(ledger.RefusalStats) uint64
		// counter is the intent's count of the claims (nil: none): the
		// one through the log and the storm's.
		counter func(*fsm.Intent) uint64
	}{
		{"refusals", func(t *testing.T, s *ledger.Service) {
			mustClaim(t, s, claimReq(key, owner, `{"a":1}`), fsm.StatusGranted)
			mustClaim(t, s, claimReq(key, "first", `{"a":1}`), fsm.StatusInFlight)
		}, `{"a":1}`, fsm.StatusInFlight, func(st ledger.RefusalStats) uint64 { return st.Noted }, nil},
		{"divergent", func(t *testing.T, s *ledger.Service) {
			mustClaim(t, s, claimReq(key, owner, `{"a":1}`), fsm.StatusGranted)
			mustClaim(t, s, claimReq(key, "first", `{"a":2}`), fsm.StatusDivergent)
		}, `{"a":2}`, fsm.StatusDivergent, func(st ledger.RefusalStats) uint64 { return st.DivergentNoted },
			func(in *fsm.Intent) uint64 { return in.Divergent }},
		{"duplicates", func(t *testing.T, s *ledger.Service) {
			executedKey(t, s, `{"amount":5}`)
			mustClaim(t, s, claimReq(key, "first", `{"amount":5}`), fsm.StatusDuplicate)
		}, `{"amount":5}`, fsm.StatusDuplicate, func(st ledger.RefusalStats) uint64 { return st.DuplicatesNoted },
			func(in *fsm.Intent) uint64 { return in.Duplicates }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ledgertest.NewMemory(start)
			s := ledgertest.NewService(t, m, ledger.Config{Node: "n1", RefusalNotes: ledger.RefusalNotes{Interval: 20 * time.Millisecond, Now: m.Now}})
			t.Cleanup(s.Close)
			tc.mark(t, s)
			proposed := m.Proposed()
			for i := range storm {
				if r := mustClaim(t, s, claimReq(key, fmt.Sprintf("retrier-%d", i), tc.payload), tc.want); !r.Local {
					t.Fatalf("claim %d went through the log", i)
				}
			}
			waitFor(t, "the notes", func() bool { return tc.noted(s.RefusalStats()) >= storm }, func() any { return s.RefusalStats() })
			eq(t, "noted", tc.noted(s.RefusalStats()), uint64(storm))
			if tc.counter != nil {
				eq(t, "counter", tc.counter(m.Ledger().Get("default", key)), uint64(1+storm))
			}
			eq(t, "entries", uint64(m.Proposed()-proposed), s.RefusalStats().Entries)
		})
	}
}

// TestStormCostsOneEntry: however many claims are refused in_flight, the
// leader answers them from its state, each exactly as the log would, and
// one NoteRefusals entry records them all on the key's trail.
func TestStormCostsOneEntry(t *testing.T) {
	m := ledgertest.NewMemory(start)
	s := refusalSetup(t, m, m)
	mustClaim(t, s, claimReq(key, owner, `{"a":1}`), fsm.StatusGranted)
	// The first refusal on the key goes through the log and marks it.
	first := mustClaim(t, s, claimReq(key, "first", `{"a":1}`), fsm.StatusInFlight)
	eq(t, "first local", first.Local, false)
	eq(t, "first attempt", first.Attempt, uint64(1))
	proposed := m.Proposed()

	const retriers, rounds = 20, 5
	for round := 1; round <= rounds; round++ {
		for i := range retriers {
			r := mustClaim(t, s, claimReq(key, fmt.Sprintf("retrier-%d", i), `{"a":1}`), fsm.StatusInFlight)
			eq(t, "local", r.Local, true)
			eq(t, "attempt", r.Attempt, uint64(round))
			eq(t, "detail", r.Detail, fmt.Sprintf("owner %q holds the lease", owner))
			eq(t, "version", r.Intent.Version, first.Intent.Version)
		}
	}
	eq(t, "entries during the storm", m.Proposed(), proposed)
	eq(t, "answered", s.RefusalStats().Answered, uint64(retriers*rounds))

	s.Close() // proposes what was counted
	eq(t, "entries after the storm", m.Proposed(), proposed+1)
	ev := lastAudit(t, m, key)
	eq(t, "status", ev.Status, fsm.StatusInFlight)
	if !strings.Contains(ev.Reason, fmt.Sprintf("%d in_flight refusals", retriers*rounds)) || !strings.Contains(ev.Reason, "and 12 more") {
		t.Fatalf("reason %q", ev.Reason)
	}
	eq(t, "noted", s.RefusalStats().Noted, uint64(retriers*rounds))
	in := m.Ledger().Get("default", key)
	eq(t, "state", in.State, fsm.StateDeclared)
	eq(t, "grant still in the trail", in.Audit[0].Status, fsm.StatusGranted)
}

// TestRefusalsThatChangeSomethingGoThroughTheLog: the first divergent
// claim (it counts; the next is answered from the state and counted by a
// note), the owner's repeat (granted again), and the first claim after
// the lease passed (it expires the grant) are proposed; an in_doubt
// refusal after that is answered from the state.
func TestRefusalsThatChangeSomethingGoThroughTheLog(t *testing.T) {
	m := ledgertest.NewMemory(start)
	s := refusalSetup(t, m, m)
	req := claimReq(key, owner, `{"a":1}`)
	req.Lease = time.Second
	mustClaim(t, s, req, fsm.StatusGranted)
	runSteps(t, s, m, []logStep{
		{"divergent", 0, claimReq(key, "other", `{"a":2}`), fsm.StatusDivergent, false},
		{"owner's repeat", 0, claimReq(key, owner, `{"a":1}`), fsm.StatusGranted, false},
		{"first in_flight", 0, claimReq(key, "other", `{"a":1}`), fsm.StatusInFlight, false},
		{"in_flight", 0, claimReq(key, "other", `{"a":1}`), fsm.StatusInFlight, true},
		{"divergent on a held key: the second divergent claim", 0, claimReq(key, "other", `{"a":3}`), fsm.StatusDivergent, true},
		{"lease passed", 2 * time.Second, claimReq(key, "other", `{"a":1}`), fsm.StatusInDoubt, false},
		{"in_doubt", 0, claimReq(key, "third", `{"a":1}`), fsm.StatusInDoubt, true},
	})
	s.Close() // the second divergent claim is counted by its note
	eq(t, "divergent counted", m.Ledger().Get("default", key).Divergent, uint64(2))
}

// notLeading answers linearizable reads as a follower does.
type notLeading struct {
	*ledgertest.Memory
	leader string
}

func (n notLeading) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	if c == ledger.Linearizable {
		return &ledger.NotLeaderError{LeaderID: "n2", LeaderHTTP: n.leader}
	}
	return n.Memory.Read(ctx, c, fn)
}

// TestFollowerSendsLikelyRefusalsToTheLeader: a follower whose copy says
// the claim would be refused answers NotLeaderError when the caller may
// forward the request (so the leader answers it without an entry), and
// proposes it otherwise; a claim that would not be refused is proposed.
func TestFollowerSendsLikelyRefusalsToTheLeader(t *testing.T) {
	cases := []struct {
		name        string
		forwardable bool
		leader      string
		payload     string
		wantForward bool
		// mark is the payload of the claim through the log that marks
		// the key: in_flight unless it diverges.
		mark string
	}{
		{"forwardable", true, "http://10.0.0.2:8080", `{"a":1}`, true, `{"a":1}`},
		{"already forwarded", false, "http://10.0.0.2:8080", `{"a":1}`, false, `{"a":1}`},
		{"leader's address unknown", true, "", `{"a":1}`, false, `{"a":1}`},
		{"divergent on a key marked in_flight", true, "http://10.0.0.2:8080", `{"a":2}`, false, `{"a":1}`},
		{"divergent on a key marked divergent", true, "http://10.0.0.2:8080", `{"a":2}`, true, `{"a":3}`},
		{"divergent already forwarded", false, "http://10.0.0.2:8080", `{"a":2}`, false, `{"a":3}`},
		{"in_flight on a key marked divergent only", true, "http://10.0.0.2:8080", `{"a":1}`, false, `{"a":3}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := ledgertest.NewMemory(start)
			s := refusalSetup(t, notLeading{Memory: m, leader: tc.leader}, m)
			mustClaim(t, s, claimReq(key, owner, `{"a":1}`), fsm.StatusGranted)
			want := fsm.StatusInFlight
			if tc.mark != `{"a":1}` {
				want = fsm.StatusDivergent
			}
			mustClaim(t, s, claimReq(key, "first", tc.mark), want) // through the log: marks the key
			ctx := context.Background()
			if tc.forwardable {
				ctx = ledger.WithForwardableClaim(ctx)
			}
			before := m.Proposed()
			r, err := s.Claim(ctx, claimReq(key, "other", tc.payload))
			var nl *ledger.NotLeaderError
			if got := errors.As(err, &nl); got != tc.wantForward {
				t.Fatalf("forwarded: %v (%+v, %v), want %v", got, r, err, tc.wantForward)
			}
			proposed := 1
			if tc.wantForward {
				proposed = 0
			}
			eq(t, "proposed", m.Proposed()-before, proposed)
		})
	}
}

// TestWaitIgnoresAuditOnlyWrites: a long-poll on a held key is not
// answered by refusals (through the log or noted), renewals or repeated
// claims, only by the report; a poll behind a state change answers at
// once.
func TestWaitIgnoresAuditOnlyWrites(t *testing.T) {
	f := newFeed()
	s := ledgertest.NewService(t, f, ledger.Config{Node: "n1", RefusalNotes: ledger.RefusalNotes{Interval: time.Hour, Now: f.Now}})
	ctx := context.Background()
	g := grant(t, s, "a")
	done := startWait(ctx, s, "a", g.Intent.Version, 30*time.Second)
	f.Await(t, 1)

	writes := []func() error{
		func() error { _, err := s.Claim(ctx, claimReq("a", "other", `{"k":"b"}`)); return err }, // divergent, through the log
		func() error { _, err := s.Claim(ctx, claimReq("a", owner, `{"k":"a"}`)); return err },   // the owner's repeat
		func() error {
			_, err := s.Renew(ctx, ledger.RenewRequest{Key: "a", Owner: owner, FencingToken: g.Intent.FencingToken, Lease: time.Second})
			return err
		},
		func() error { _, err := s.Claim(ctx, claimReq("a", "other", `{"k":"a"}`)); return err }, // in_flight, through the log
		func() error { _, err := s.Claim(ctx, claimReq("a", "other", `{"k":"a"}`)); return err }, // in_flight, from the state
	}
	for i, w := range writes {
		if err := w(); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	// The writes through the log woke the poll (wakes that come before it
	// re-arms are one), which read and went on waiting.
	f.Await(t, 2)
	if _, err := s.Complete(ctx, ledger.CompleteRequest{Key: "a", Owner: owner,
		FencingToken: g.Intent.FencingToken, Outcome: fsm.OutcomeExecuted}); err != nil {
		t.Fatal(err)
	}
	a := receive(t, done)
	if a.err != nil || a.in == nil || a.in.State != fsm.StateExecuted {
		t.Fatalf("answered with %+v, %v; want the report", a.in, a.err)
	}

	// A poll from before the report answers at once.
	a = receive(t, startWait(ctx, s, "a", g.Intent.Version, 30*time.Second))
	eq(t, "behind the report", a.in.State, fsm.StateExecuted)
	// One from after it waits out its wait (a zero wait answers at once).
	a = receive(t, startWait(ctx, s, "a", a.in.Version, 0))
	eq(t, "current", a.in.State, fsm.StateExecuted)
}
