// Package workload drives the ledger during a fault run: clients spread
// over all nodes claim contended keys, perform the side effect in the
// harness's own world log when granted, complete it, and read keys back;
// every operation is recorded as invoke → ok | fail | info.
package workload

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

// answer is what one HTTP call produced, classified.
type answer struct {
	outcome history.Outcome
	status  string
	created bool
	fence   uint64 // fencing_token of a grant
	intent  *intentView
	err     string
	local   bool // the node answered from its own copy (X-Intentd-Local-Answer)
	http    int  // the HTTP status code (0: no answer)
}

type intentView struct {
	Key          string          `json:"key"`
	State        string          `json:"state"`
	Owner        string          `json:"owner"`
	FencingToken uint64          `json:"fencing_token"`
	Generation   uint64          `json:"generation"`
	Payload      json.RawMessage `json:"payload"`
}

// tag is the payload variant recorded in the intent.
func (v *intentView) tag() string {
	var p struct {
		Variant string `json:"variant"`
	}
	_ = json.Unmarshal(v.Payload, &p)
	return p.Variant
}

type wire struct {
	Status       string      `json:"status"`
	Code         string      `json:"code"`
	FencingToken uint64      `json:"fencing_token"`
	Intent       *intentView `json:"intent"`
	Detail       string      `json:"detail"`
}

// caller sends ledger requests with a per-request timeout.
type caller struct {
	hc      *http.Client
	timeout time.Duration
}

func newCaller(timeout time.Duration, tlsConf *tls.Config) *caller {
	return &caller{timeout: timeout, hc: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 64,
		DialContext:         (&net.Dialer{Timeout: timeout}).DialContext,
		TLSClientConfig:     tlsConf,
	}}}
}

// do performs one request and classifies it. A request that could not be
// sent (dial failed) is a definite failure; one that was sent but not
// answered is info: it may have taken effect.
func (c *caller) do(ctx context.Context, method, url string, body any) answer {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return answer{outcome: history.OutcomeFail, err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return answer{outcome: history.OutcomeFail, status: "unreachable", err: err.Error()}
		}
		return answer{outcome: history.OutcomeInfo, status: "no_answer", err: err.Error()}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return answer{outcome: history.OutcomeInfo, status: "no_answer", err: err.Error()}
	}
	var w wire
	_ = json.Unmarshal(raw, &w)
	a := answer{status: w.Status, fence: w.FencingToken, intent: w.Intent, created: resp.StatusCode == http.StatusCreated,
		local: resp.Header.Get("X-Intentd-Local-Answer") != "", http: resp.StatusCode}
	if w.Code != "" {
		a.status = w.Code
	}
	if method == http.MethodGet && resp.StatusCode == http.StatusOK {
		// A GET answers with the bare intent.
		var in intentView
		_ = json.Unmarshal(raw, &in)
		a.intent, a.status = &in, "ok"
	}
	switch {
	case resp.StatusCode < 300, resp.StatusCode == 403, resp.StatusCode == 404, resp.StatusCode == 409, resp.StatusCode == 422:
		a.outcome = history.OutcomeOK // a definite answer of the ledger
	case resp.StatusCode == http.StatusServiceUnavailable && definitelyNotApplied[w.Code]:
		a.outcome = history.OutcomeFail
	case resp.StatusCode == http.StatusInsufficientStorage && w.Code == codeLedgerFull:
		// The ledger refused to create an intent for want of disk space,
		// before writing anything: a definite refusal.
		a.outcome = history.OutcomeFail
	case resp.StatusCode == http.StatusServiceUnavailable && method == http.MethodGet:
		a.outcome = history.OutcomeFail // a read that was not served changed nothing
	case resp.StatusCode >= 500:
		a.outcome = history.OutcomeInfo
	default:
		a.outcome = history.OutcomeFail
	}
	if a.outcome != history.OutcomeOK {
		a.err = fmt.Sprintf("HTTP %d %s %s", resp.StatusCode, w.Code, w.Detail)
	}
	return a
}

// definitelyNotApplied are the 503 codes whose write was never appended to
// the log; any other 503 on a write (outcome_unknown, unavailable, ...) may
// have been applied and is info.
var definitelyNotApplied = map[string]bool{"no_leader": true, "not_leader": true, "shutting_down": true}

// codeLedgerFull is the problem code of a 507 whose claim was refused, with
// nothing written, because the node's data dir is short of free space. Any
// other 507 (or a 503 on a write other than those above) is an unknown
// outcome.
const codeLedgerFull = "ledger_full"

// fill copies an answer into a recorded op.
func (a answer) fill(op *history.Op) {
	op.Outcome, op.Status, op.Created, op.Error, op.Local, op.HTTP = a.outcome, a.status, a.created, a.err, a.local, a.http
	if a.intent != nil {
		op.State, op.IntentOwner, op.IntentFence = a.intent.State, a.intent.Owner, a.intent.FencingToken
		op.Generation, op.IntentTag = a.intent.Generation, a.intent.tag()
	}
	if a.fence != 0 {
		op.IntentFence = a.fence
	}
}
