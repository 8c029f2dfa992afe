package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// problemMiddleware answers every request with a 503 problem of code.
func problemMiddleware(code string) func(http.Handler) http.Handler {
	return func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, `{"title":"t","status":503,"code":%q}`, code)
		})
	}
}

func TestSettleAnswersInFlightAtOnce(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL}) // the default 30 s max wait
	ctx := testCtx(t)
	if _, err := c.Claim(ctx, claimReq("refund:s1", "holder")); err != nil {
		t.Fatal(err)
	}
	before := mem.Requests("claim")
	_, err := c.Settle(ctx, claimReq("refund:s1", client.NewOwner()))
	var p *client.Problem
	if !errors.Is(err, client.ErrInFlight) || !errors.As(err, &p) || p.Intent == nil || p.Intent.Owner != "holder" {
		t.Fatalf("err = %v", err)
	}
	if n := mem.Requests("claim") - before; n != 1 {
		t.Errorf("%d claims sent, want 1: Settle must not wait for the holder", n)
	}
}

func TestSettleWithoutAnAnswerIsUnsettled(t *testing.T) {
	for _, tc := range []struct {
		code         string
		maybeGranted bool
	}{
		{"outcome_unknown", true}, // the claim may have been applied
		{"no_leader", false},      // it certainly was not
	} {
		t.Run(tc.code, func(t *testing.T) {
			mem := clienttest.NewMemory(t, clienttest.WithMiddleware(problemMiddleware(tc.code)))
			c := newClient(t, []string{mem.URL}, client.WithMaxWait(20*time.Millisecond), client.WithDiscovery(false))
			_, err := c.Settle(testCtx(t), claimReq("refund:s2", client.NewOwner()))
			var u *client.UnsettledError
			if !errors.As(err, &u) || u.MaybeGranted != tc.maybeGranted || u.Key != "refund:s2" {
				t.Fatalf("err = %#v", err)
			}
			if errors.Is(err, client.ErrOutcomeUnknown) != tc.maybeGranted {
				t.Errorf("errors.Is(err, ErrOutcomeUnknown) = %v: %v", !tc.maybeGranted, err)
			}
			if mem.Requests("claim") < 2 {
				t.Errorf("%d claims: Settle re-sends while there is no answer", mem.Requests("claim"))
			}
		})
	}
}

func TestSettleAfterHolderGetsTheHoldersResult(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	g, err := c.Claim(ctx, claimReq("refund:s3", "holder"))
	if err != nil {
		t.Fatal(err)
	}
	req := claimReq("refund:s3", client.NewOwner())
	_, inFlight := c.Settle(ctx, req)
	if !errors.Is(inFlight, client.ErrInFlight) {
		t.Fatal(inFlight)
	}
	var mu sync.Mutex
	var holders []string
	done := make(chan struct{})
	var resp *client.ClaimResponse
	var werr error
	go func() {
		defer close(done)
		resp, werr = c.SettleAfterHolder(ctx, req, inFlight, 10*time.Second, func(n int, h *client.Intent) {
			mu.Lock()
			defer mu.Unlock()
			if h != nil {
				holders = append(holders, fmt.Sprintf("%d:%s", n, h.Owner))
			}
		})
	}()
	if err := mem.WaitRequests(ctx, "get", 1); err != nil { // it long-polls
		t.Fatal(err)
	}
	if _, err := c.Complete(ctx, client.CompleteRequest{Key: req.Key, Owner: "holder", FencingToken: g.FencingToken,
		Outcome: client.OutcomeExecuted, Result: json.RawMessage(`{"refund":"re_1"}`)}); err != nil {
		t.Fatal(err)
	}
	<-done
	if werr != nil || resp.Status != client.StatusDuplicate || string(resp.Intent.Result) != `{"refund":"re_1"}` {
		t.Fatalf("resp %+v, err %v", resp, werr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(holders) == 0 || holders[0] != "0:holder" {
		t.Errorf("each saw %v", holders)
	}
}

func TestSettleAfterHolderStopsWithItsContext(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	if _, err := c.Claim(testCtx(t), claimReq("refund:s4", "holder")); err != nil {
		t.Fatal(err)
	}
	req := claimReq("refund:s4", client.NewOwner())
	_, inFlight := c.Settle(testCtx(t), req)
	ctx, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	defer cancel()
	resp, err := c.SettleAfterHolder(ctx, req, inFlight, time.Second, nil)
	if !errors.Is(err, client.ErrInFlight) || resp != nil {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
}

func TestAbandonReleasesAGrantNothingRanUnder(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	// A claim whose answer the caller never saw: granted to its owner.
	req := claimReq("refund:s5", client.NewOwner())
	if _, err := c.Claim(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Abandon(ctx, req); err != nil {
		t.Fatal(err)
	}
	in, err := c.Get(ctx, req.Key, client.GetOptions{})
	if err != nil || in.State != client.StateFailed {
		t.Fatalf("intent %+v, %v", in, err)
	}
	// The next claim runs: a new generation.
	next, err := c.Settle(ctx, claimReq("refund:s5", client.NewOwner()))
	if err != nil || next.Status != client.StatusGranted || next.Intent.Generation != 2 {
		t.Fatalf("next %+v, %v", next, err)
	}
	// Abandoning a claim another owner holds changes nothing.
	if err := c.Abandon(ctx, claimReq("refund:s5", client.NewOwner())); err != nil {
		t.Fatal(err)
	}
	if in, _ := c.Get(ctx, req.Key, client.GetOptions{}); in.State != client.StateDeclared || in.Owner != next.Owner {
		t.Errorf("after abandoning another's claim: %+v", in)
	}
}

func TestReportRetriesALostAnswer(t *testing.T) {
	mem := clienttest.NewMemory(t, clienttest.WithMiddleware(dropFirst("complete", nil)))
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	req := claimReq("refund:s6", client.NewOwner())
	g, err := c.Settle(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.Report(ctx, client.CompleteRequest{Key: req.Key, Owner: req.Owner, FencingToken: g.FencingToken,
		Outcome: client.OutcomeExecuted, Result: json.RawMessage(`{"ok":true}`)})
	if err != nil || done.Intent.State != client.StateExecuted || mem.Requests("complete") != 2 {
		t.Fatalf("report %+v, %v after %d completes", done, err, mem.Requests("complete"))
	}
}

func TestKeepAliveRenewsUntilStoppedAndReportsALostGrant(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	req := claimReq("refund:s7", client.NewOwner())
	req.Lease = 300 * time.Millisecond
	g, err := c.Settle(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	renew := client.RenewRequest{Key: req.Key, Owner: req.Owner, FencingToken: g.FencingToken, Lease: req.Lease}
	lost := make(chan error, 1)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		c.KeepAlive(ctx, renew, stop, func(err error) { lost <- err })
	}()
	if err := mem.WaitRequests(ctx, "renew", 2); err != nil {
		t.Fatal(err)
	}
	mem.Ledger.Advance(time.Hour) // the lease passes: the next renewal is refused
	select {
	case err := <-lost:
		if !errors.Is(err, client.ErrInDoubt) {
			t.Errorf("lost: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the refused renewal was never reported")
	}
	<-stopped // it ends by itself after a loss
	close(stop)

	// Stopped, it sends no more renewals.
	req2 := claimReq("refund:s8", client.NewOwner())
	req2.Lease = 300 * time.Millisecond
	g2, err := c.Settle(ctx, req2)
	if err != nil {
		t.Fatal(err)
	}
	stop2, stopped2 := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped2)
		c.KeepAlive(ctx, client.RenewRequest{Key: req2.Key, Owner: req2.Owner, FencingToken: g2.FencingToken, Lease: req2.Lease}, stop2,
			func(err error) { t.Errorf("lost: %v", err) })
	}()
	if err := mem.WaitRequests(ctx, "renew", mem.Requests("renew")+1); err != nil {
		t.Fatal(err)
	}
	close(stop2)
	<-stopped2
	after := mem.Requests("renew")
	in, err := c.Get(ctx, req2.Key, client.GetOptions{})
	if err != nil || in.State != client.StateDeclared {
		t.Fatalf("intent %+v, %v", in, err)
	}
	if mem.Requests("renew") != after {
		t.Errorf("renewals after KeepAlive returned")
	}
}
