package httpapi

import (
	"encoding/json"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// intentView is an intent as the API shows it: the state machine's record
// with times as RFC 3339 strings and without the audit trail (which has
// its own endpoint).
type intentView struct {
	Key           string          `json:"key"`
	Namespace     string          `json:"namespace"`
	Tool          string          `json:"tool"`
	State         fsm.State       `json:"state"`
	Owner         string          `json:"owner,omitempty"`
	FencingToken  uint64          `json:"fencing_token"`
	Generation    uint64          `json:"generation"`
	Fingerprint   string          `json:"fingerprint"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Policy        string          `json:"policy,omitempty"`
	LeaseMS       int64           `json:"lease_ms,omitempty"`
	LeaseDeadline string          `json:"lease_deadline,omitempty"`
	CreatedAt     string          `json:"created_at"`
	UpdatedAt     string          `json:"updated_at"`
	Duplicates    uint64          `json:"duplicates"`
	Divergent     uint64          `json:"divergent"`
	Version       uint64          `json:"version"`
	// PolicyVersion is the version of Policy the intent was decided under.
	PolicyVersion uint64 `json:"policy_version,omitempty"`
	// ApprovalsRequired and Approvals show the approval gate.
	ApprovalsRequired int            `json:"approvals_required,omitempty"`
	Approvals         []approvalView `json:"approvals,omitempty"`
	// TokenUsed says the current grant's execution token was spent.
	TokenUsed bool `json:"token_used,omitempty"`
	// Principal is the API key the intent is bound to (omitted when none):
	// only it, or a reconciler, may complete, renew or commit the grant.
	Principal string `json:"principal,omitempty"`
}

// approvalView is one approval.
type approvalView struct {
	Actor  string `json:"actor"`
	At     string `json:"at"`
	Reason string `json:"reason,omitempty"`
}

// formatTime renders Unix nanoseconds as RFC 3339 with nanoseconds, UTC;
// zero renders as "".
func formatTime(unixNano int64) string {
	if unixNano == 0 {
		return ""
	}
	return time.Unix(0, unixNano).UTC().Format(time.RFC3339Nano)
}

func newIntentView(in *fsm.Intent) *intentView {
	if in == nil {
		return nil
	}
	return &intentView{
		Key:           in.Key,
		Namespace:     in.Namespace,
		Tool:          in.Tool,
		State:         in.State,
		Owner:         in.Owner,
		FencingToken:  in.FencingToken,
		Generation:    in.Generation,
		Fingerprint:   in.Fingerprint,
		Payload:       in.Payload,
		Result:        in.Result,
		Policy:        in.Policy,
		LeaseMS:       in.LeaseMS,
		LeaseDeadline: formatTime(in.LeaseDeadline),
		CreatedAt:     formatTime(in.CreatedAt),
		UpdatedAt:     formatTime(in.UpdatedAt),
		Duplicates:    in.Duplicates,
		Divergent:     in.Divergent,
		Version:       in.Version,

		PolicyVersion:     in.PolicyVersion,
		ApprovalsRequired: in.ApprovalsRequired,
		Approvals:         approvals(in.Approvals),
		TokenUsed:         in.TokenUsed != 0 && in.TokenUsed == in.FencingToken,
		Principal:         in.Principal,
	}
}

func approvals(as []fsm.Approval) []approvalView {
	if len(as) == 0 {
		return nil
	}
	out := make([]approvalView, len(as))
	for i, a := range as {
		out[i] = approvalView{Actor: a.Actor, At: formatTime(a.At), Reason: a.Reason}
	}
	return out
}

// auditEventView is an fsm.AuditEvent with its time as RFC 3339.
type auditEventView struct {
	Index        uint64      `json:"index"`
	At           string      `json:"at"`
	Op           string      `json:"op"`
	Status       fsm.Status  `json:"status"`
	State        fsm.State   `json:"state"`
	Owner        string      `json:"owner,omitempty"`
	Actor        string      `json:"actor,omitempty"`
	Fingerprint  string      `json:"fingerprint,omitempty"`
	FencingToken uint64      `json:"fencing_token,omitempty"`
	Outcome      fsm.Outcome `json:"outcome,omitempty"`
	Reason       string      `json:"reason,omitempty"`
}

// auditView is the answer of GET /v1/intents/{key}/audit.
type auditView struct {
	Key       string           `json:"key"`
	Namespace string           `json:"namespace"`
	Events    []auditEventView `json:"events"`
	// Dropped counts the oldest events no longer kept.
	Dropped uint64 `json:"dropped"`
}

func newAuditView(in *fsm.Intent) *auditView {
	v := &auditView{Key: in.Key, Namespace: in.Namespace, Events: make([]auditEventView, 0, len(in.Audit)),
		Dropped: in.AuditDropped}
	for _, ev := range in.Audit {
		v.Events = append(v.Events, auditEventView{
			Index: ev.Index, At: formatTime(ev.At), Op: ev.Op, Status: ev.Status, State: ev.State, Owner: ev.Owner,
			Actor: ev.Actor, Fingerprint: ev.Fingerprint, FencingToken: ev.FencingToken, Outcome: ev.Outcome,
			Reason: ev.Reason,
		})
	}
	return v
}

// claimResponse is the success body of POST /v1/intents.
type claimResponse struct {
	Status         fsm.Status  `json:"status"`
	FencingToken   uint64      `json:"fencing_token,omitempty"`
	ExecutionToken string      `json:"execution_token,omitempty"`
	Intent         *intentView `json:"intent"`
}

// intentResponse is the success body of every other call about one intent.
type intentResponse struct {
	Status fsm.Status  `json:"status"`
	Intent *intentView `json:"intent"`
}

// listResponse is the body of GET /v1/intents.
type listResponse struct {
	Intents    []*intentView `json:"intents"`
	NextCursor string        `json:"next_cursor"`
}
