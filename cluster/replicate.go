package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/faults"
	"github.com/intentledger/intentd/replication"
)

// Propose implements replication.Replicator. The leader stamps the command
// with its clock (never earlier than its previous stamp), appends it and
// waits for the state machine's answer; a follower encodes it and
// forwards it to the leader, which does the same and answers (forward.go).
//
// Errors are definite or unknown, never confused: ErrNoLeader and
// ErrShuttingDown mean the command was not appended; ErrOutcomeUnknown
// means it may still commit (leadership was lost after appending, the node
// or the connection to the leader failed, or ctx ended while waiting).
func (n *Node) Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	if n.stopping.Load() {
		return nil, replication.ErrShuttingDown
	}
	if n.raft.State() != raft.Leader {
		return n.proposeVia(ctx, cmd)
	}
	data, err := fsm.Encode(n.stamp(), cmd)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	sctx, span := n.startSpan(ctx, SpanCommit, trace.SpanKindInternal, attribute.String("intentd.node", n.cfg.ID), commandAttr(cmd.Type()))
	f := n.raft.Apply(data, n.cfg.ApplyTimeout)
	err = n.awaitApply(sctx, f)
	if errors.Is(err, raft.ErrNotLeader) {
		// Refused before it was appended: this node stepped down in
		// between. Forward it to whoever leads now.
		endSpan(span, err)
		return n.proposeVia(ctx, cmd)
	}
	if err != nil {
		err = n.mapApplyError(err)
		endSpan(span, err)
		return nil, err
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("raft.log.index", int64(f.Index())))
	}
	endSpan(span, nil)
	r, ok := f.Response().(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("cluster: state machine answered %T", f.Response())
	}
	return r, nil
}

// awaitApply waits for Raft's answer to an applied command, ctx, or the
// end of Raft's shutdown; the last two are ErrOutcomeUnknown (the command
// may be in the log). hashicorp/raft (with BatchApplyCh) never answers a
// command still in its apply queue when it shuts down, so a wait on the
// future alone could last for ever: a leader's Kill waited so on the
// commands followers had forwarded.
func (n *Node) awaitApply(ctx context.Context, f raft.ApplyFuture) error {
	err := waitFutureUntil(ctx, f, n.raftStopped)
	switch {
	case errors.Is(err, errRaftStopped):
		return fmt.Errorf("%w: %w", replication.ErrOutcomeUnknown, err)
	case err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return fmt.Errorf("%w: %w while waiting for the log to commit", replication.ErrOutcomeUnknown, err)
	}
	return err
}

// WaitApplied implements replication.Replicator: it waits until this node's
// state machine reflects the log up to index (an answer the leader gave
// to a command this node forwarded is at an index this replica may not
// have applied yet).
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	return n.waitApplied(ctx, index)
}

// mapApplyError sorts raft's errors into definite and unknown outcomes.
func (n *Node) mapApplyError(err error) error {
	switch {
	case errors.Is(err, replication.ErrOutcomeUnknown):
		return err // awaitApply's: the wait ended first
	case errors.Is(err, raft.ErrNotLeader):
		// Returned before the entry is appended: definite.
		return n.notLeader()
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", replication.ErrNoLeader, err)
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %w", replication.ErrNoLeader, err)
	case n.cfg.Faults.Has(faults.LeadershipLostIsFailure) && errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", replication.ErrNoLeader, err) // seeded bug: unknown reported as definite
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		// Appended locally, maybe replicated: a new leader may commit it.
		return fmt.Errorf("%w: %w", replication.ErrOutcomeUnknown, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		// Shutdown may interrupt an appended entry: unknown.
		return fmt.Errorf("%w: %w", replication.ErrOutcomeUnknown, err)
	}
	return fmt.Errorf("%w: %w", replication.ErrOutcomeUnknown, err)
}

// leaderAddrWait bounds how long a follower waits for the leader to tell
// it its HTTP address before it answers without one.
const leaderAddrWait = time.Second

func (n *Node) notLeader() error {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return replication.ErrNoLeader
	}
	// The leader's HTTP address is the one it told this node itself over
	// its Raft address (waiting briefly for a first answer): never
	// gossip's, which anyone with the gossip key can forge. Without one the
	// caller gets no address to forward to (the HTTP layer answers 503,
	// and clients retry on another node).
	e := &replication.NotLeaderError{LeaderID: string(id)}
	e.LeaderHTTP = n.provenHTTP(string(id), string(addr), leaderAddrWait)
	return e
}

// SubscribeChanges implements replication.Replicator: after every batch this
// node's state machine applies, sink learns which intents it may have
// changed (fsm.Touched), and after it restores a snapshot, that all may
// have. Every node reports its own applies, so long-polls on a follower
// (stale reads) wake as its replica catches up.
func (n *Node) SubscribeChanges(sink replication.ChangeSink) (unsubscribe func()) {
	return n.sm.subscribe(sink)
}

// Read implements replication.Replicator. A stale read serves the local state
// machine. A linearizable read (leader only) notes the commit index,
// confirms leadership with a quorum (VerifyLeader), checks the term did not
// change and waits until the state machine has applied the noted index; a
// new leader serves none before its term's barrier has applied.
func (n *Node) Read(ctx context.Context, c replication.Consistency, fn func(*fsm.Machine)) error {
	if c == replication.Stale || n.cfg.Faults.Has(faults.StaleReads) {
		n.sm.read(fn)
		return nil
	}
	if n.stopping.Load() {
		return replication.ErrShuttingDown
	}
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	term := n.raft.CurrentTerm()
	if n.readyTerm.Load() != term {
		return fmt.Errorf("%w: leader of term %d has not finished its barrier", replication.ErrNoLeader, term)
	}
	readIndex := n.raft.CommitIndex()
	if err := waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", replication.ErrNoLeader, err)
		}
		return n.notLeader()
	}
	if n.raft.CurrentTerm() != term {
		return fmt.Errorf("%w: term changed during read", replication.ErrNoLeader)
	}
	if err := n.waitApplied(ctx, readIndex); err != nil {
		return err
	}
	n.sm.read(fn)
	return nil
}

// waitApplied waits until the state machine reflects every log entry up to
// index. Entries the FSM never sees (no-ops, barriers) are skipped by
// looking them up in the log store; an entry already compacted away is in
// a snapshot the state machine holds.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for {
		applied, changed := n.sm.appliedIndex()
		if applied >= index || n.onlyNonFSMEntries(applied, index) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the state machine to apply index %d: %w", replication.ErrNoLeader, index, ctx.Err())
		case <-n.ctx.Done():
			return replication.ErrShuttingDown
		}
	}
}

// onlyNonFSMEntries reports whether no entry in (applied, index] is one the
// state machine applies. An entry past the local log (a follower waiting
// for an index the leader answered) has not arrived yet: it may be one.
func (n *Node) onlyNonFSMEntries(applied, index uint64) bool {
	const maxScan = 16
	if index-applied > maxScan || index > n.raft.LastIndex() {
		return false
	}
	var l raft.Log
	for i := index; i > applied; i-- {
		if err := n.logs.GetLog(i, &l); err != nil {
			return errors.Is(err, raft.ErrLogNotFound)
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return false
		}
	}
	return true
}

// Digest returns the hex SHA-256 of the local state machine (equal on
// replicas that applied the same log) and the index it reflects.
func (n *Node) Digest() (digest string, applied uint64) {
	n.sm.read(func(l *fsm.Machine) { digest, applied = l.Digest(), l.AppliedIndex() })
	return digest, applied
}
