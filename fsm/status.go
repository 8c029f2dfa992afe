package fsm

import (
	"errors"
	"fmt"
)

// Status is the answer of the ledger to one command. Success statuses
// (granted, duplicate, pending_approval, ok) carry the intent; refusals
// name why nothing (beyond the audit trail) changed.
type Status string

// Statuses returned by Apply.
const (
	StatusGranted         Status = "granted"
	StatusDuplicate       Status = "duplicate"
	StatusPendingApproval Status = "pending_approval"
	StatusOK              Status = "ok"
	StatusInFlight        Status = "in_flight"
	StatusInDoubt         Status = "in_doubt"
	StatusDivergent       Status = "divergent"
	StatusFenced          Status = "fenced"
	StatusRejected        Status = "rejected"
	StatusNotFound        Status = "not_found"
	StatusInvalidState    Status = "invalid_state"
	StatusNotPending      Status = "not_pending_approval"
	StatusExpired         Status = "lease_expired"
	StatusPurged          Status = "purged"
	StatusIgnored         Status = "ignored"
	StatusBlocked         Status = "blocked"
	StatusUnknownPolicy   Status = "unknown_policy"
	StatusTooLarge        Status = "too_large"
	StatusVersionMismatch Status = "version_mismatch"
	StatusAlreadyApproved Status = "already_approved"
	StatusNotAnApprover   Status = "not_an_approver"
	StatusTokenUsed       Status = "token_used"
	StatusTokenExpired    Status = "token_expired"
	StatusTokenMismatch   Status = "token_mismatch"
	StatusMalformed       Status = "malformed_command"
)

// Sentinel errors for refusals, so callers can use errors.Is.
var (
	ErrInFlight     = errors.New("intent is in flight under another owner")
	ErrInDoubt      = errors.New("intent is in doubt: its lease passed without a report")
	ErrDivergent    = errors.New("payload differs from the recorded intent")
	ErrFenced       = errors.New("stale owner or fencing token")
	ErrRejected     = errors.New("intent was rejected")
	ErrNotFound     = errors.New("intent not found")
	ErrInvalidState = errors.New("operation not allowed in the intent's state")
	ErrNotPending   = errors.New("intent is not pending approval")
	ErrMalformed    = errors.New("malformed command")

	ErrBlocked         = errors.New("the policy blocks this tool")
	ErrTooLarge        = errors.New("payload is over the policy's limit")
	ErrVersionMismatch = errors.New("version does not match")
	ErrAlreadyApproved = errors.New("this approver already approved")
	ErrNotAnApprover   = errors.New("actor is not an approver of the policy")
	ErrTokenUsed       = errors.New("execution token already used")
	ErrTokenExpired    = errors.New("execution token expired")
	ErrTokenMismatch   = errors.New("execution token does not match the payload or intent")
)

// The refusals of a grant's binding to the API key that claimed it
// (DESIGN.md, "A grant is bound to the API key that claimed it").
const (
	// StatusNotGrantHolder refuses a complete, renew or commit, or a
	// repeated claim, by an API key other than the one the grant is
	// bound to (Intent.Principal), unless the key may settle others'
	// grants (Override).
	StatusNotGrantHolder Status = "not_grant_holder"
	// StatusSelfApproval refuses an approval by the API key whose claim
	// the intent waits for, unless its policy sets allow_self_approval.
	StatusSelfApproval Status = "self_approval"
)

// Sentinel errors of the binding's refusals, for errors.Is on Result.Err.
var (
	ErrNotGrantHolder = errors.New("the grant is bound to another API key")
	ErrSelfApproval   = errors.New("the claimant may not approve its own intent")
)

var statusErr = map[Status]error{
	StatusInFlight:     ErrInFlight,
	StatusInDoubt:      ErrInDoubt,
	StatusDivergent:    ErrDivergent,
	StatusFenced:       ErrFenced,
	StatusRejected:     ErrRejected,
	StatusNotFound:     ErrNotFound,
	StatusInvalidState: ErrInvalidState,
	StatusNotPending:   ErrNotPending,
	StatusMalformed:    ErrMalformed,

	StatusBlocked:         ErrBlocked,
	StatusUnknownPolicy:   ErrUnknownPolicy,
	StatusTooLarge:        ErrTooLarge,
	StatusVersionMismatch: ErrVersionMismatch,
	StatusAlreadyApproved: ErrAlreadyApproved,
	StatusNotAnApprover:   ErrNotAnApprover,
	StatusTokenUsed:       ErrTokenUsed,
	StatusTokenExpired:    ErrTokenExpired,
	StatusTokenMismatch:   ErrTokenMismatch,

	StatusNotGrantHolder: ErrNotGrantHolder,
	StatusSelfApproval:   ErrSelfApproval,
}

// Result is what applying one command produced.
type Result struct {
	Status Status
	// Intent is the record after the command (nil if there is none): a view
	// whose slices are shared with the ledger and must not be modified.
	Intent *Intent
	// Created is true when this command granted a new generation.
	Created bool
	// Detail explains a refusal in words.
	Detail string
	// Fingerprint is the fingerprint the command carried (for divergent
	// answers, which show both).
	Fingerprint string
	// Index is the log index the command was applied at.
	Index uint64
	// Count is the number of records a sweep command changed.
	Count int
	// Policy is the policy a policy command stored or removed.
	Policy *Policy
	// Local is true for a duplicate a node answered from its own copy of
	// the ledger (Machine.LocalDuplicate), or a refusal or divergent claim
	// the leader answered from its state (Machine.LocalRefusal,
	// Machine.LocalDivergent), without proposing anything.
	Local bool
	// Attempt is, for an in_flight refusal the leader answered from its
	// state, how many times the claim's owner has been refused on that
	// grant lately (1 for the first); 0 when the log answered. The HTTP
	// API grows its Retry-After hint with it.
	Attempt uint64
}

// Err returns nil for a success status and a *RefusalError wrapping the
// status's sentinel error otherwise.
func (r *Result) Err() error {
	if r == nil {
		return nil
	}
	sentinel, ok := statusErr[r.Status]
	if !ok {
		return nil
	}
	return &RefusalError{Status: r.Status, Detail: r.Detail, Intent: r.Intent, err: sentinel}
}

// RefusalError is a definite refusal by the state machine.
type RefusalError struct {
	Status Status
	Detail string
	Intent *Intent
	err    error
}

func (e *RefusalError) Error() string {
	if e.Detail == "" {
		return e.err.Error()
	}
	return fmt.Sprintf("%s: %s", e.err.Error(), e.Detail)
}

// Unwrap returns the sentinel error for the status.
func (e *RefusalError) Unwrap() error { return e.err }
