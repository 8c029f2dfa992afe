// Package ledger is the intent ledger's service: it validates requests,
// fingerprints payloads, turns calls into state machine commands, proposes
// them through a Replicator and reads through it. It is the domain layer
// the HTTP API consumes and the cluster implements; it knows neither HTTP
// nor Raft.
package ledger

import (
	"errors"
	"fmt"
)

// Replication errors. A write that fails with ErrNotLeader, ErrNoLeader or
// ErrShuttingDown was definitely not applied; one that fails with
// ErrOutcomeUnknown may or may not have been, and the caller must retry
// the same (idempotent) command to learn which.
var (
	ErrNotLeader      = errors.New("this node is not the leader")
	ErrNoLeader       = errors.New("the cluster has no leader")
	ErrOutcomeUnknown = errors.New("the outcome of the write is unknown")
	ErrShuttingDown   = errors.New("the node is shutting down")
)

// Request errors: bad input that changed nothing.
var (
	ErrBadRequest    = errors.New("bad request")
	ErrTooLarge      = errors.New("too large")
	ErrUnprocessable = errors.New("unprocessable request")
)

// ErrTooManyWaiters refuses a long-poll (Service.Wait) that would have to
// wait while Limits.MaxWaiters long-polls already wait on the node,
// Limits.MaxWaitersPerKey on its key, or Limits.MaxWaitersPerCaller of its
// caller. Nothing was written; retry later, or read without waiting.
var ErrTooManyWaiters = errors.New("too many long-polls waiting")

// NotLeaderError says which node leads, when known, so a caller can
// forward the request there.
type NotLeaderError struct {
	LeaderID   string
	LeaderHTTP string
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return ErrNotLeader.Error() + " (leader unknown)"
	}
	if e.LeaderHTTP == "" {
		return fmt.Sprintf("%s (leader is %s; its HTTP address is not known here yet)", ErrNotLeader, e.LeaderID)
	}
	return fmt.Sprintf("%s (leader is %s at %s)", ErrNotLeader, e.LeaderID, e.LeaderHTTP)
}

// Unwrap makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// FieldError is bad input in one field.
type FieldError struct {
	Field  string
	Detail string
	Kind   error // ErrBadRequest, ErrTooLarge or ErrUnprocessable
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Detail) }

// Unwrap returns the kind of bad input.
func (e *FieldError) Unwrap() error { return e.Kind }

func badField(kind error, field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Detail: fmt.Sprintf(format, args...), Kind: kind}
}
