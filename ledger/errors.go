// Package ledger is the intent ledger's service: it validates requests,
// fingerprints payloads, turns calls into state machine commands, proposes
// them through a Replicator and reads through it. It is the domain layer
// the HTTP API consumes; the cluster implements its Replicator (declared
// in package replication, which this package re-exports). It knows
// neither HTTP nor Raft.
package ledger

import (
	"errors"
	"fmt"

	"github.com/intentledger/intentd/replication"
)

// Replication errors. A write that fails with ErrNotLeader, ErrNoLeader or
// ErrShuttingDown was definitely not applied; one that fails with
// ErrOutcomeUnknown may or may not have been, and the caller must retry
// the same (idempotent) command to learn which. They are package
// replication's, the same values under both names.
var (
	ErrNotLeader      = replication.ErrNotLeader
	ErrNoLeader       = replication.ErrNoLeader
	ErrOutcomeUnknown = replication.ErrOutcomeUnknown
	ErrShuttingDown   = replication.ErrShuttingDown
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
// forward the request there (replication.NotLeaderError).
type NotLeaderError = replication.NotLeaderError

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
