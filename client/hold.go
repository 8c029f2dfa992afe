package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// The product's core guarantee, written once: hold a grant while its
// effect runs (renew the lease, cancel on loss), record the outcome with
// its fallbacks, and commit or release in the background. Do, the
// Idempotency-Key proxy and the MCP gate all run it.

// DefaultLease is the lease a grant is renewed with when neither the claim
// nor the grant names one: the ledger's own default (intentd
// --default-lease), which a claim without a lease gets.
const DefaultLease = 30 * time.Second

// DefaultCommitTimeout bounds a best-effort commit run in the background
// (Held.CommitLater).
const DefaultCommitTimeout = 5 * time.Second

// Steps is what Hold and Background ask of the ledger: the steps of Do
// that run under a grant and after it (steps.go). *Client is one; a front
// end passes the ledger it was configured with.
type Steps interface {
	KeepAlive(ctx context.Context, req RenewRequest, stop <-chan struct{}, lost func(error))
	Report(ctx context.Context, req CompleteRequest) (*IntentResponse, error)
	Commit(ctx context.Context, req CommitRequest) (*IntentResponse, error)
	Abandon(ctx context.Context, req ClaimRequest) error
}

var _ Steps = (*Client)(nil)

// HoldOptions tune Hold.
type HoldOptions struct {
	// ReportTimeout bounds Record and Commit together, from the first of
	// them (default DefaultReportTimeout).
	ReportTimeout time.Duration
	// OnLost, if set, is called once when a renewal is refused (the lease
	// passed: the key is in doubt, or was granted again), before Context
	// is cancelled. A front end that lets the effect run on logs it here.
	OnLost func(error)
}

// Held is a grant being held while its effect runs: its lease is renewed
// every lease/3 until Stop. Record reports the outcome; Commit and
// CommitLater acknowledge it. Stop and Context may be called from any
// goroutine; Record and Commit from one.
type Held struct {
	l       Steps
	g       *Grant
	lease   time.Duration
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	// reportBy is when Record and Commit give up: set by the first.
	reportBy time.Time
}

// Hold starts renewing the lease of the grant resp, a granted answer to
// claim req, in the background under ctx, and returns the held grant. The
// lease renewed is the one the ledger recorded on the grant
// (Intent.LeaseMS), else the claim's (req.Lease), else DefaultLease. Call
// Stop when the effect ended (defer it too, so a panic stops the renewals
// and records nothing). A renewal refused
// (fenced, in_doubt: the right to execute is gone) calls opts.OnLost and
// cancels Context with the refusal as its cause (context.Cause matches
// ErrFenced or ErrInDoubt); a renewal the cluster could not answer is
// tried again at the next tick.
func Hold(ctx context.Context, l Steps, req ClaimRequest, resp *ClaimResponse, opts HoldOptions) *Held {
	g := &Grant{Key: req.Key, Owner: req.Owner, FencingToken: resp.FencingToken, ExecutionToken: resp.ExecutionToken, Intent: resp.Intent}
	lease := time.Duration(0)
	if g.Intent != nil {
		lease = time.Duration(g.Intent.LeaseMS) * time.Millisecond
	}
	if lease <= 0 {
		lease = req.Lease
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	timeout := opts.ReportTimeout
	if timeout <= 0 {
		timeout = DefaultReportTimeout
	}
	hctx, cancel := context.WithCancelCause(ctx)
	h := &Held{l: l, g: g, lease: lease, timeout: timeout, ctx: hctx, cancel: cancel,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(h.stopped)
		l.KeepAlive(ctx, RenewRequest{Key: g.Key, Owner: g.Owner, FencingToken: g.FencingToken, Lease: lease}, h.stop,
			func(err error) {
				if opts.OnLost != nil {
					opts.OnLost(err)
				}
				cancel(err)
			})
	}()
	return h
}

// Grant is the grant held: what Do hands to its function.
func (h *Held) Grant() *Grant { return h.g }

// Lease is the lease being renewed.
func (h *Held) Lease() time.Duration { return h.lease }

// Context is the context to run the effect under: Hold's, cancelled when
// the lease is lost (its cause says why) and when Stop is called.
func (h *Held) Context() context.Context { return h.ctx }

// Stop stops the renewals: a renewal under way finishes first, so none
// lands after the report. It then cancels Context. Safe to call more than
// once.
func (h *Held) Stop() {
	h.once.Do(func() {
		close(h.stop)
		<-h.stopped
		h.cancel(nil)
	})
}

// Recorded is what Record recorded.
type Recorded struct {
	// Response is the ledger's answer.
	Response *IntentResponse
	// Result is the result as the ledger stored it, else as sent.
	Result json.RawMessage
	// Refused is the ledger's refusal of the whole result when a smaller
	// one, or none, was recorded instead.
	Refused error
}

// Record reports the grant's outcome with result, the same complete until
// the ledger answers definitely, even after ctx ended (its values are
// kept), for up to the report timeout: an effect that happened is
// recorded rather than left to turn in_doubt. A result the ledger refuses
// as a bad request (over its --max-result-bytes) is recorded as smaller()
// (when smaller is set and returns one), then without a result. Call Stop
// first.
func (h *Held) Record(ctx context.Context, outcome Outcome, result json.RawMessage, smaller func() json.RawMessage) (*Recorded, error) {
	rctx, cancel := h.reportContext(ctx)
	defer cancel()
	req := CompleteRequest{Key: h.g.Key, Owner: h.g.Owner, FencingToken: h.g.FencingToken, Outcome: outcome, Result: result}
	resp, err := h.l.Report(rctx, req)
	var refused error
	if err != nil && errors.Is(err, ErrBadRequest) && req.Result != nil {
		refused = err
		if smaller != nil {
			if req.Result = smaller(); req.Result != nil {
				resp, err = h.l.Report(rctx, req)
			}
		}
		if req.Result == nil || (err != nil && errors.Is(err, ErrBadRequest)) {
			req.Result = nil
			resp, err = h.l.Report(rctx, req)
		}
	}
	if err != nil {
		return nil, err
	}
	out := &Recorded{Response: resp, Result: req.Result, Refused: refused}
	if resp != nil && resp.Intent != nil && len(resp.Intent.Result) > 0 {
		out.Result = resp.Intent.Result
	}
	return out, nil
}

// Commit acknowledges the recorded result (executed → committed), within
// what is left of the report timeout, even after ctx ended.
func (h *Held) Commit(ctx context.Context) (*IntentResponse, error) {
	rctx, cancel := h.reportContext(ctx)
	defer cancel()
	return h.l.Commit(rctx, CommitRequest{Key: h.g.Key, Owner: h.g.Owner})
}

// CommitLater acknowledges the recorded result in the background (best
// effort, within DefaultCommitTimeout) and returns at once; failed, if
// set, gets the error of a commit that failed.
func (h *Held) CommitLater(bg *Background, failed func(error)) {
	req := CommitRequest{Key: h.g.Key, Owner: h.g.Owner}
	bg.run(DefaultCommitTimeout, func(ctx context.Context) error {
		_, err := h.l.Commit(ctx, req)
		return err
	}, failed)
}

// reportContext is ctx without its end, bounded by the report timeout
// from the first report.
func (h *Held) reportContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.reportBy.IsZero() {
		h.reportBy = time.Now().Add(h.timeout)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), h.reportBy)
}

// Background runs the ledger work a front end leaves behind once it
// answered (commits, releases of claims given up on), so that it can wait
// for it at shutdown. The zero value is ready.
type Background struct {
	wg sync.WaitGroup
}

// Release settles, in the background, a claim given up on while its
// outcome was unknown (an *UnsettledError that MaybeGranted), with the
// same req: if it was granted after all, nothing ran under it, so it is
// reported failed and the next claim of the key runs (Abandon), within
// timeout. Without it the grant would sit until its lease passed and then
// turn in_doubt. failed, if set, gets the error of a release that failed.
func (b *Background) Release(l Steps, req ClaimRequest, timeout time.Duration, failed func(error)) {
	b.run(timeout, func(ctx context.Context) error { return l.Abandon(ctx, req) }, failed)
}

// Wait waits for the background work, or until ctx ends.
func (b *Background) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run runs step in its own goroutine within timeout.
func (b *Background) run(timeout time.Duration, step func(context.Context) error, failed func(error)) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := step(ctx); err != nil && failed != nil {
			failed(err)
		}
	}()
}
