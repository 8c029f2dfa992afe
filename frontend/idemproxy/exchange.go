package idemproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/intentledger/intentd/client"
)

// exchange is one claimed request, from claim to answer.
type exchange struct {
	h         *Handler
	w         http.ResponseWriter
	r         *http.Request
	route     *Route
	key       string // the ledger key
	body      []byte
	claim     client.ClaimRequest
	log       *slog.Logger
	startedAt time.Time
}

// detached is a context that outlives the client's connection: once the
// request is read, the proxy sees it through (claim, upstream, record),
// so a client that hangs up and retries gets the answer replayed.
func (ex *exchange) detached() context.Context { return context.WithoutCancel(ex.r.Context()) }

// done counts and logs (at debug) how the request was answered.
func (ex *exchange) done(res Result) {
	ex.h.cfg.Metrics.request(ex.route.Name, res)
	ex.log.Debug("answered", "result", res, "elapsed", time.Since(ex.startedAt))
}

func (ex *exchange) run() {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ex.detached(), ex.h.cfg.LedgerTimeout)
	resp, err := ex.h.cfg.Ledger.Settle(ctx, ex.claim)
	cancel()
	if err != nil && errors.Is(err, client.ErrInFlight) && ex.route.WaitInFlight {
		resp, err = ex.waitInFlight(err)
	}
	ex.h.cfg.Metrics.ledgerStep(ex.route.Name, "claim", time.Since(start))
	if err != nil {
		if errors.Is(err, client.ErrOutcomeUnknown) {
			// Granted after all? Nothing ran under it: report it failed in
			// the background, so the next request with the key runs
			// rather than finding it in doubt when its lease passes.
			ex.h.bg.Release(ex.h.cfg.Ledger, ex.claim, ex.h.cfg.ReportTimeout, func(err error) {
				ex.h.cfg.Logger.Warn("releasing an unused grant failed; it turns in_doubt when its lease passes", "key", ex.claim.Key, "err", err)
			})
		}
		p, res := ClaimProblem(err, ex.key)
		if KeyReserved(err) {
			ex.log.Error("the ledger refuses the proxy's claims: its API key does not hold the key prefix "+LedgerKeyPrefix+
				" that another key reserves; give it \"key_prefixes\": [\""+LedgerKeyPrefix+"\"] in the ledger's keys file", "err", err)
		}
		ex.log.Debug("claim not granted", "code", p.Code, "err", err)
		ex.done(res)
		p.Write(ex.w)
		return
	}
	switch resp.Status {
	case client.StatusGranted:
		ex.execute(resp)
	case client.StatusDuplicate:
		ex.replay(resp.Intent)
	case client.StatusPendingApproval:
		ex.pending(resp.Intent)
	default:
		ex.done(ResultLedgerRefused)
		NewProblem(CodeLedgerRefused, fmt.Sprintf("the ledger answered the claim with status %q", resp.Status)).Write(ex.w)
	}
}

// waitInFlight long-polls the intent while another request holds it and
// claims again (the same owner) after each change, until the answer is
// something else, the route's wait passes or the client leaves.
func (ex *exchange) waitInFlight(err error) (*client.ClaimResponse, error) {
	ctx, cancel := context.WithTimeout(ex.r.Context(), ex.h.cfg.MaxWait)
	defer cancel()
	return ex.h.cfg.Ledger.SettleAfterHolder(ctx, ex.claim, err, maxLongPoll, nil)
}

// replay answers with the recorded response of an executed intent.
func (ex *exchange) replay(in *client.Intent) {
	var result json.RawMessage
	if in != nil {
		result = in.Result
	}
	rec, err := DecodeRecord(result)
	if err != nil {
		ex.done(ResultNoRecordedResponse)
		p := NewProblem(CodeNoRecordedResponse, "a request with this Idempotency-Key ran (the intent is "+stateOf(in)+
			") but the ledger holds no response the proxy recorded (resolved by hand, or recorded without one): "+err.Error())
		p.LedgerKey, p.Intent = ex.key, viewOf(in)
		p.Write(ex.w)
		return
	}
	ex.done(ResultReplayed)
	if err := rec.Replay(ex.w); err != nil {
		ex.log.Warn("replay: writing to the client failed", "err", err)
	}
}

func stateOf(in *client.Intent) string {
	if in == nil {
		return "unknown"
	}
	return string(in.State)
}

// pendingAnswer is the 202 body of a claim a policy holds for approval.
type pendingAnswer struct {
	Status    client.Status `json:"status"`
	Detail    string        `json:"detail"`
	LedgerKey string        `json:"ledger_key"`
	IntentURL string        `json:"intent_url"`
	Approve   string        `json:"approve_url"`
	Intent    *IntentView   `json:"intent,omitempty"`
}

// pending answers 202 with where the intent waits for approval.
func (ex *exchange) pending(in *client.Intent) {
	ex.done(ResultPendingApproval)
	intentURL := ex.h.cfg.LedgerURL + "/v1/intents/" + url.PathEscape(ex.key)
	body, _ := json.Marshal(pendingAnswer{
		Status: client.StatusPendingApproval, LedgerKey: ex.key, IntentURL: intentURL, Approve: intentURL + "/approve", Intent: viewOf(in),
		Detail: "a ledger policy holds this request for approval; nothing was sent to the upstream. Once approved, " +
			"send the same request with the same Idempotency-Key again.",
	})
	h := ex.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", intentURL)
	h.Set("Cache-Control", "no-store")
	ex.w.WriteHeader(http.StatusAccepted)
	_, _ = ex.w.Write(append(body, '\n'))
}

// execute forwards a granted request to the upstream, holding the grant
// while it works (client.Hold: a lost lease is counted and logged, and the
// upstream request runs on), streams the answer to the client and records
// it.
func (ex *exchange) execute(grant *client.ClaimResponse) {
	cfg := &ex.h.cfg
	token := grant.FencingToken
	ex.log = ex.log.With("fencing_token", token)
	held := client.Hold(ex.detached(), cfg.Ledger, ex.claim, grant, client.HoldOptions{
		ReportTimeout: cfg.ReportTimeout,
		OnLost: func(err error) {
			cfg.Metrics.lostLease(ex.route.Name)
			ex.log.Warn("lease renewal refused while the upstream works; the upstream request runs on", "err", err)
		}})
	defer held.Stop()

	uctx, ucancel := context.WithTimeout(ex.detached(), ex.route.upstreamTimeout(cfg.UpstreamTimeout))
	defer ucancel()
	out := upstreamRequest(uctx, ex.r, cfg.Upstream, ex.body, grantHeaders{fencingToken: token, executionToken: grant.ExecutionToken})
	start := time.Now()
	resp, outcome, err := send(cfg.Transport, out)
	if err != nil {
		held.Stop()
		cfg.Metrics.upstreamDone(ex.route.Name, 0, time.Since(start))
		ex.upstreamFailed(held, outcome, err)
		return
	}
	defer resp.Body.Close()

	h := ex.w.Header()
	for k, vs := range EndToEnd(resp.Header) {
		h[k] = vs
	}
	ex.w.WriteHeader(resp.StatusCode)
	t := newTee(ex.w, cfg.MaxResult, h.Get("Content-Length") != "", resp.ContentLength)
	n, rerr := t.copyFrom(resp.Body)
	held.Stop()
	cfg.Metrics.upstreamDone(ex.route.Name, resp.StatusCode, time.Since(start))
	if rerr != nil {
		// The upstream answered and then broke off: its answer is not known
		// whole. Record nothing (the key turns in_doubt) and cut the
		// client's response short, so it never takes a part for the whole.
		ex.done(ResultUpstreamNoAnswer)
		ex.log.Warn("the upstream broke off its answer; nothing recorded, the key turns in_doubt when its lease passes",
			"status", resp.StatusCode, "bytes", n, "err", rerr)
		panic(http.ErrAbortHandler)
	}
	rec := Decide(resp.StatusCode, ex.route.On5xx)
	if rec != RecordNothing {
		result, err := EncodeRecord(resp.StatusCode, resp.Header, t.kept(), n, cfg.MaxResult)
		if err != nil {
			ex.log.Error("the answer cannot be recorded", "err", err)
		}
		ex.record(held, rec, resp.StatusCode, resp.Header, n, result)
	}
	// The client gets the answer's last byte only now, after the record:
	// whoever saw the whole answer finds it replayable.
	t.finish()
	switch rec {
	case RecordExecuted:
		ex.done(ResultExecuted)
		if cfg.Commit {
			held.CommitLater(&ex.h.bg, func(err error) { ex.log.Debug("commit (best effort) failed", "err", err) })
		}
	case RecordFailed:
		ex.done(ResultFailed)
	case RecordNothing:
		ex.done(ResultUnrecorded)
		ex.log.Info("upstream 5xx left unrecorded (on_5xx in_doubt): the key turns in_doubt when its lease passes", "status", resp.StatusCode)
	}
}

// record reports the answer: executed (or failed) with result. A result
// the ledger refuses (its caps are smaller than the proxy was told) is
// recorded without the body, then without any result (Held.Record),
// rather than left to turn in_doubt.
func (ex *exchange) record(held *client.Held, rec Recording, status int, header http.Header, n int64, result json.RawMessage) {
	cfg := &ex.h.cfg
	defer func(start time.Time) { cfg.Metrics.ledgerStep(ex.route.Name, "record", time.Since(start)) }(time.Now())
	outcome := client.OutcomeExecuted
	if rec == RecordFailed {
		outcome = client.OutcomeFailed
	}
	_, err := held.Record(ex.detached(), outcome, result, func() json.RawMessage {
		bodyless, _ := EncodeRecord(status, header, nil, n, cfg.MaxResult)
		return bodyless
	})
	if err != nil {
		cfg.Metrics.recordError(ex.route.Name)
		ex.log.Error("the upstream answered but recording its answer failed; the client gets the answer, "+
			"the key turns in_doubt when its lease passes (unless a late report lands)", "outcome", outcome, "err", err)
	}
}

// upstreamFailed answers a request whose upstream exchange failed before
// any answer: never sent (recorded failed, so a retry runs again) or sent
// without an answer (nothing recorded: the key turns in_doubt).
func (ex *exchange) upstreamFailed(held *client.Held, outcome sendOutcome, err error) {
	if outcome == notSent {
		result, _ := json.Marshal(map[string]string{"error": "the upstream could not be reached; nothing was sent: " + err.Error()})
		_, rerr := held.Record(ex.detached(), client.OutcomeFailed, result, nil)
		detail := "the upstream could not be reached and nothing was sent to it; the attempt is recorded failed, so a retry " +
			"with the same Idempotency-Key runs it again (" + err.Error() + ")"
		if rerr != nil {
			ex.log.Error("recording an unsent request failed; the key turns in_doubt when its lease passes", "err", rerr)
			detail = "the upstream could not be reached and nothing was sent to it, but recording that failed (" + rerr.Error() +
				"): a retry with the same Idempotency-Key may find it in doubt (" + err.Error() + ")"
		}
		ex.log.Warn("upstream unreachable", "err", err)
		ex.done(ResultUpstreamUnreachable)
		p := NewProblem(CodeUpstreamUnreachable, detail).RetryAfter(time.Second)
		p.LedgerKey = ex.key
		p.Write(ex.w)
		return
	}
	ex.log.Warn("the upstream did not answer; nothing recorded, the key turns in_doubt when its lease passes", "err", err)
	ex.done(ResultUpstreamNoAnswer)
	p := NewProblem(CodeUpstreamNoAnswer, "the request was sent to the upstream and no answer came ("+err.Error()+
		"): whether it acted is unknown. The key is held until its lease passes, then it is in doubt: "+
		"retries get 409 until someone checks the upstream and resolves the intent.")
	p.LedgerKey = ex.key
	if timedOut(err) {
		p.WithStatus(http.StatusGatewayTimeout)
	}
	p.Write(ex.w)
}

// tee streams an upstream body to the client while keeping up to max
// bytes of it for the record. When the answer declares its length it
// holds back what it has read last until finish, so the client cannot see
// a whole answer before the proxy recorded it: the read that completes the
// declared length is held back whole (a small answer then goes out in one
// write, headers included), and otherwise the last byte of each read; a
// chunked answer needs no holding back, as its end is only sent when the
// handler returns.
type tee struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	max      int
	holdBack bool
	length   int64 // the declared length, or -1
	buf      []byte
	overflow bool
	held     []byte
	n        int64
	wErr     error // the client went away: keep reading, to record
}

func newTee(w http.ResponseWriter, max int, holdBack bool, length int64) *tee {
	if !holdBack {
		length = -1
	}
	return &tee{w: w, rc: http.NewResponseController(w), max: max, holdBack: holdBack, length: length, held: make([]byte, 0, 1)}
}

// chunks are copyFrom's read buffers: one per request in flight, reused
// (a fresh 32 KiB per request was most of the garbage a busy proxy made).
var chunks = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyFrom reads r to its end; the error is the upstream's.
func (t *tee) copyFrom(r io.Reader) (int64, error) {
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	chunk := *bp
	for {
		k, err := r.Read(chunk)
		if k > 0 {
			p := chunk[:k]
			t.n += int64(k)
			if !t.overflow {
				if len(t.buf)+k <= t.max {
					t.buf = append(t.buf, p...)
				} else {
					t.overflow, t.buf = true, nil
				}
			}
			switch {
			case t.holdBack && t.length >= 0 && t.n >= t.length:
				// The declared end: hold it all back until finish.
				t.write(t.held)
				t.held = append(t.held[:0], p...)
			case t.holdBack:
				t.write(t.held)
				t.write(p[:k-1])
				t.held = append(t.held[:0], p[k-1])
				t.flush()
			default:
				t.write(p)
				t.flush()
			}
		}
		if errors.Is(err, io.EOF) {
			return t.n, nil
		}
		if err != nil {
			return t.n, err
		}
	}
}

func (t *tee) write(p []byte) {
	if len(p) == 0 || t.wErr != nil {
		return
	}
	_, t.wErr = t.w.Write(p)
}

func (t *tee) flush() {
	if t.wErr == nil {
		_ = t.rc.Flush()
	}
}

// kept returns the body kept for the record (all of it unless it was over
// max).
func (t *tee) kept() []byte { return t.buf }

// finish sends what was held back.
func (t *tee) finish() {
	t.write(t.held)
	t.held = t.held[:0]
	t.flush()
}
