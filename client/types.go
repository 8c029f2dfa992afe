package client

import (
	"encoding/json"
	"time"
)

// State is the lifecycle state of an intent.
type State string

// The states of an intent.
const (
	StatePendingApproval State = "pending_approval"
	StateApproved        State = "approved"
	StateRejected        State = "rejected"
	StateDeclared        State = "declared"
	StateExecuted        State = "executed"
	StateFailed          State = "failed"
	StateCommitted       State = "committed"
	StateInDoubt         State = "in_doubt"
)

// Status is the word a successful answer carries.
type Status string

// Success statuses. Refusals come back as a *Problem error instead.
const (
	// StatusGranted: the caller holds the intent and may execute the
	// effect, once, with the fencing token.
	StatusGranted Status = "granted"
	// StatusDuplicate: the effect already ran; use the recorded result and
	// do not execute.
	StatusDuplicate Status = "duplicate"
	// StatusPendingApproval: the intent waits for an approver.
	StatusPendingApproval Status = "pending_approval"
	// StatusOK: the call was applied (or already had been).
	StatusOK Status = "ok"
)

// Outcome is what an executor or reconciler reports about an effect.
type Outcome string

// The outcomes Complete and Resolve accept.
const (
	OutcomeExecuted Outcome = "executed"
	OutcomeFailed   Outcome = "failed"
)

// Intent is one logical side effect as the ledger records it.
type Intent struct {
	Key       string `json:"key"`
	Namespace string `json:"namespace"`
	Tool      string `json:"tool"`
	State     State  `json:"state"`
	Owner     string `json:"owner,omitempty"`
	// Principal is the API key the grant (or the pending intent) is bound
	// to; empty when auth is off.
	Principal    string          `json:"principal,omitempty"`
	FencingToken uint64          `json:"fencing_token"`
	Generation   uint64          `json:"generation"`
	Fingerprint  string          `json:"fingerprint"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	Policy       string          `json:"policy,omitempty"`
	// PolicyVersion is the version of Policy the intent was decided under.
	PolicyVersion uint64 `json:"policy_version,omitempty"`
	// ApprovalsRequired and Approvals show the approval gate.
	ApprovalsRequired int        `json:"approvals_required,omitempty"`
	Approvals         []Approval `json:"approvals,omitempty"`
	// TokenUsed says the current grant's execution token was spent.
	TokenUsed bool  `json:"token_used,omitempty"`
	LeaseMS   int64 `json:"lease_ms,omitempty"`
	// LeaseDeadline is zero when the intent holds no lease.
	LeaseDeadline time.Time `json:"lease_deadline,omitzero"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	Duplicates    uint64    `json:"duplicates"`
	Divergent     uint64    `json:"divergent"`
	// Version is the log index of the last change to the record.
	Version uint64 `json:"version"`
}

// ClaimRequest asks for the right to execute an effect.
type ClaimRequest struct {
	// Key names the logical effect, from the business entity
	// ("refund:ord_98231"), never a random value per attempt.
	Key     string
	Tool    string
	Payload json.RawMessage
	// Owner names this one execution attempt. Empty means Claim makes a
	// fresh one with NewOwner; it is returned in ClaimResponse.Owner.
	Owner  string
	Policy string
	// Lease is how long the grant holds without a report; zero takes the
	// server's default.
	Lease time.Duration
}

// ClaimResponse is a successful claim: granted, duplicate or
// pending_approval. Refusals (in_flight, in_doubt, divergent ...) are
// returned as errors.
type ClaimResponse struct {
	Status Status `json:"status"`
	// FencingToken and ExecutionToken are set when Status is granted.
	FencingToken   uint64  `json:"fencing_token,omitempty"`
	ExecutionToken string  `json:"execution_token,omitempty"`
	Intent         *Intent `json:"intent"`
	// Created is true when this claim granted a new generation (HTTP 201)
	// rather than returning an earlier grant to the same owner.
	Created bool `json:"-"`
	// Owner is the owner the claim was made with.
	Owner string `json:"-"`
}

// CompleteRequest reports the outcome of an effect by its owner.
type CompleteRequest struct {
	Key          string
	Owner        string
	FencingToken uint64
	Outcome      Outcome
	Result       json.RawMessage
}

// RenewRequest extends the owner's lease.
type RenewRequest struct {
	Key          string
	Owner        string
	FencingToken uint64
	Lease        time.Duration
}

// CommitRequest acknowledges an executed intent's result.
type CommitRequest struct {
	Key   string
	Owner string
}

// ResolveRequest settles an in_doubt intent after someone checked the
// tool's side.
type ResolveRequest struct {
	Key     string
	Outcome Outcome
	Result  json.RawMessage
	Actor   string
	Reason  string
}

// DecisionRequest approves or rejects a pending intent.
type DecisionRequest struct {
	Key    string
	Actor  string
	Reason string
	// Fingerprint, when set, binds the decision to the payload the
	// decider saw: the ledger refuses it (divergent) if the intent's
	// fingerprint differs.
	Fingerprint string
}

// IntentResponse is the answer of a successful call about one intent.
type IntentResponse struct {
	Status Status  `json:"status"`
	Intent *Intent `json:"intent"`
}

// GetOptions tune Get.
type GetOptions struct {
	// Stale reads the answering node's replica, possibly behind, instead of
	// a linearizable read through the leader.
	Stale bool
}

// ListOptions select a page of intents.
type ListOptions struct {
	State  State
	Prefix string
	// Limit is the page size; zero takes the server's default.
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
	Stale  bool
}

// ListPage is one page of intents in key order.
type ListPage struct {
	Intents []*Intent `json:"intents"`
	// NextCursor continues the listing; empty at the end.
	NextCursor string `json:"next_cursor"`
}

// AuditEvent is one recorded attempt on a key.
type AuditEvent struct {
	Index        uint64    `json:"index"`
	At           time.Time `json:"at"`
	Op           string    `json:"op"`
	Status       string    `json:"status"`
	State        State     `json:"state"`
	Owner        string    `json:"owner,omitempty"`
	Actor        string    `json:"actor,omitempty"`
	Fingerprint  string    `json:"fingerprint,omitempty"`
	FencingToken uint64    `json:"fencing_token,omitempty"`
	Outcome      Outcome   `json:"outcome,omitempty"`
	Reason       string    `json:"reason,omitempty"`
}

// AuditTrail is every attempt on one key, oldest first.
type AuditTrail struct {
	Key       string       `json:"key"`
	Namespace string       `json:"namespace"`
	Events    []AuditEvent `json:"events"`
	// Dropped counts the oldest events the ledger no longer keeps.
	Dropped uint64 `json:"dropped"`
}

// Approval is one approver's approval of a pending intent.
type Approval struct {
	Actor  string    `json:"actor"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}
