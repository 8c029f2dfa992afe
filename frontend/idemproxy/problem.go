package idemproxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/intentledger/intentd/client"
)

// Code is the stable word of a proxy problem document; docs/proxy.md
// documents each.
type Code string

// The proxy's problem codes.
const (
	CodeMissingKey          Code = "missing-key"
	CodeInvalidKey          Code = "invalid-key"
	CodeBodyTooLarge        Code = "body-too-large"
	CodeBadRequest          Code = "bad-request"
	CodeFingerprintMismatch Code = "fingerprint-mismatch"
	CodeInFlight            Code = "in-flight"
	CodeInDoubt             Code = "in-doubt"
	CodeRejected            Code = "rejected"
	CodeBlocked             Code = "blocked"
	CodeLedgerUnavailable   Code = "ledger-unavailable"
	CodeOutcomeUnknown      Code = "outcome-unknown"
	CodeLedgerRefused       Code = "ledger-refused"
	CodeUpstreamNoAnswer    Code = "upstream-no-answer"
	CodeUpstreamUnreachable Code = "upstream-unreachable"
	CodeNoRecordedResponse  Code = "no-recorded-response"
	CodeUpstreamError       Code = "upstream-error"
)

// problemTypeBase is where each code is documented.
const problemTypeBase = "https://github.com/intentledger/intentd/blob/main/docs/proxy.md#"

// codeInfo is the fixed status and title of a code.
var codeInfo = map[Code]struct {
	status int
	title  string
}{
	CodeMissingKey:          {http.StatusBadRequest, "The Idempotency-Key header is required on this route"},
	CodeInvalidKey:          {http.StatusBadRequest, "The Idempotency-Key header is not a valid key"},
	CodeBodyTooLarge:        {http.StatusRequestEntityTooLarge, "The request body is over the proxy's limit"},
	CodeBadRequest:          {http.StatusBadRequest, "The request could not be read"},
	CodeFingerprintMismatch: {http.StatusUnprocessableEntity, "The Idempotency-Key was used with another request"},
	CodeInFlight:            {http.StatusConflict, "A request with this Idempotency-Key is in flight"},
	CodeInDoubt:             {http.StatusConflict, "The outcome of the request with this Idempotency-Key is unknown; it must be resolved"},
	CodeRejected:            {http.StatusForbidden, "An approver rejected the request with this Idempotency-Key"},
	CodeBlocked:             {http.StatusForbidden, "A ledger policy blocks this tool"},
	CodeLedgerUnavailable:   {http.StatusServiceUnavailable, "The ledger could not be reached; nothing was done"},
	CodeOutcomeUnknown:      {http.StatusServiceUnavailable, "The ledger's answer was lost; retry with the same Idempotency-Key"},
	CodeLedgerRefused:       {http.StatusBadGateway, "The ledger refused the proxy's claim"},
	CodeUpstreamNoAnswer:    {http.StatusBadGateway, "The upstream did not answer; whether it acted is unknown"},
	CodeUpstreamUnreachable: {http.StatusBadGateway, "The upstream could not be reached; nothing was sent"},
	CodeNoRecordedResponse:  {http.StatusBadGateway, "The request ran, but no response was recorded to replay"},
	CodeUpstreamError:       {http.StatusBadGateway, "The upstream failed a request the proxy passes through"},
}

// Problem is an RFC 9457 problem document of the proxy.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   Code   `json:"code"`
	// Retryable says a retry with the same Idempotency-Key may succeed
	// (after Retry-After); false means it gets the same answer.
	Retryable bool `json:"retryable"`
	// LedgerKey is the intent's key in the ledger.
	LedgerKey string `json:"ledger_key,omitempty"`
	// Intent shows the ledger's record, when the answer is about it.
	Intent *IntentView `json:"intent,omitempty"`
	// Fingerprint (recorded) and RequestFingerprint (this request's) on
	// fingerprint-mismatch.
	Fingerprint        string `json:"fingerprint,omitempty"`
	RequestFingerprint string `json:"request_fingerprint,omitempty"`
	RetryAfterMS       int64  `json:"retry_after_ms,omitempty"`

	retryAfter time.Duration
}

// IntentView is what the proxy's answers show of an intent: its state and
// identity, never its payload (the body of the request that claimed it,
// maybe another client's) nor its recorded result.
type IntentView struct {
	Key               string       `json:"key"`
	State             client.State `json:"state"`
	Owner             string       `json:"owner,omitempty"`
	FencingToken      uint64       `json:"fencing_token,omitempty"`
	Generation        uint64       `json:"generation,omitempty"`
	Fingerprint       string       `json:"fingerprint,omitempty"`
	Policy            string       `json:"policy,omitempty"`
	ApprovalsRequired int          `json:"approvals_required,omitempty"`
	Approvals         int          `json:"approvals,omitempty"`
	LeaseDeadline     time.Time    `json:"lease_deadline,omitzero"`
	UpdatedAt         time.Time    `json:"updated_at,omitzero"`
	Version           uint64       `json:"version,omitempty"`
}

// viewOf is the view of in (nil for nil).
func viewOf(in *client.Intent) *IntentView {
	if in == nil {
		return nil
	}
	return &IntentView{Key: in.Key, State: in.State, Owner: in.Owner, FencingToken: in.FencingToken, Generation: in.Generation,
		Fingerprint: in.Fingerprint, Policy: in.Policy, ApprovalsRequired: in.ApprovalsRequired, Approvals: len(in.Approvals),
		LeaseDeadline: in.LeaseDeadline, UpdatedAt: in.UpdatedAt, Version: in.Version}
}

// NewProblem makes the problem of code with a detail.
func NewProblem(code Code, detail string) *Problem {
	info := codeInfo[code]
	return &Problem{Type: problemTypeBase + string(code), Title: info.title, Status: info.status, Detail: detail, Code: code}
}

// WithStatus overrides the code's status (504 for an upstream timeout).
func (p *Problem) WithStatus(status int) *Problem {
	p.Status = status
	return p
}

// RetryAfter marks the problem retryable after d (at least one second on
// the wire).
func (p *Problem) RetryAfter(d time.Duration) *Problem {
	p.Retryable = true
	p.retryAfter = max(d, time.Second)
	p.RetryAfterMS = p.retryAfter.Milliseconds()
	return p
}

// Write sends the problem as application/problem+json.
func (p *Problem) Write(w http.ResponseWriter) {
	body, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((p.retryAfter+time.Second-1)/time.Second), 10))
	}
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
