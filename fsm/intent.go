// Package fsm is the intent ledger's replicated state machine.
//
// It is a pure, deterministic function of the command log: the same
// commands at the same log indexes always produce the same state and the
// same results on every replica. It reads no clock (time arrives inside
// each command, stamped by the Raft leader), uses no randomness and does no
// I/O or logging. See DESIGN.md in this directory for why it is shaped the
// way it is.
package fsm

import "encoding/json"

// State is the lifecycle state of an intent.
type State string

// The states of an intent; transitions.go moves an intent between them
// (fsm/DESIGN.md says why).
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

// States lists every state in a stable order.
var States = []State{
	StatePendingApproval, StateApproved, StateRejected, StateDeclared,
	StateExecuted, StateFailed, StateCommitted, StateInDoubt,
}

// Valid reports whether s is a known state.
func (s State) Valid() bool {
	for _, k := range States {
		if k == s {
			return true
		}
	}
	return false
}

// Finished reports whether a record in this state may be purged once its
// dedupe window has passed. declared and in_doubt never are: purging them
// would re-open a key whose effect may have happened.
func (s State) Finished() bool {
	switch s {
	case StateExecuted, StateCommitted, StateFailed, StateRejected:
		return true
	}
	return false
}

// Outcome is what an executor (or a reconciler) reports about an effect.
type Outcome string

// The outcomes a complete or resolve may report.
const (
	OutcomeExecuted Outcome = "executed"
	OutcomeFailed   Outcome = "failed"
)

// Valid reports whether o is executed or failed.
func (o Outcome) Valid() bool { return o == OutcomeExecuted || o == OutcomeFailed }

func (o Outcome) state() State {
	if o == OutcomeExecuted {
		return StateExecuted
	}
	return StateFailed
}

// Intent is one logical side effect, identified by (Namespace, Key).
//
// An Intent is a view: the ledger stores a compact record (record.go) and
// builds a new Intent for every query and Result, so one stays valid and
// consistent after the ledger moves on. Its slices (payload, approvals)
// are shared with the stored record and must not be modified.
// Times are Unix nanoseconds taken from commands, never from a clock.
type Intent struct {
	Namespace    string          `json:"namespace"`
	Key          string          `json:"key"`
	Tool         string          `json:"tool"`
	Fingerprint  string          `json:"fingerprint"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	Owner        string          `json:"owner,omitempty"`
	State        State           `json:"state"`
	FencingToken uint64          `json:"fencing_token,omitempty"`
	Generation   uint64          `json:"generation,omitempty"`
	// LeaseMS is the lease length of the current grant.
	LeaseMS       int64           `json:"lease_ms,omitempty"`
	LeaseDeadline int64           `json:"lease_deadline,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Policy        string          `json:"policy,omitempty"`
	// PolicyVersion is the version of Policy the intent was decided under.
	PolicyVersion uint64 `json:"policy_version,omitempty"`
	// DedupeWindowMS is how long a finished record blocks reuse of its key.
	DedupeWindowMS int64 `json:"dedupe_window_ms"`
	// RequireApproval, ApprovalsRequired and Approvals carry the approval
	// gate: the intent waits in pending_approval until ApprovalsRequired
	// distinct actors (from Approvers, when the policy names them) approve.
	RequireApproval   bool       `json:"require_approval,omitempty"`
	ApprovalsRequired int        `json:"approvals_required,omitempty"`
	Approvers         []string   `json:"approvers,omitempty"`
	Approvals         []Approval `json:"approvals,omitempty"`
	// TokenTTLMS is the lifetime of the execution token of a grant, and
	// TokenUsed the fencing token whose execution token was spent.
	TokenTTLMS int64  `json:"token_ttl_ms,omitempty"`
	TokenUsed  uint64 `json:"token_used,omitempty"`
	// GrantedAt is when the current grant was made: its execution token
	// is issued at this time, signed by the key TokenKey names (the
	// newest signing key at the grant), so a grant answered twice carries
	// the same token even across a key rotation.
	GrantedAt int64  `json:"granted_at,omitempty"`
	TokenKey  string `json:"token_key,omitempty"`
	// Principal is the API key (its name) the intent is bound to: the one
	// whose claim made the current grant, or, before any grant, the one
	// whose claim created the intent. Only it, or a key whose roles allow
	// settling others' grants, may complete, renew or commit the grant,
	// and it may not approve its own claim unless the policy allows it.
	// Empty: bound to no key (development mode); owner and fencing token
	// decide.
	Principal string `json:"principal,omitempty"`
	CreatedAt int64  `json:"created_at"`
	// UpdatedAt is the time of the last state change; the dedupe window
	// runs from here.
	UpdatedAt  int64  `json:"updated_at"`
	Duplicates uint64 `json:"duplicates,omitempty"`
	Divergent  uint64 `json:"divergent,omitempty"`
	// Version is the log index of the last command that changed the record
	// in any way (including an audited refusal).
	Version      uint64       `json:"version"`
	Audit        []AuditEvent `json:"audit,omitempty"`
	AuditDropped uint64       `json:"audit_dropped,omitempty"`
}

// AuditEvent records one attempt on a key: every claim (granted, duplicate,
// in_flight, divergent ...), completion, renewal, commit, resolve,
// approval and lease expiry.
type AuditEvent struct {
	Index        uint64  `json:"index"`
	At           int64   `json:"at"`
	Op           string  `json:"op"`
	Status       Status  `json:"status"`
	State        State   `json:"state"`
	Owner        string  `json:"owner,omitempty"`
	Actor        string  `json:"actor,omitempty"`
	Fingerprint  string  `json:"fingerprint,omitempty"`
	FencingToken uint64  `json:"fencing_token,omitempty"`
	Outcome      Outcome `json:"outcome,omitempty"`
	Reason       string  `json:"reason,omitempty"`
}

// Approval is one approver's approval of a pending intent.
type Approval struct {
	Actor  string `json:"actor"`
	At     int64  `json:"at"`
	Reason string `json:"reason,omitempty"`
}

// Ref names an intent.
type Ref struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
}
