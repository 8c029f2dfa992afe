package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

func TestWait(t *testing.T) {
	n, c, g := grantedNode(t)
	ctx := context.Background()
	version := g.Intent.Version

	// Nothing changes: the wait ends with the intent as it is.
	in, err := c.Wait(ctx, "refund:ord_1", version, 50*time.Millisecond)
	if err != nil || in.Version != version || in.State != client.StateDeclared {
		t.Fatalf("wait without a change = %+v, %v", in, err)
	}

	// A change wakes the wait up.
	type answer struct {
		in  *client.Intent
		err error
	}
	done := make(chan answer, 1)
	go func() {
		in, err := c.Wait(ctx, "refund:ord_1", version, 20*time.Second)
		done <- answer{in, err}
	}()
	ledgertest.AwaitWaiting(t, n.svc, 1) // the change must wake a waiting long-poll
	if _, err := c.Complete(ctx, client.CompleteRequest{Key: "refund:ord_1", Owner: "agent-1", FencingToken: g.FencingToken,
		Outcome: client.OutcomeExecuted}); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.err != nil || a.in.Version <= version || a.in.State != client.StateExecuted {
			t.Fatalf("wait = %+v, %v; want the executed intent", a.in, a.err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("wait did not answer after the change")
	}

	if _, err := c.Wait(ctx, "missing", 0, 0); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("wait on a missing key: %v, want ErrNotFound", err)
	}
	before := n.hits.Load()
	for _, bad := range []time.Duration{-time.Second, client.MaxLongPoll + time.Second} {
		if _, err := c.Wait(ctx, "refund:ord_1", 0, bad); !errors.Is(err, client.ErrBadRequest) {
			t.Errorf("wait %v: %v, want ErrBadRequest", bad, err)
		}
	}
	if n.hits.Load() != before {
		t.Error("an out-of-range wait was sent")
	}
}
