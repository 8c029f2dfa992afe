package ledger

import (
	"context"

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
	// (Service.Wait) wakes only when its own key changes. A Service
	// subscribes when it is created and unsubscribes in Close.
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
