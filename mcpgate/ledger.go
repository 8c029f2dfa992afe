package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/intentledger/intentd/client"
)

// Ledger is what the gate asks of the ledger; *client.Client is one. The
// SDK finds the leader, retries what the cluster could not answer with the
// same owner, and waits out 429s.
//
// The claim, report and renewal loops below are the proxy's (proxy/ledger.go)
// adapted to the gate: the proxy keeps them unexported, and the gate does
// not import the proxy.
type Ledger interface {
	Get(ctx context.Context, key string, opts client.GetOptions) (*client.Intent, error)
	Claim(ctx context.Context, req client.ClaimRequest) (*client.ClaimResponse, error)
	Complete(ctx context.Context, req client.CompleteRequest) (*client.IntentResponse, error)
	Renew(ctx context.Context, req client.RenewRequest) (*client.IntentResponse, error)
	Commit(ctx context.Context, req client.CommitRequest) (*client.IntentResponse, error)
	Wait(ctx context.Context, key string, afterVersion uint64, wait time.Duration) (*client.Intent, error)
}

var _ Ledger = (*client.Client)(nil)

// errClaimUnsettled wraps the error of a claim that never got a definite
// answer; unknown says whether one of its attempts may have been granted.
type errClaimUnsettled struct {
	last    error
	unknown bool
}

func (e *errClaimUnsettled) Error() string {
	if e.unknown {
		return fmt.Sprintf("claim: outcome unknown: %v", e.last)
	}
	return fmt.Sprintf("claim: ledger unavailable: %v", e.last)
}

func (e *errClaimUnsettled) Unwrap() error { return e.last }

// unsettledOf returns the unsettled claim error in err, if any.
func unsettledOf(err error) (*errClaimUnsettled, bool) {
	var u *errClaimUnsettled
	ok := errors.As(err, &u)
	return u, ok
}

// transient reports whether err says the ledger could not answer (the same
// call may be sent again) rather than a definite answer.
func transient(err error) bool {
	var p *client.Problem
	if errors.As(err, &p) && p.Status >= 500 {
		return true
	}
	return errors.Is(err, client.ErrOutcomeUnknown) || errors.Is(err, client.ErrUnavailable) ||
		errors.Is(err, client.ErrNoLeader) || errors.Is(err, client.ErrRateLimited)
}

// maybeApplied reports whether a failed write may have been applied.
func maybeApplied(err error) bool {
	var p *client.Problem
	if errors.As(err, &p) {
		return p.Code == "outcome_unknown" || p.Status == 500 || p.Status == 502 || p.Status == 504
	}
	return errors.Is(err, client.ErrOutcomeUnknown)
}

// backoff is the pause before attempt+1: 50 ms doubling to 1 s, jittered
// to [d/2, d], lengthened to the server's Retry-After up to 2 s.
func backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := 50 * time.Millisecond
	for i := 0; i < attempt && d < time.Second; i++ {
		d *= 2
	}
	d = min(d, time.Second)
	d = d/2 + time.Duration(rand.Float64()*float64(d/2))
	if retryAfter > d {
		d = min(retryAfter, 2*time.Second)
	}
	return d
}

func retryAfterOf(err error) time.Duration {
	var p *client.Problem
	if errors.As(err, &p) {
		return p.RetryAfter
	}
	return 0
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// settle claims req (one owner for every attempt) until the ledger answers
// definitely or ctx ends: granted, duplicate and pending_approval come back
// as answers, in_flight, in_doubt, divergent and the other refusals as the
// SDK's errors, and a claim that stayed without a definite answer as
// *errClaimUnsettled. A lost answer that granted this owner, whose lease
// then passed before an answer came back (in_doubt under this owner), is
// reported failed (nothing ran under it) and claimed again, as client.Do
// does.
func settle(ctx context.Context, l Ledger, req client.ClaimRequest) (*client.ClaimResponse, error) {
	unknown, released := false, false
	for attempt := 0; ; attempt++ {
		resp, err := l.Claim(ctx, req)
		if err == nil {
			return resp, nil
		}
		var p *client.Problem
		switch {
		case errors.Is(err, client.ErrInDoubt) && !released && errors.As(err, &p) && p.Intent != nil && p.Intent.Owner == req.Owner:
			if rerr := report(ctx, l, client.CompleteRequest{Key: req.Key, Owner: req.Owner, FencingToken: p.Intent.FencingToken,
				Outcome: client.OutcomeFailed, Result: unusedResult}); rerr != nil {
				return nil, &errClaimUnsettled{last: rerr, unknown: true}
			}
			released, unknown = true, false
			continue
		case !transient(err):
			return nil, err
		}
		if maybeApplied(err) {
			unknown = true
		}
		if werr := sleep(ctx, backoff(attempt, retryAfterOf(err))); werr != nil {
			return nil, &errClaimUnsettled{last: err, unknown: unknown}
		}
	}
}

// unusedResult is the result of a grant reported failed because nothing
// ran under it.
var unusedResult = json.RawMessage(`{"error":"the gate's claim was granted but its answer was lost; nothing was sent to the upstream"}`)

// report sends a complete until the ledger answers definitely or ctx
// ends; every attempt is the same request, so a repeat of one that was
// applied is answered ok.
func report(ctx context.Context, l Ledger, req client.CompleteRequest) error {
	for attempt := 0; ; attempt++ {
		_, err := l.Complete(ctx, req)
		if err == nil {
			return nil
		}
		if !transient(err) {
			return err
		}
		if werr := sleep(ctx, backoff(attempt, retryAfterOf(err))); werr != nil {
			return fmt.Errorf("%w (stopped retrying: %w)", err, werr)
		}
	}
}

// keepAlive renews a grant's lease every lease/3 until stop is closed. A
// renewal that cannot reach the ledger is tried at the next tick; a
// refused one (fenced, in_doubt: the lease already passed) ends the loop
// and is passed to lost. The upstream call is not cut: it is out already,
// and its holder's late complete is still accepted.
func keepAlive(l Ledger, stop <-chan struct{}, req client.RenewRequest, lost func(error)) {
	every := max(req.Lease/3, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), req.Lease-every)
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		_, err := l.Renew(ctx, req)
		cancel()
		if err != nil && !transient(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			lost(err)
			return
		}
	}
}
