package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"
)

// Effect is one logical side effect for Do to run at most once.
type Effect struct {
	// Key names the logical effect (see Key): the same on every delivery
	// and retry of the same logical call, never random per attempt.
	Key string
	// Tool names the destination ("stripe.charge"). With Payload it forms
	// the fingerprint the ledger compares on every claim of Key.
	Tool string
	// Payload holds the effect's arguments: any value encoding/json
	// marshals, or a json.RawMessage or []byte holding JSON; nil sends
	// none. A later claim of Key with a different Tool or Payload is
	// refused as divergent, so put in it exactly what defines the effect
	// (amount, currency, recipient), not per-attempt data.
	Payload any
	// Owner names this one execution attempt. Leave it empty: Do then makes
	// a fresh owner (NewOwner) for the call and uses it for every claim the
	// call makes. Set it only to resume a Do call that returned before
	// running fn (for example with ErrOutcomeUnknown on its claim), never
	// after fn may have run: the ledger hands a grant back to its owner.
	Owner string
	// Policy names a ledger policy (optional).
	Policy string
	// Lease is how long the grant holds without a report; zero takes the
	// server's default (DefaultLease, unless a policy or the server says
	// otherwise). Do renews it every Lease/3 while fn runs.
	Lease time.Duration
	// ApprovalWait is how long Do waits for an intent that a policy holds
	// for approval: it long-polls the intent and, once approved, claims it
	// again with the same owner and runs fn. Zero does not wait: Do
	// returns ErrPendingApproval at once, so an agent can move on and call
	// again later with the same key.
	ApprovalWait time.Duration
}

// Grant is the right to perform an effect, handed by Do to the function it
// runs.
type Grant struct {
	Key   string
	Owner string
	// FencingToken increases strictly with every grant across the cluster;
	// pass it to systems that can refuse stale writers.
	FencingToken uint64
	// ExecutionToken is the signed proof of the grant for the tool side.
	ExecutionToken string
	// Intent is the record as granted.
	Intent *Intent
}

// EffectStatus says what the ledger recorded for a Do call.
type EffectStatus string

// The statuses of EffectResult.
const (
	// EffectExecuted: this call ran the effect and recorded its result.
	EffectExecuted EffectStatus = "executed"
	// EffectDuplicate: an earlier call ran the effect; this one did not
	// and returns the recorded result.
	EffectDuplicate EffectStatus = "duplicate"
	// EffectFailed: this call ran the function, which returned an error,
	// recorded as failed (a later call may run the effect again).
	EffectFailed EffectStatus = "failed"
)

// EffectResult is what Do returns about an effect.
type EffectResult struct {
	// Status is what the ledger recorded for this call. It is empty when
	// fn ran but Do could not record its outcome; Do's error says why.
	Status EffectStatus
	// Result is the recorded result as JSON: fn's result (executed), the
	// earlier call's (duplicate) or {"error": "..."} (failed). It may be
	// empty when the result was nil or could not be recorded.
	Result json.RawMessage
	// Value is fn's result as fn returned it, when Ran.
	Value any
	// Ran reports whether fn ran in this call.
	Ran bool
	// Intent is the record as the ledger last answered about it.
	Intent *Intent
	// Owner is the owner this call claimed with.
	Owner string
	// FencingToken is this call's grant's token (0 unless granted).
	FencingToken uint64
}

// Decode unmarshals the recorded result into v, the same way for a result
// this call produced and for a duplicate's.
func (r *EffectResult) Decode(v any) error {
	if len(r.Result) == 0 {
		return fmt.Errorf("client: decode result: %w: no result recorded", ErrNotFound)
	}
	if err := json.Unmarshal(r.Result, v); err != nil {
		return fmt.Errorf("client: decode result: %w", err)
	}
	return nil
}

// maxErrorResultBytes bounds the error message Do records for a failed
// effect.
const maxErrorResultBytes = 1024

// Do runs fn at most once for the logical effect named by e.Key, across
// retries, duplicate deliveries, concurrent callers and processes, and
// records its outcome in the ledger. It is the at-most-once contract of the
// SDK:
//
//   - Do claims e.Key with one owner for this call (e.Owner, or a fresh
//     NewOwner), and re-sends the same claim with that same owner whenever
//     the answer is lost or the cluster cannot answer; it never makes a
//     new owner per attempt.
//   - granted: Do runs fn exactly once, with a Grant (owner, fencing token,
//     execution token). While fn runs Do holds the grant (Hold): it renews
//     the lease every lease/3 in the background and stops when fn returns. If a renewal is refused
//     (fenced or in_doubt: the lease passed and the right to execute is
//     gone) Do cancels fn's context; context.Cause(ctx) then matches
//     ErrFenced or ErrInDoubt. fn should stop before performing the effect
//     when its context is done. A renewal that cannot reach the cluster is
//     tried again at the next tick; fn keeps running.
//   - fn returns (v, nil): Do records executed with v (JSON-marshalled) as
//     the result, commits it (best-effort, see WithAutoCommit) and returns
//     Status EffectExecuted with Value v. Return nil only if the effect
//     happened.
//   - fn returns an error: Do records failed with {"error": err.Error()}
//     and returns Status EffectFailed and an error wrapping fn's. Return an
//     error only if the effect certainly did not happen: a failed intent
//     is granted again to the next claim (a new generation).
//   - fn returns an error wrapping ErrEffectUnknown (it cannot tell whether
//     the effect happened): Do records nothing. The key stays held until
//     its lease passes, then it is in_doubt and is never granted again
//     until someone checks the tool's side and resolves it.
//   - fn panics: Do stops renewing and lets the panic through, recording
//     nothing (as ErrEffectUnknown).
//   - The outcome is recorded with the same owner, fencing token and result
//     until the ledger answers definitely, for up to the report timeout
//     (WithReportTimeout), even after ctx ended: an effect that happened is
//     reported rather than left to turn in_doubt. If it cannot be recorded
//     Do returns Ran true, an empty Status and the error (ErrFenced when
//     the grant moved on; ErrOutcomeUnknown ...).
//   - duplicate (the effect already ran under this key, by any caller): fn
//     does not run; Do returns Status EffectDuplicate and the recorded
//     Result, and no error. Decode reads the result the same way in both
//     cases.
//   - in_flight (another owner holds the key now): fn does not run; Do
//     long-polls the key (Wait, after the version the answer carried) until
//     its state changes or the holder's Retry-After passes, and claims
//     again with the same owner, for up to the max wait (WithMaxWait,
//     default 30 s) and within ctx. (When the answer carries no version, or
//     the long-poll fails, it waits with exponential backoff instead,
//     WithBackoff, never longer than the Retry-After.) It then gets
//     the holder's result (duplicate), a grant of a new generation if the
//     holder's attempt failed, or in_doubt. Still in flight at the end:
//     an error wrapping ErrInFlight.
//   - pending approval: with e.ApprovalWait, Do long-polls the intent
//     until it is decided or the wait passes; approved, it claims again
//     with the same owner and goes on as above.
//   - divergent, in_doubt, rejected, pending approval (no wait, or the
//     wait passed): fn does not run; the error wraps ErrDivergent,
//     ErrInDoubt, ErrRejected or ErrPendingApproval and the *Problem
//     (errors.As) with the intent.
//   - namespace_full (507: the namespace holds its quota of intents): fn
//     does not run and the claim is not sent again; the error wraps
//     ErrNamespaceFull. namespace_rate_limited (429) is waited out like
//     rate_limited. ledger_full (507: the cluster is past a capacity) is
//     the same: fn does not run, the claim is not sent again, and the
//     error wraps ErrLedgerFull.
//   - The claim's outcome stays unknown (the cluster could not answer
//     before the max wait or ctx ended): fn does not run; the error wraps
//     ErrOutcomeUnknown. The claim may have been granted to this call's
//     owner; if nobody resumes it, its lease passes and the key turns
//     in_doubt. To be able to resume, set e.Owner (from NewOwner) yourself
//     and call Do again with the same Effect: the ledger hands the grant
//     back to its owner. If a later claim of this call finds its own
//     earlier grant passed unused (in_doubt under the owner Do made for
//     this call), Do reports it failed (the effect never ran under it) and
//     claims again.
//
// Bad input (an invalid key, no tool, a payload that is not JSON) is
// refused before anything is sent, with an error wrapping ErrBadRequest.
// The returned *EffectResult is nil only when fn did not run and no result
// exists; whenever fn ran it is non-nil with Ran true.
func (c *Client) Do(ctx context.Context, e Effect, fn func(ctx context.Context, g *Grant) (result any, err error)) (*EffectResult, error) {
	if fn == nil {
		return nil, fmt.Errorf("client: do: %w: no function to run", ErrBadRequest)
	}
	if err := ValidateKey(e.Key); err != nil {
		return nil, err
	}
	if e.Tool == "" {
		return nil, fmt.Errorf("client: do %q: %w: tool is required", e.Key, ErrBadRequest)
	}
	payload, err := encodeJSON(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("client: do %q: %w: payload: %w", e.Key, ErrBadRequest, err)
	}
	owner, fresh := e.Owner, e.Owner == ""
	if fresh {
		owner = NewOwner()
	}
	req := ClaimRequest{Key: e.Key, Tool: e.Tool, Payload: payload, Owner: owner, Policy: e.Policy, Lease: e.Lease}
	resp, err := c.settle(ctx, req, fresh, true)
	if err != nil {
		return nil, err
	}
	if resp.Status == StatusPendingApproval && e.ApprovalWait > 0 {
		if resp, err = c.awaitApproval(ctx, req, resp, fresh, e.ApprovalWait); err != nil {
			return nil, err
		}
	}
	switch resp.Status {
	case StatusGranted:
		return c.execute(ctx, e, req, resp, fn)
	case StatusDuplicate:
		out := &EffectResult{Status: EffectDuplicate, Intent: resp.Intent, Owner: owner}
		if resp.Intent != nil {
			out.Result = resp.Intent.Result
		}
		return out, nil
	case StatusPendingApproval:
		return nil, fmt.Errorf("client: claim %q: %w", e.Key, &Problem{
			Status: http.StatusAccepted, Code: string(StatusPendingApproval), Title: "Pending approval",
			Detail: "the intent waits for an approver; nothing may run before it is approved", Intent: resp.Intent,
		})
	}
	return nil, fmt.Errorf("client: claim %q: unexpected status %q", e.Key, resp.Status)
}

// encodeJSON turns a payload or result into JSON: raw JSON passes as it is
// (once checked), nil stays nil, anything else is marshalled.
func encodeJSON(v any) (json.RawMessage, error) {
	var raw []byte
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	if len(raw) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, errors.New("not valid JSON")
	}
	return json.RawMessage(raw), nil
}

// settle claims until the answer is definite: it re-sends the same claim
// (same owner) while its outcome is unknown or the cluster cannot answer,
// and, with waitInFlight, waits (awaitHolder) while another owner holds
// the key, for up to the max wait and within ctx. fresh says the owner was
// made for this call, so any grant to it is this call's.
func (c *Client) settle(ctx context.Context, req ClaimRequest, fresh, waitInFlight bool) (*ClaimResponse, error) {
	deadline := time.Now().Add(c.maxWait)
	unknown := false  // an attempt of this call may have been granted
	released := false // this call already reported its own unused grant
	for attempt := 0; ; attempt++ {
		resp, err := c.Claim(ctx, req)
		if err == nil {
			return resp, nil
		}
		var p *Problem
		var wait time.Duration
		switch {
		case errors.Is(err, ErrInFlight) && waitInFlight:
			// Definite: another owner holds the key, so no attempt of this
			// call was granted.
			unknown = false
			if errors.As(err, &p) && p.Intent != nil && p.Intent.Version > 0 {
				// Long-poll the key until its state changes (the holder's
				// report, a new grant ...), then claim again.
				left := time.Until(deadline)
				if left <= 0 {
					return nil, c.claimGaveUp(req.Key, err, unknown, nil)
				}
				if werr := c.awaitHolder(ctx, req.Key, p, attempt, deadline); werr != nil {
					return nil, c.claimGaveUp(req.Key, err, unknown, werr)
				}
				continue
			}
			// No version to wait after: poll with backoff.
			wait = c.backoff(attempt, 0)
			if p != nil && p.RetryAfter > 0 && p.RetryAfter < wait {
				wait = p.RetryAfter
			}
		case errors.Is(err, ErrInDoubt) && fresh && !released && errors.As(err, &p) &&
			p.Intent != nil && p.Intent.Owner == req.Owner:
			// A lost answer granted this call's own owner, whose lease then
			// passed while the call could not reach the cluster. This call
			// has not run the effect, and the owner is this call's alone:
			// say the grant failed unused and claim again.
			if err := c.releaseUnused(ctx, req, p.Intent.FencingToken); err != nil {
				return nil, fmt.Errorf("client: claim %q: its own earlier grant passed unused and reporting that failed: %w", req.Key, err)
			}
			released, unknown = true, false
			continue
		case retryable(err):
			if maybeApplied(err) || errors.Is(err, ErrOutcomeUnknown) {
				unknown = true
			}
			wait = c.backoff(attempt, retryAfterOf(err))
		default:
			return nil, fmt.Errorf("client: claim %q: %w", req.Key, err)
		}
		// A failure the caller's context caused ends the wait here too.
		left := time.Until(deadline)
		if left <= 0 {
			return nil, c.claimGaveUp(req.Key, err, unknown, nil)
		}
		if werr := c.sleep(ctx, min(wait, left)); werr != nil {
			return nil, c.claimGaveUp(req.Key, err, unknown, werr)
		}
	}
}

// approvalPoll bounds one long-poll of awaitApproval, below the HTTP
// client's default 30 s timeout.
const approvalPoll = 20 * time.Second

// inFlightPoll bounds one long-poll of awaitHolder, below the HTTP
// client's default 30 s timeout.
const inFlightPoll = 20 * time.Second

// inFlightSlack is how far past the holder's Retry-After a long-poll of an
// in_flight key runs, so that the claim after it finds the holder's lease
// over when it passed: the end of a lease changes no record and wakes no
// long-poll.
const inFlightSlack = 250 * time.Millisecond

// awaitHolder waits while another owner holds req's key (p, an in_flight
// answer whose intent carries its version): it long-polls the key until
// its state changes after that version (the holder reported, the key was
// granted again, resolved, purged ...) or until the holder's Retry-After
// has passed (it never reaches past the holder's lease), within deadline,
// inFlightPoll and the HTTP client's timeout. A long-poll the cluster
// refuses or cannot answer is replaced by the backoff wait of a poll. It
// returns an error only when ctx ended.
func (c *Client) awaitHolder(ctx context.Context, key string, p *Problem, attempt int, deadline time.Time) error {
	poll := min(time.Until(deadline), inFlightPoll)
	ra := p.RetryAfter
	if ra <= 0 {
		ra = time.Second
	}
	poll = min(poll, ra+inFlightSlack)
	if t := c.hc.Timeout; t > 0 {
		poll = min(poll, t-t/4)
	}
	if poll <= 0 {
		return nil
	}
	_, err := c.Wait(ctx, key, p.Intent.Version, poll)
	switch {
	case err == nil, errors.Is(err, ErrNotFound):
		return nil // changed (or purged): claim again
	case ctx.Err() != nil:
		return ctx.Err()
	}
	// Too many waiters, no read access, no node could answer: poll as
	// before, never longer than the holder's Retry-After.
	wait := c.backoff(attempt, retryAfterOf(err))
	if p.RetryAfter > 0 && p.RetryAfter < wait {
		wait = p.RetryAfter
	}
	return c.sleep(ctx, min(wait, max(time.Until(deadline), 0)))
}

// awaitApproval long-polls a pending intent until a decision changes its
// state or wait passes, then claims it again with the same owner: an
// approved intent is granted to its claimer, a rejected one answers
// rejected. It returns the last claim answer (still pending when the wait
// passed).
func (c *Client) awaitApproval(ctx context.Context, req ClaimRequest, resp *ClaimResponse, fresh bool, wait time.Duration) (*ClaimResponse, error) {
	deadline := time.Now().Add(wait)
	for attempt := 0; resp.Status == StatusPendingApproval; {
		left := time.Until(deadline)
		if left <= 0 {
			return resp, nil
		}
		var after uint64
		if resp.Intent != nil {
			after = resp.Intent.Version
		}
		in, err := c.Wait(ctx, req.Key, after, min(left, approvalPoll))
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("client: claim %q: waiting for approval: %w", req.Key, ctx.Err())
		case err != nil && !retryable(err):
			return nil, fmt.Errorf("client: claim %q: waiting for approval: %w", req.Key, err)
		case err != nil:
			if werr := c.sleep(ctx, min(c.backoff(attempt, retryAfterOf(err)), left)); werr != nil {
				return nil, fmt.Errorf("client: claim %q: waiting for approval: %w", req.Key, werr)
			}
			attempt++
		case in.State == StatePendingApproval:
			resp.Intent = in // an approval of several, or the wait passed
		default:
			if resp, err = c.settle(ctx, req, fresh, true); err != nil {
				return nil, err
			}
		}
	}
	return resp, nil
}

// claimGaveUp is the error of a claim that never got a definite answer
// (or stayed in flight).
func (c *Client) claimGaveUp(key string, last error, unknown bool, stopped error) error {
	if errors.Is(last, ErrInFlight) {
		err := fmt.Errorf("client: claim %q: still in flight after waiting up to %v: %w", key, c.maxWait, last)
		if stopped != nil && !errors.Is(err, stopped) {
			err = fmt.Errorf("%w (stopped: %w)", err, stopped)
		}
		return err
	}
	return &UnsettledError{Key: key, Last: last, MaybeGranted: unknown, Stopped: stopped}
}

// retryable reports whether err says the cluster could not answer (so the
// same request may be sent again), rather than a definite answer.
// namespace_full and ledger_full (507) are definite refusals.
func retryable(err error) bool {
	if errors.Is(err, ErrNamespaceFull) || errors.Is(err, ErrLedgerFull) {
		return false
	}
	var p *Problem
	if errors.As(err, &p) && p.Status >= 500 {
		return true
	}
	return errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoLeader) ||
		errors.Is(err, ErrRateLimited)
}

// retryAfterOf is the server's Retry-After in err, if any.
func retryAfterOf(err error) time.Duration {
	var p *Problem
	if errors.As(err, &p) {
		return p.RetryAfter
	}
	return 0
}

// execute runs fn under the grant, held (Hold) while it runs, and records
// the outcome.
func (c *Client) execute(ctx context.Context, e Effect, req ClaimRequest, resp *ClaimResponse, fn func(context.Context, *Grant) (any, error)) (*EffectResult, error) {
	held := Hold(ctx, c, req, resp, HoldOptions{ReportTimeout: c.reportTimeout})
	g := held.Grant()
	defer held.Stop() // also when fn panics: stop renewing, record nothing
	value, ferr := fn(held.Context(), g)
	held.Stop()

	out := &EffectResult{Ran: true, Value: value, Intent: resp.Intent, Owner: g.Owner, FencingToken: g.FencingToken}
	if ferr != nil && errors.Is(ferr, ErrEffectUnknown) {
		return out, fmt.Errorf("client: effect %q: nothing recorded; the intent turns in_doubt when its lease passes: %w", e.Key, ferr)
	}
	if ferr != nil {
		rec, err := held.Record(ctx, OutcomeFailed, errorResult(ferr), nil)
		if err != nil {
			return out, fmt.Errorf("client: effect %q failed (%w) and recording that failed: %w", e.Key, ferr, err)
		}
		out.Status, out.Intent, out.Result = EffectFailed, rec.Response.Intent, rec.Result
		return out, fmt.Errorf("client: effect %q failed: %w", e.Key, ferr)
	}

	result, encErr := encodeJSON(value)
	rec, err := held.Record(ctx, OutcomeExecuted, result, nil)
	if err != nil {
		return out, fmt.Errorf("client: effect %q ran but recording it failed: %w", e.Key, err)
	}
	if encErr == nil {
		// The ledger would not store this result (too large): the effect
		// is recorded without it rather than left to turn in_doubt.
		encErr = rec.Refused
	}
	out.Status, out.Intent, out.Result = EffectExecuted, rec.Response.Intent, rec.Result
	if c.autoCommit {
		if cr, err := held.Commit(ctx); err == nil && cr.Intent != nil {
			out.Intent = cr.Intent
		}
	}
	if encErr != nil {
		return out, fmt.Errorf("client: effect %q executed and recorded without its result: %w", e.Key, encErr)
	}
	return out, nil
}

// errorResult is the result recorded for a failed effect.
func errorResult(err error) json.RawMessage {
	msg := err.Error()
	if len(msg) > maxErrorResultBytes {
		cut := maxErrorResultBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	b, _ := json.Marshal(map[string]string{"error": msg})
	return b
}
