package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Do's steps, one by one, for callers that cannot hand Do a function to
// run: a proxy or a gate claims for a request, forwards it, and records the
// answer in another place of its code. Each step keeps Do's contract for
// its part: one owner for every attempt, an answer that stays unknown
// reported as unknown, a report sent until the ledger answers definitely.

// UnsettledError is the error of a claim that got no definite answer
// before the max wait (WithMaxWait) passed or its context ended: the
// cluster could not answer. MaybeGranted says an attempt may have been
// applied, so the key may now be granted to the claim's owner; the error
// then also matches ErrOutcomeUnknown.
type UnsettledError struct {
	Key          string
	Last         error // the last attempt's error
	MaybeGranted bool
	Stopped      error // what ended the waiting (the context's error), if that did
}

func (e *UnsettledError) Error() string {
	var s string
	switch {
	case e.MaybeGranted && !errors.Is(e.Last, ErrOutcomeUnknown):
		s = fmt.Sprintf("client: claim %q: %v: an earlier attempt may have been granted: %v", e.Key, ErrOutcomeUnknown, e.Last)
	default:
		s = fmt.Sprintf("client: claim %q: no definite answer: %v", e.Key, e.Last)
	}
	if e.Stopped != nil && !errors.Is(e.Last, e.Stopped) {
		s += fmt.Sprintf(" (stopped: %v)", e.Stopped)
	}
	return s
}

// Unwrap lets errors.Is and errors.As see the last error, the context's,
// and ErrOutcomeUnknown when an attempt may have been granted.
func (e *UnsettledError) Unwrap() []error {
	errs := []error{e.Last}
	if e.MaybeGranted {
		errs = append(errs, ErrOutcomeUnknown)
	}
	if e.Stopped != nil {
		errs = append(errs, e.Stopped)
	}
	return errs
}

// Settle claims req until the ledger answers definitely: granted,
// duplicate and pending_approval come back as the answer; in_flight,
// in_doubt, divergent, rejected and the other refusals as errors matching
// ErrInFlight, ErrInDoubt, ... (with the *Problem). Every attempt is the
// same claim with the same owner, so an attempt whose answer was lost is
// handed back to its owner. A claim that stays without a definite answer
// for the max wait (WithMaxWait), or until ctx ends, returns an
// *UnsettledError; when it may have been granted, call Abandon with the
// same req in the background so the grant is not left to turn in_doubt.
//
// Unlike Do, Settle does not wait while another owner holds the key: that
// answer (ErrInFlight) comes back at once; SettleAfterHolder waits.
//
// req.Owner must be the caller's alone (NewOwner, made for this one
// logical call): if a lost answer granted it and its lease then passed
// (the key in_doubt under this owner), Settle reports that grant failed,
// as nothing can have run under it, and claims again.
func (c *Client) Settle(ctx context.Context, req ClaimRequest) (*ClaimResponse, error) {
	return c.settle(ctx, req, true, false)
}

// SettleAfterHolder waits while another owner holds req.Key: it long-polls
// the intent (for at most poll per request) and settles req again after
// every change, until the answer is something else, then returns it. When
// ctx ends first it returns the last in_flight error. inFlight is the
// ErrInFlight error that Settle returned; each, if set, is called before
// every poll with the poll's number (from 0) and the holder's record as
// last seen (nil if unknown), for example to tell a caller it still waits.
// A claim SettleAfterHolder sends is seen through even when ctx ends
// meanwhile (for up to the max wait), so a grant is never left unanswered.
func (c *Client) SettleAfterHolder(ctx context.Context, req ClaimRequest, inFlight error, poll time.Duration, each func(n int, holder *Intent)) (*ClaimResponse, error) {
	err := inFlight
	for n, attempt := 0, 0; errors.Is(err, ErrInFlight); n++ {
		var p *Problem
		var holder *Intent
		var after uint64
		if errors.As(err, &p) && p.Intent != nil {
			holder, after = p.Intent, p.Intent.Version
		}
		wait := poll
		if d, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(d))
		}
		if wait <= 0 || ctx.Err() != nil {
			return nil, err
		}
		if each != nil {
			each(n, holder)
		}
		if _, werr := c.Wait(ctx, req.Key, after, wait); werr != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			if serr := c.sleep(ctx, c.backoff(attempt, retryAfterOf(werr))); serr != nil {
				return nil, err
			}
			attempt++
		}
		var resp *ClaimResponse
		if resp, err = c.Settle(context.WithoutCancel(ctx), req); err == nil {
			return resp, nil
		}
	}
	return nil, err
}

// Abandon settles a claim its caller gave up on while the outcome was
// unknown (an *UnsettledError that MaybeGranted), with the same req: if it
// was granted after all, nothing ran under it, so the grant is reported
// failed and the next claim of the key is granted. Without this the grant
// would sit until its lease passed and then turn in_doubt. It returns nil
// when the claim was not granted to req.Owner.
func (c *Client) Abandon(ctx context.Context, req ClaimRequest) error {
	resp, err := c.Settle(ctx, req)
	if err != nil || resp.Status != StatusGranted {
		var u *UnsettledError
		if errors.As(err, &u) {
			return err
		}
		return nil
	}
	return c.releaseUnused(ctx, req, resp.FencingToken)
}

// Report records a grant's outcome: it sends the same complete until the
// ledger answers definitely or ctx ends. A repeat of an attempt that was
// applied is answered ok, so the retries are safe. Give ctx a bound that
// does not end with the caller's request: an effect that happened should
// be recorded rather than left to turn in_doubt.
func (c *Client) Report(ctx context.Context, req CompleteRequest) (*IntentResponse, error) {
	for attempt := 0; ; attempt++ {
		resp, err := c.Complete(ctx, req)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil || !retryable(err) {
			return nil, err
		}
		if werr := c.sleep(ctx, c.backoff(attempt, retryAfterOf(err))); werr != nil {
			return nil, fmt.Errorf("%w (stopped retrying: %w)", err, werr)
		}
	}
}

// KeepAlive renews a grant's lease (req.Lease, which must be positive)
// every lease/3 until stop is closed or ctx ends, and returns then; run it
// in its own goroutine and wait for it after closing stop, so no renewal
// lands after the report. A renewal under way when stop closes is let
// finish; each is abandoned after 2/3 of the lease, when the lease would
// pass anyway. A refusal (fenced, in_doubt: the lease already passed and
// the right to execute is gone) is passed to lost and ends the renewals;
// a renewal the cluster could not answer is tried again at the next tick.
func (c *Client) KeepAlive(ctx context.Context, req RenewRequest, stop <-chan struct{}, lost func(error)) {
	every := max(req.Lease/3, time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		select {
		case <-stop: // both were ready: stopping wins
			return
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, req.Lease-every)
		_, err := c.Renew(rctx, req)
		cancel()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, ErrFenced) || errors.Is(err, ErrInDoubt) ||
			errors.Is(err, ErrInvalidState) || errors.Is(err, ErrNotFound)) {
			continue
		}
		lost(fmt.Errorf("client: the grant of %q (fencing token %d) was lost while the effect ran: %w", req.Key, req.FencingToken, err))
		return
	}
}

// unusedGrantResult is the result of a grant reported failed because its
// answer was lost and nothing ran under it.
var unusedGrantResult = json.RawMessage(`{"error":"the claim's answer was lost and its lease passed or its claimer gave up; the effect never ran"}`)

// releaseUnused reports failed for a grant of the caller's owner that
// nothing ran under.
func (c *Client) releaseUnused(ctx context.Context, req ClaimRequest, token uint64) error {
	_, err := c.Report(ctx, CompleteRequest{Key: req.Key, Owner: req.Owner, FencingToken: token, Outcome: OutcomeFailed, Result: unusedGrantResult})
	return err
}
