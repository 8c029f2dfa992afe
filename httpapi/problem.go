package httpapi

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// ProblemTypeBase is the prefix of every problem document's "type"; the
// code follows as the fragment, naming its section in docs/problems.md.
const ProblemTypeBase = "https://github.com/intentledger/intentd/blob/main/docs/problems.md#"

// Codes that are not fsm statuses. The fsm refusal statuses (in_flight,
// in_doubt, divergent, fenced, rejected, not_found, invalid_state,
// not_pending_approval) are used as codes unchanged.
const (
	CodeBadRequest       = "bad_request"
	CodeTooLarge         = "too_large"
	CodeUnprocessable    = "unprocessable"
	CodeNoLeader         = "no_leader"
	CodeNotLeader        = "not_leader"
	CodeOutcomeUnknown   = "outcome_unknown"
	CodeShuttingDown     = "shutting_down"
	CodeUnavailable      = "unavailable"
	CodeNotReady         = "not_ready"
	CodeInternal         = "internal"
	CodeNoRoute          = "no_route"
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeUnauthenticated (401): no API key, or one that is malformed or
	// unknown; the answer carries a WWW-Authenticate: Bearer challenge.
	CodeUnauthenticated = "unauthenticated"
	// CodeForbidden (403): a valid API key without the role the call
	// needs (or an agent reading another namespace's audit log).
	CodeForbidden      = "forbidden"
	CodeTokenInvalid   = "token_invalid"
	CodePolicyNotFound = "policy_not_found"
	CodeRateLimited    = "rate_limited"
	CodeTooManyWaiters = "too_many_waiters"
	// CodeKeyReserved (403): the claim's key falls under a prefix another
	// API key of the namespace reserves (a front end's, key_prefixes).
	CodeKeyReserved = "key_reserved"
	// CodePolicyMismatch (422): the claim names a policy other than the
	// one the ledger picks for its tool.
	CodePolicyMismatch = "policy_mismatch"
	// CodeNamespaceRateLimited (429): the namespace is over its quota of
	// claims per second (ledger.NamespaceQuota); Retry-After says when.
	CodeNamespaceRateLimited = "namespace_rate_limited"
	// CodeNamespaceFull (507): the namespace holds its quota of intents;
	// nothing was written.
	CodeNamespaceFull = "namespace_full"
	// CodeLedgerFull (507): the leader is past a capacity (disk, data dir,
	// memory: ledger.CapacityError); the claim would have added an intent
	// and nothing was written. No Retry-After: room comes back with
	// purges or an operator, not at a time the node can promise.
	CodeLedgerFull = "ledger_full"
)

// codeGrantedNew is the table entry for a grant that created a new
// generation (201); a repeated grant to the same owner is "granted" (200).
const codeGrantedNew = "granted+created"

// codeSpec is how one answer code travels over HTTP.
type codeSpec struct {
	status int
	title  string
	// retryAfter, when set, is sent as Retry-After on every answer with
	// this code (in_flight computes its own from the lease).
	retryAfter time.Duration
	// intent says whether a problem with this code carries the intent.
	intent bool
}

// codes is the one table that maps answer codes to HTTP. Successes carry a
// status word in a JSON body; everything else is a problem document.
var codes = map[string]codeSpec{
	// Successes.
	codeGrantedNew:                    {status: http.StatusCreated, title: "Granted"},
	string(fsm.StatusGranted):         {status: http.StatusOK, title: "Granted again to the same owner"},
	string(fsm.StatusDuplicate):       {status: http.StatusOK, title: "Duplicate: already executed"},
	string(fsm.StatusPendingApproval): {status: http.StatusAccepted, title: "Pending approval"},
	string(fsm.StatusOK):              {status: http.StatusOK, title: "OK"},

	// Refusals by the state machine: definite answers, never retried as is.
	string(fsm.StatusInFlight):     {status: http.StatusConflict, title: "The intent is in flight under another owner", intent: true},
	string(fsm.StatusInDoubt):      {status: http.StatusConflict, title: "The intent is in doubt: its lease passed without a report; it must be resolved", intent: true},
	string(fsm.StatusDivergent):    {status: http.StatusUnprocessableEntity, title: "The payload differs from the one recorded under this key", intent: true},
	string(fsm.StatusFenced):       {status: http.StatusConflict, title: "Stale owner or fencing token", intent: true},
	string(fsm.StatusRejected):     {status: http.StatusForbidden, title: "The intent was rejected", intent: true},
	string(fsm.StatusNotFound):     {status: http.StatusNotFound, title: "No such intent"},
	string(fsm.StatusInvalidState): {status: http.StatusConflict, title: "The operation is not allowed in the intent's state", intent: true},
	string(fsm.StatusNotPending):   {status: http.StatusConflict, title: "The intent is not pending approval", intent: true},

	// Refusals by the gate.
	string(fsm.StatusBlocked):         {status: http.StatusForbidden, title: "The policy blocks this tool"},
	string(fsm.StatusUnknownPolicy):   {status: http.StatusUnprocessableEntity, title: "The claim names a policy that does not exist"},
	string(fsm.StatusVersionMismatch): {status: http.StatusConflict, title: "The policy is not at the expected version"},
	string(fsm.StatusAlreadyApproved): {status: http.StatusConflict, title: "This approver already approved the intent", intent: true},
	string(fsm.StatusNotAnApprover):   {status: http.StatusForbidden, title: "The actor is not one of the policy's approvers", intent: true},
	string(fsm.StatusNotGrantHolder):  {status: http.StatusForbidden, title: "The grant is bound to another API key", intent: true},
	string(fsm.StatusSelfApproval):    {status: http.StatusForbidden, title: "The API key that claimed the intent may not approve it", intent: true},
	string(fsm.StatusTokenUsed):       {status: http.StatusConflict, title: "The execution token was already used", intent: true},
	string(fsm.StatusTokenExpired):    {status: http.StatusGone, title: "The execution token expired"},
	string(fsm.StatusTokenMismatch):   {status: http.StatusUnprocessableEntity, title: "The execution token does not bind this payload or intent", intent: true},
	CodeTokenInvalid:                  {status: http.StatusUnprocessableEntity, title: "The execution token is forged, malformed or signed by an unknown key"},
	CodeTokenWrongTool:                {status: http.StatusUnprocessableEntity, title: "The execution token is for another tool; it was not spent"},
	CodeTokenToolForbidden:            {status: http.StatusForbidden, title: "The API key may not verify execution tokens of this tool; the token was not spent"},
	CodeSigningKeyInUse:               {status: http.StatusConflict, title: "The rotation would drop a signing key whose execution tokens may still be live; nothing changed"},
	CodePolicyNotFound:                {status: http.StatusNotFound, title: "No such policy"},
	CodeUnauthenticated:               {status: http.StatusUnauthorized, title: "Authentication required: a valid API key is needed"},
	CodeForbidden:                     {status: http.StatusForbidden, title: "The API key lacks the role this call needs"},
	CodeRateLimited:                   {status: http.StatusTooManyRequests, title: "Too many requests: slow down and retry after Retry-After", retryAfter: time.Second},
	CodeUnknownPeer:                   {status: http.StatusNotFound, title: "No such server in the cluster's configuration"},
	CodePeerIsLeader:                  {status: http.StatusConflict, title: "The leader cannot be removed: transfer leadership first"},
	CodeNoLiveMajority:                {status: http.StatusConflict, title: "The change would leave the voters without a live majority; nothing changed"},
	CodeNotVoter:                      {status: http.StatusConflict, title: "Leadership can move only to a voter"},
	CodeKeyReserved:                   {status: http.StatusForbidden, title: "The key is reserved to another API key of this namespace (a front end's prefix)"},
	CodePolicyMismatch:                {status: http.StatusUnprocessableEntity, title: "The claim names a policy the ledger does not pick for its tool"},
	CodeNamespaceRateLimited:          {status: http.StatusTooManyRequests, title: "The namespace is over its quota of claims per second: retry after Retry-After; nothing was written", retryAfter: time.Second},
	CodeNamespaceFull:                 {status: http.StatusInsufficientStorage, title: "The namespace holds its quota of intents: claims of new keys are refused until intents are purged; nothing was written"},
	CodeLedgerFull:                    {status: http.StatusInsufficientStorage, title: "The ledger is full (disk, data dir or memory): claims of new keys are refused until there is room; nothing was written"},
	CodeTooManyWaiters:                {status: http.StatusTooManyRequests, title: "Too many long-polls wait on this node, key or caller: retry after Retry-After, or read without waiting", retryAfter: time.Second},

	// Bad input: nothing was written.
	CodeBadRequest:       {status: http.StatusBadRequest, title: "Bad request"},
	CodeTooLarge:         {status: http.StatusRequestEntityTooLarge, title: "Request too large"},
	CodeUnprocessable:    {status: http.StatusUnprocessableEntity, title: "Unprocessable request"},
	CodeNoRoute:          {status: http.StatusNotFound, title: "No such endpoint"},
	CodeMethodNotAllowed: {status: http.StatusMethodNotAllowed, title: "Method not allowed"},

	// The cluster could not answer. Safe to retry with the same request.
	CodeNoLeader:       {status: http.StatusServiceUnavailable, title: "The cluster has no leader; nothing was written, retry", retryAfter: time.Second},
	CodeNotLeader:      {status: http.StatusServiceUnavailable, title: "This node is not the leader and could not forward; nothing was written, retry", retryAfter: time.Second},
	CodeOutcomeUnknown: {status: http.StatusServiceUnavailable, title: "The outcome is unknown: the write may or may not have been applied; it is safe to retry with the same key, owner and payload", retryAfter: time.Second},
	CodeShuttingDown:   {status: http.StatusServiceUnavailable, title: "The node is shutting down; nothing was written, retry on another node", retryAfter: time.Second},
	CodeUnavailable:    {status: http.StatusServiceUnavailable, title: "The request could not be served right now; retry", retryAfter: time.Second},
	CodeNotReady:       {status: http.StatusServiceUnavailable, title: "The node is not ready", retryAfter: time.Second},
	CodeInternal:       {status: http.StatusInternalServerError, title: "Internal error"},

	// Operator endpoints (snapshots.go).
	CodeBadSnapshot:   {status: http.StatusUnprocessableEntity, title: "The snapshot failed its checks; nothing was restored"},
	CodeNotEmpty:      {status: http.StatusConflict, title: "The ledger is not empty; nothing was restored"},
	CodeNotConfigured: {status: http.StatusNotImplemented, title: "This node does not serve this endpoint"},
}

// successCode returns the table code of a success status and whether the
// status is one.
func successCode(r *fsm.Result) (string, bool) {
	switch r.Status {
	case fsm.StatusGranted:
		if r.Created {
			return codeGrantedNew, true
		}
		return string(r.Status), true
	case fsm.StatusDuplicate, fsm.StatusPendingApproval, fsm.StatusOK:
		return string(r.Status), true
	}
	return "", false
}

// problem is an RFC 9457 problem document with the ledger's extensions.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	// Field names the offending request field of a bad-input problem.
	Field  string      `json:"field,omitempty"`
	Intent *intentView `json:"intent,omitempty"`
	// Fingerprint (recorded) and RequestFingerprint (this request's) are
	// set on divergent problems.
	Fingerprint        string `json:"fingerprint,omitempty"`
	RequestFingerprint string `json:"request_fingerprint,omitempty"`
	RetryAfterMS       int64  `json:"retry_after_ms,omitempty"`

	retryAfter time.Duration
	// challenge, when set, is sent as WWW-Authenticate (401 and 403).
	challenge string
}

// newProblem builds the problem for code from the table.
func newProblem(code, detail string) *problem {
	spec, ok := codes[code]
	if !ok {
		code, spec = CodeInternal, codes[CodeInternal]
	}
	p := &problem{
		Type: ProblemTypeBase + code, Title: spec.title, Status: spec.status, Detail: detail, Code: code,
	}
	p.setRetryAfter(spec.retryAfter)
	return p
}

func (p *problem) setRetryAfter(d time.Duration) {
	if d <= 0 {
		return
	}
	p.retryAfter = d
	p.RetryAfterMS = d.Milliseconds()
}

// retryAfterHeader is the Retry-After value: whole seconds, at least 1.
func (p *problem) retryAfterHeader() string {
	secs := int64(math.Ceil(p.retryAfter.Seconds()))
	if secs < 1 {
		secs = 1
	}
	return strconv.FormatInt(secs, 10)
}

// writeProblem sends p as application/problem+json.
func (s *Server) writeProblem(c echo.Context, p *problem) error {
	traceProblem(c, p)
	return sendProblem(c.Response(), p)
}

// sendProblem is the API's one problem+json writer: it sends p with its
// Retry-After and WWW-Authenticate headers. Handlers outside the echo
// router (Require) answer with it too.
func sendProblem(w http.ResponseWriter, p *problem) error {
	body, err := encodeJSON(p)
	if err != nil {
		return err
	}
	h := w.Header()
	if p.retryAfter > 0 {
		h.Set("Retry-After", p.retryAfterHeader())
	}
	if p.challenge != "" {
		h.Set(echo.HeaderWWWAuthenticate, p.challenge)
	}
	h.Set(echo.HeaderContentType, ContentTypeProblem)
	w.WriteHeader(p.Status)
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("write problem: %w", err)
	}
	return nil
}

// refusalProblem turns a state machine refusal into a problem. now is the
// server's clock, for in_flight's Retry-After.
func refusalProblem(r *fsm.Result, now time.Time) *problem {
	code := string(r.Status)
	spec, ok := codes[code]
	if !ok {
		return newProblem(CodeInternal, fmt.Sprintf("the ledger answered with unexpected status %q", r.Status))
	}
	p := newProblem(code, r.Detail)
	if spec.intent && r.Intent != nil {
		p.Intent = newIntentView(r.Intent)
	}
	switch r.Status {
	case fsm.StatusInFlight:
		p.setRetryAfter(inFlightRetryAfter(r, now))
	case fsm.StatusDivergent:
		if r.Intent != nil {
			p.Fingerprint = r.Intent.Fingerprint
		}
		p.RequestFingerprint = r.Fingerprint
	}
	return p
}

// inFlightRetryAfter is the Retry-After of an in_flight refusal: 1 s for
// the owner's first refused attempt on the grant, doubling with each later
// one (r.Attempt, counted by the leader) up to 32 s, and never past the
// lease's end (at least 100 ms). A client that wants the outcome at once
// long-polls the intent (GET ?wait=&after_version=) instead.
func inFlightRetryAfter(r *fsm.Result, now time.Time) time.Duration {
	wait := time.Second << min(max(r.Attempt, 1)-1, 5)
	if r.Intent != nil {
		wait = min(wait, time.Unix(0, r.Intent.LeaseDeadline).Sub(now))
	}
	return max(wait, 100*time.Millisecond)
}

// errorProblem turns an error from the ledger service into a problem.
// write says whether the request was a write (whose outcome a failure can
// leave unknown) or a read; now is the server's clock. internal reports an
// unexpected error the caller should log.
func errorProblem(err error, write bool, now time.Time) (p *problem, internal bool) {
	var fe *ledger.FieldError
	field := ""
	if errors.As(err, &fe) {
		field = fe.Field
	}
	withField := func(p *problem) *problem { p.Field = field; return p }

	var refusal *fsm.RefusalError
	var notLeader *ledger.NotLeaderError
	var quota *ledger.QuotaError
	switch {
	case errors.As(err, &quota) && errors.Is(err, ledger.ErrNamespaceRateLimited):
		p := newProblem(CodeNamespaceRateLimited, err.Error())
		p.setRetryAfter(max(quota.RetryAfter, time.Millisecond))
		return p, false
	case errors.Is(err, ledger.ErrNamespaceFull):
		return newProblem(CodeNamespaceFull, err.Error()), false
	case errors.Is(err, ledger.ErrLedgerFull):
		return newProblem(CodeLedgerFull, err.Error()), false
	case errors.Is(err, ledger.ErrPolicyMismatch):
		return withField(newProblem(CodePolicyMismatch, err.Error())), false
	case errors.Is(err, ledger.ErrTooLarge):
		return withField(newProblem(CodeTooLarge, err.Error())), false
	case errors.Is(err, ledger.ErrUnprocessable):
		return withField(newProblem(CodeUnprocessable, err.Error())), false
	case errors.Is(err, ledger.ErrBadRequest):
		return withField(newProblem(CodeBadRequest, err.Error())), false
	case errors.As(err, &refusal):
		return refusalProblem(&fsm.Result{Status: refusal.Status, Detail: refusal.Detail, Intent: refusal.Intent}, now), false
	case errors.Is(err, fsm.ErrNotFound):
		return newProblem(string(fsm.StatusNotFound), err.Error()), false
	case errors.Is(err, ledger.ErrTokenInvalid):
		return newProblem(CodeTokenInvalid, err.Error()), false
	case errors.Is(err, fsm.ErrUnknownPolicy):
		return newProblem(CodePolicyNotFound, err.Error()), false
	case errors.As(err, &notLeader) && notLeader.LeaderHTTP != "":
		return newProblem(CodeNotLeader, err.Error()), false
	case errors.Is(err, ledger.ErrNotLeader), errors.Is(err, ledger.ErrNoLeader):
		return newProblem(CodeNoLeader, err.Error()), false
	case errors.Is(err, ledger.ErrShuttingDown):
		return newProblem(CodeShuttingDown, err.Error()), false
	case errors.Is(err, ledger.ErrTooManyWaiters):
		return newProblem(CodeTooManyWaiters, err.Error()), false
	case errors.Is(err, ledger.ErrSigningKeyInUse):
		return newProblem(CodeSigningKeyInUse, err.Error()), false
	case errors.Is(err, ledger.ErrSigningKeySealed):
		// This node lacks the KEK (or has another): its detail says so.
		return newProblem(CodeUnavailable, err.Error()), false
	case errors.Is(err, ledger.ErrOutcomeUnknown),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if write {
			return newProblem(CodeOutcomeUnknown, err.Error()), false
		}
		return newProblem(CodeUnavailable, err.Error()), false
	}
	return newProblem(CodeInternal, "the node failed to handle the request; see its log"), true
}
