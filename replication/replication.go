// Package replication is the contract between the ledger service and what
// replicates its state machine: the Replicator interface the service
// proposes and reads through, the ChangeSink it is told of changes by, the
// read consistencies, and the errors of a replicated write. The cluster
// package implements it (cluster.Node), ledgertest.Memory in process.
//
// It is a leaf under both, so the cluster does not import the ledger
// service: package ledger re-exports every name here (ledger.Replicator,
// ledger.ErrNoLeader, ...) as aliases, and errors.Is holds across both
// spellings.
package replication

import (
	"context"
	"errors"
	"fmt"

	"github.com/intentledger/intentd/fsm"
)

// Consistency selects how a read is served.
type Consistency int

const (
	// Linearizable reads confirm leadership and wait for the local state
	// machine to catch up with the commit index noted before confirming.
	Linearizable Consistency = iota
	// Stale reads serve the local replica as it is, possibly behind.
	Stale
)

// Replicator replicates commands, serves reads of the state machine and
// reports what each apply changed. The cluster package implements it
// (cluster.Node); ledgertest.Memory is an in-process one for tests.
type Replicator interface {
	// Propose appends cmd to the replicated log (the leader stamps its
	// time) and returns the state machine's answer once applied (on a
	// follower: the leader's state machine's answer).
	Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error)
	// WaitApplied waits until this node's state machine reflects the log
	// up to index, or ctx ends. A proposal's answer may come from another
	// node's state machine (a follower forwards its proposals to the
	// leader), so this replica may not have applied it yet.
	WaitApplied(ctx context.Context, index uint64) error
	// Read runs fn against the state machine at the requested consistency.
	// fn must not keep the ledger after it returns (intents it returns are
	// immutable and may be kept).
	Read(ctx context.Context, c Consistency, fn func(*fsm.Machine)) error
	// SubscribeChanges makes the replicator report every later change of
	// its state machine to sink, until unsubscribe is called: which
	// intents each apply may have changed, so that a long-poll
	// (ledger.Service.Wait) wakes only when its own key changes. A
	// Service subscribes when it is created and unsubscribes in Close.
	SubscribeChanges(sink ChangeSink) (unsubscribe func())
}

// ChangeSink is told what a replicator's state machine changed. It is called
// after the change is visible to reads, in apply order, on the replicator's
// apply path: it must return quickly, must not block and must not call back
// into the replicator.
type ChangeSink interface {
	// KeysChanged reports the intents an apply may have changed (a
	// superset: see fsm.Touched). keys is only valid during the call.
	KeysChanged(keys []fsm.Ref)
	// AllChanged reports that any intent may have changed: the state was
	// replaced (a snapshot was restored) or an entry did not say what it
	// touched.
	AllChanged()
}

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
