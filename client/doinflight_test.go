package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// TestDoLongPollsAnInFlightKeyInsteadOfPolling: callers that find the key
// in flight long-poll it and claim again once the holder's report changes
// it, instead of re-claiming on a backoff timer: each sends its first
// claim, one long-poll and one claim after the change.
func TestDoLongPollsAnInFlightKeyInsteadOfPolling(t *testing.T) {
	mem := clienttest.NewMemory(t)
	ctx := testCtx(t)
	const waiters = 4
	e := chargeEffect("order-inflight-longpoll")
	runs := newCounter()
	started := make(chan struct{})
	release := make(chan struct{})
	fn := func(ctx context.Context, g *client.Grant) (any, error) {
		if runs.inc(g.Key) == 1 {
			close(started)
		}
		<-release
		return map[string]string{"charge_id": "ch_longpoll"}, nil
	}

	holder := newClient(t, []string{mem.URL})
	var holderRes *client.EffectResult
	var holderErr error
	holderDone := make(chan struct{})
	go func() {
		defer close(holderDone)
		holderRes, holderErr = holder.Do(ctx, e, fn)
	}()
	select {
	case <-started:
	case <-holderDone:
		t.Fatalf("holder returned before running: %+v, %v", holderRes, holderErr)
	}

	results := make([]*client.EffectResult, waiters)
	errs := make([]error, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		// One client per waiter, as separate agent processes would have.
		c := newClient(t, []string{mem.URL})
		wg.Go(func() { results[i], errs[i] = c.Do(ctx, e, fn) })
	}
	// Release the holder once every waiter is long-polling the key. The
	// bound is a hang guard, not a performance threshold: a client that
	// never long-polls would make the wait run out, then the claim count
	// below says how it polled instead.
	pollCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := mem.WaitRequests(pollCtx, "get", waiters)
	cancel()
	if err != nil {
		t.Errorf("the waiters sent %d long-polls, want %d: %v", mem.Requests("get"), waiters, err)
	}
	close(release)
	wg.Wait()
	<-holderDone

	if holderErr != nil || holderRes.Status != client.EffectExecuted {
		t.Fatalf("holder: %+v, %v", holderRes, holderErr)
	}
	for i := range waiters {
		if errs[i] != nil {
			t.Fatalf("waiter %d: %v", i, errs[i])
		}
		if results[i].Status != client.EffectDuplicate || results[i].Ran || string(results[i].Result) != `{"charge_id":"ch_longpoll"}` {
			t.Errorf("waiter %d: status %q, ran %v, result %s", i, results[i].Status, results[i].Ran, results[i].Result)
		}
	}
	if n := runs.get(e.Key); n != 1 {
		t.Errorf("fn ran %d times", n)
	}
	// The holder's claim, and at most two per waiter: its first (in_flight)
	// and one after the change.
	if n := mem.Requests("claim"); n > 1+2*waiters {
		t.Errorf("%d claims sent, want at most %d (long-polls: %d)", n, 1+2*waiters, mem.Requests("get"))
	} else {
		t.Logf("%d claims, %d long-polls", n, mem.Requests("get"))
	}
}
