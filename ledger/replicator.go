package ledger

import "github.com/intentledger/intentd/replication"

// The replication contract is declared in package replication, a leaf the
// cluster implements without importing this service; these aliases keep
// its names here, where the service's callers look for them.

// Consistency selects how a read is served (replication.Consistency).
type Consistency = replication.Consistency

const (
	// Linearizable reads confirm leadership and wait for the local state
	// machine to catch up with the commit index noted before confirming.
	Linearizable = replication.Linearizable
	// Stale reads serve the local replica as it is, possibly behind.
	Stale = replication.Stale
)

// Replicator replicates commands, serves reads of the state machine and
// reports what each apply changed (replication.Replicator). The cluster
// package implements it (cluster.Node); ledgertest.Memory is an
// in-process one for tests.
type Replicator = replication.Replicator

// ChangeSink is told what a replicator's state machine changed
// (replication.ChangeSink).
type ChangeSink = replication.ChangeSink
