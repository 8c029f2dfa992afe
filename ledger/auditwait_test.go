package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

type auditAnswer struct {
	page *ledger.AuditPage
	err  error
}

// startAuditWait runs WaitAudit in the background.
func startAuditWait(ctx context.Context, s *ledger.Service, ns string, since uint64, wait time.Duration) <-chan auditAnswer {
	ch := make(chan auditAnswer, 1)
	go func() {
		p, err := s.WaitAudit(ctx, ns, since, 0, wait, ledger.Stale)
		ch <- auditAnswer{p, err}
	}()
	return ch
}

func receiveAudit(t *testing.T, ch <-chan auditAnswer) auditAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second): // a hang guard, not a threshold
		t.Fatal("the audit long-poll did not answer")
		return auditAnswer{}
	}
}

// TestWaitAuditWakesForAnyKeyOfItsNamespace: a namespace-wide long-poll
// answers at once when the event it asks for is there, and otherwise
// wakes for a change to any key of its namespace, not of another one.
func TestWaitAuditWakesForAnyKeyOfItsNamespace(t *testing.T) {
	f := newFeed()
	s := ledgertest.NewService(t, f, ledger.Config{})
	grant(t, s, "a")

	p, err := s.WaitAudit(context.Background(), "", 1, 0, time.Minute, ledger.Stale)
	if err != nil || len(p.Events) != 1 || p.Head.LastSeq != 1 || s.Waiting() != 0 {
		t.Fatalf("a poll for an event already there: %+v, %v (%d waiting)", p, err, s.Waiting())
	}

	reads := f.Count()
	done := startAuditWait(context.Background(), s, "", 2, 30*time.Second)
	f.Await(t, reads+1)
	if s.Waiting() != 1 {
		t.Fatalf("Waiting() = %d, want 1", s.Waiting())
	}
	other := claimReq("a", owner, `{"k":"a"}`)
	other.Namespace = "other"
	mustClaim(t, s, other, "granted")
	grant(t, s, "b")
	a := receiveAudit(t, done)
	if a.err != nil || a.page.Head.LastSeq != 2 || len(a.page.Events) != 1 || a.page.Events[0].Seq != 2 {
		t.Fatalf("woke with %+v, %v", a.page, a.err)
	}
	// One read on arrival, one when "b" changed: the claim in the other
	// namespace did not wake it.
	if got := f.Count() - reads; got != 2 {
		t.Fatalf("the long-poll read %d times, want 2", got)
	}

	// Nothing happens: it answers at the end of its wait with the head.
	a = receiveAudit(t, startAuditWait(context.Background(), s, "", 3, time.Millisecond))
	if a.err != nil || a.page.Head.LastSeq != 2 || len(a.page.Events) != 0 {
		t.Fatalf("a poll that timed out: %+v, %v", a.page, a.err)
	}
	if s.Waiting() != 0 {
		t.Fatalf("%d waiters left", s.Waiting())
	}
}

// TestWaitAuditCapsAndClose: namespace-wide polls count against the
// per-key cap under their namespace, apart from polls of one key, and
// Close answers them at once.
func TestWaitAuditCapsAndClose(t *testing.T) {
	f := newFeed()
	s := ledgertest.NewService(t, f, ledger.Config{Limits: ledger.Limits{MaxWaiters: 10, MaxWaitersPerKey: 1}})
	g := grant(t, s, "a")
	ctx := context.Background()

	reads := f.Count()
	first := startAuditWait(ctx, s, "", 2, time.Minute)
	f.Await(t, reads+1)
	if _, err := s.WaitAudit(ctx, "", 2, 0, time.Minute, ledger.Stale); !errors.Is(err, ledger.ErrTooManyWaiters) {
		t.Fatalf("a second namespace-wide poll past the cap of 1: %v, want ErrTooManyWaiters", err)
	}
	reads = f.Count()
	key := startWait(ctx, s, "a", g.Intent.Version, time.Minute)
	f.Await(t, reads+1)
	if s.Waiting() != 2 {
		t.Fatalf("Waiting() = %d, want 2 (the key's poll is not the namespace's)", s.Waiting())
	}
	if _, err := s.WaitAudit(ctx, "", 0, 0, 61*time.Second, ledger.Stale); !errors.Is(err, ledger.ErrUnprocessable) {
		t.Fatalf("a wait over MaxWait: %v, want ErrUnprocessable", err)
	}

	s.Close()
	if a := receiveAudit(t, first); a.err != nil || a.page.Head.LastSeq != 1 {
		t.Fatalf("closed audit poll: %+v, %v", a.page, a.err)
	}
	receive(t, key)
	if s.Waiting() != 0 {
		t.Fatalf("Waiting() = %d after Close", s.Waiting())
	}
}
