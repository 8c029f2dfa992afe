package ledger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/namespace"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// noteGate is a replicator whose duplicate notes can be held back or
// refused; every other command goes through.
type noteGate struct {
	*ledgertest.Memory
	hold  chan struct{} // when not nil, notes wait until it is closed
	fails atomic.Int64  // refuse this many more notes
	tries atomic.Int64
}

func (g *noteGate) Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	if _, ok := cmd.(*fsm.NoteDuplicates); ok {
		g.tries.Add(1)
		if g.hold != nil {
			select {
			case <-g.hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if g.fails.Add(-1) >= 0 {
			return nil, errors.New("leadership lost: outcome unknown")
		}
	}
	return g.Memory.Propose(ctx, cmd)
}

// localSetup is a service that answers duplicates locally (it is never
// the leader) over g, with key executed.
func localSetup(t *testing.T, g *noteGate, cfg ledger.LocalDuplicates) *ledger.Service {
	t.Helper()
	cfg.Node = "n2"
	if cfg.Leading == nil {
		cfg.Leading = func() bool { return false }
	}
	cfg.Now = g.Now
	s := ledgertest.NewService(t, g, ledger.Config{LocalDuplicates: &cfg})
	t.Cleanup(s.Close)
	r := mustClaim(t, s, claimReq(key, owner, `{"amount":5}`), fsm.StatusGranted)
	if r.Local {
		t.Fatal("a grant was answered locally")
	}
	if _, err := s.Complete(context.Background(), ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: r.Intent.FencingToken,
		Outcome: fsm.OutcomeExecuted, Result: []byte(`{"id":"ch_1"}`)}); err != nil {
		t.Fatal(err)
	}
	return s
}

// duplicates is the key's duplicate count in the replicated ledger.
func duplicates(t *testing.T, m *ledgertest.Memory) uint64 {
	t.Helper()
	var n uint64
	if err := m.Read(context.Background(), ledger.Stale, func(l *fsm.Machine) { n = l.Get(namespace.Default, key).Duplicates }); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitStats waits (bounded) until cond holds for the service's counts.
func waitStats(t *testing.T, s *ledger.Service, what string, cond func(ledger.LocalDuplicateStats) bool) {
	t.Helper()
	waitFor(t, what, func() bool { return cond(s.LocalDuplicateStats()) }, func() any { return s.LocalDuplicateStats() })
}

func TestLocalDuplicateAnsweredThenNoted(t *testing.T) {
	g := &noteGate{Memory: ledgertest.NewMemory(start)}
	g.fails.Store(2) // the first two tries are unknown: retried
	s := localSetup(t, g, ledger.LocalDuplicates{})
	r := mustClaim(t, s, claimReq(key, "other", `{"amount":5}`), fsm.StatusDuplicate)
	if !r.Local || string(r.Intent.Result) != `{"id":"ch_1"}` {
		t.Fatalf("answer %+v", r)
	}
	waitStats(t, s, "the note", func(st ledger.LocalDuplicateStats) bool { return st.Noted == 1 })
	eq(t, "tries", g.tries.Load(), 3)
	eq(t, "duplicates recorded", duplicates(t, g.Memory), 1)
	st := s.LocalDuplicateStats()
	if st.Answered != 1 || st.Lost != 0 || st.QueueFull != 0 || st.Queued != 0 {
		t.Errorf("stats %+v", st)
	}

	// Other payloads and keys are not answered locally.
	mustClaim(t, s, claimReq(key, "other", `{"amount":6}`), fsm.StatusDivergent)
	if r := mustClaim(t, s, claimReq("fresh", "other", `{}`), fsm.StatusGranted); r.Local {
		t.Error("a fresh key answered locally")
	}
	eq(t, "answered", s.LocalDuplicateStats().Answered, 1)
}

func TestLocalDuplicateNotWhileLeading(t *testing.T) {
	g := &noteGate{Memory: ledgertest.NewMemory(start)}
	s := localSetup(t, g, ledger.LocalDuplicates{Leading: func() bool { return true }})
	if r := mustClaim(t, s, claimReq(key, "other", `{"amount":5}`), fsm.StatusDuplicate); r.Local {
		t.Fatal("the leader answered locally")
	}
	eq(t, "duplicates recorded", duplicates(t, g.Memory), 1)
	eq(t, "answered", s.LocalDuplicateStats().Answered, 0)
}

func TestLocalDuplicateNotNearTheWindowsEnd(t *testing.T) {
	g := &noteGate{Memory: ledgertest.NewMemory(start)}
	s := localSetup(t, g, ledger.LocalDuplicates{Margin: time.Minute})
	g.Advance(s.Limits().DedupeWindow - time.Minute) // the window ends within the margin
	if r := mustClaim(t, s, claimReq(key, "other", `{"amount":5}`), fsm.StatusDuplicate); r.Local {
		t.Fatal("answered locally within the margin of the window's end")
	}
}

func TestLocalDuplicateQueueFullGoesToTheLeader(t *testing.T) {
	g := &noteGate{Memory: ledgertest.NewMemory(start), hold: make(chan struct{})}
	s := localSetup(t, g, ledger.LocalDuplicates{Queue: 1})
	// The first note is taken and held in flight, the second queued.
	if r := mustClaim(t, s, claimReq(key, "b", `{"amount":5}`), fsm.StatusDuplicate); !r.Local {
		t.Fatal("first duplicate not answered locally")
	}
	// In flight: proposed, so its batch is closed (a note queued before
	// the loop took its batch would join it).
	waitStats(t, s, "the first note in flight", func(ledger.LocalDuplicateStats) bool { return g.tries.Load() == 1 })
	if r := mustClaim(t, s, claimReq(key, "c", `{"amount":5}`), fsm.StatusDuplicate); !r.Local {
		t.Fatal("second duplicate not answered locally")
	}
	if r := mustClaim(t, s, claimReq(key, "d", `{"amount":5}`), fsm.StatusDuplicate); r.Local {
		t.Fatal("answered locally with the note queue full")
	}
	eq(t, "duplicates recorded while the notes wait", duplicates(t, g.Memory), 1)
	close(g.hold)
	waitStats(t, s, "both notes", func(st ledger.LocalDuplicateStats) bool { return st.Noted == 2 })
	eq(t, "duplicates recorded", duplicates(t, g.Memory), 3)
	if st := s.LocalDuplicateStats(); st.Answered != 2 || st.QueueFull != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestLocalDuplicateNoteGivenUp(t *testing.T) {
	g := &noteGate{Memory: ledgertest.NewMemory(start)}
	g.fails.Store(1 << 30)
	s := localSetup(t, g, ledger.LocalDuplicates{NoteTimeout: 100 * time.Millisecond})
	mustClaim(t, s, claimReq(key, "b", `{"amount":5}`), fsm.StatusDuplicate)
	waitStats(t, s, "the note given up", func(st ledger.LocalDuplicateStats) bool { return st.Lost == 1 })
	eq(t, "duplicates recorded", duplicates(t, g.Memory), 0)
}

func TestLocalDuplicateCloseFlushesQueuedNotes(t *testing.T) {
	g := &noteGate{Memory: ledgertest.NewMemory(start), hold: make(chan struct{})}
	cfg := ledger.LocalDuplicates{Node: "n2", Leading: func() bool { return false }, Now: g.Now}
	s := ledgertest.NewService(t, g, ledger.Config{LocalDuplicates: &cfg})
	r := mustClaim(t, s, claimReq(key, owner, `{"amount":5}`), fsm.StatusGranted)
	if _, err := s.Complete(context.Background(), ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: r.Intent.FencingToken,
		Outcome: fsm.OutcomeExecuted}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"b", "c"} {
		if r := mustClaim(t, s, claimReq(key, o, `{"amount":5}`), fsm.StatusDuplicate); !r.Local {
			t.Fatal("not answered locally")
		}
	}
	go func() { time.Sleep(10 * time.Millisecond); close(g.hold) }() // the leader answers while Close waits
	s.Close()
	eq(t, "duplicates recorded by Close", duplicates(t, g.Memory), 2)
	if st := s.LocalDuplicateStats(); st.Noted != 2 || st.Lost != 0 {
		t.Errorf("stats %+v", st)
	}
	// Once closed (a node draining its requests), claims go to the leader:
	// no note is queued that nothing would send.
	if r := mustClaim(t, s, claimReq(key, "e", `{"amount":5}`), fsm.StatusDuplicate); r.Local {
		t.Error("answered locally after Close")
	}
	eq(t, "duplicates recorded", duplicates(t, g.Memory), 3)
}

// TestLocalDuplicatesNeedNodeAndLeadership: New refuses local duplicate
// answers without the node's id or a leadership check, and accepts them
// with both (the positive control).
func TestLocalDuplicatesNeedNodeAndLeadership(t *testing.T) {
	notLeading := func() bool { return false }
	for _, tc := range []struct {
		name string
		ld   ledger.LocalDuplicates
		ok   bool
	}{
		{"no node id", ledger.LocalDuplicates{Leading: notLeading}, false},
		{"no leadership check", ledger.LocalDuplicates{Node: "n1"}, false},
		{"both", ledger.LocalDuplicates{Node: "n1", Leading: notLeading}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ledger.New(ledgertest.NewMemory(start), ledger.Config{LocalDuplicates: &tc.ld})
			if (err == nil) != tc.ok {
				t.Fatalf("ledger.New: %v, want accepted %v", err, tc.ok)
			}
			if s != nil {
				s.Close()
			}
		})
	}
}
