package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/clusterview"
	"github.com/intentledger/intentd/replication"
)

// Operator membership changes: an administrator removes a server that
// cannot ask for its own removal (it is dead), and moves leadership (a
// rolling restart restarts the leader last). Both run on the leader; a
// follower answers *replication.NotLeaderError, which the HTTP layer forwards.

// removedHold is how long the leader refuses to add back, from gossip, a
// server an operator removed (RemovePeer). A removed node that comes back
// with its old data dir within the hold stays out; after it, an alive
// member is added as any new member is. One that comes back with an empty
// data dir (its gossip meta says it is not bootstrapped: no Raft state,
// no leader known) is a new member at once: removed, wiped and rejoined
// is the recovery of a node whose data dir cannot be trusted, and it
// joins as a nonvoter that is promoted once caught up (leader.go). The
// hold lives in the leader's memory: a new leader does not know it. Wipe
// a removed node's data dir before it rejoins (docs/operations.md).
const removedHold = 10 * time.Minute

// The refusals of RemovePeer and TransferLeadership (clusterview's, the
// same values).
var (
	// ErrUnknownPeer is a removal or a leadership transfer naming a node
	// that is not a server of the Raft configuration.
	ErrUnknownPeer = clusterview.ErrUnknownPeer
	// ErrRemoveLeader is a removal of the leader itself: it must hand its
	// leadership over first (TransferLeadership), then be removed by the
	// new leader.
	ErrRemoveLeader = clusterview.ErrRemoveLeader
	// ErrNotVoter is a leadership transfer to a server that is not a
	// voter.
	ErrNotVoter = clusterview.ErrNotVoter
)

// removedPeers remembers the servers an operator removed, and when.
type removedPeers struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (r *removedPeers) note(id string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string]time.Time{}
	}
	r.at[id] = now
}

// held reports whether id was removed less than removedHold before now.
func (r *removedPeers) held(id string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.at[id]
	if ok && now.Sub(at) >= removedHold {
		delete(r.at, id)
		return false
	}
	return ok
}

// RemovePeer removes server id from the Raft configuration at an
// operator's request: the procedure for a node that is dead and cannot
// ask for its own removal. It runs on the leader (a follower answers
// *replication.NotLeaderError). It refuses the leader itself (ErrRemoveLeader),
// a node that is not a server (ErrUnknownPeer) and, for a voter, a removal
// after which the voters left would not include a majority the leader
// hears from (ErrNoLiveMajority, keepsLiveMajority): removing a dead voter
// is allowed exactly when the others are live. The leader then does not
// add the node back from gossip for removedHold.
func (n *Node) RemovePeer(ctx context.Context, id string) error {
	if n.stopping.Load() {
		return replication.ErrShuttingDown
	}
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	if id == n.cfg.ID {
		return fmt.Errorf("%w (%s leads)", ErrRemoveLeader, id)
	}
	n.memberMu.Lock()
	defer n.memberMu.Unlock()
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("cluster: reading the configuration: %w", err)
	}
	conf := f.Configuration()
	var s *raft.Server
	for i := range conf.Servers {
		if string(conf.Servers[i].ID) == id {
			s = &conf.Servers[i]
		}
	}
	if s == nil {
		return fmt.Errorf("%w: %q", ErrUnknownPeer, id)
	}
	if s.Suffrage == raft.Voter {
		if err := n.keepsLiveMajority(conf, id, time.Now()); err != nil {
			n.log.Warn("refused an operator's removal of a voter", "id", id, "err", err)
			return err
		}
	}
	n.removed.note(id, time.Now())
	n.log.Info("removing a server at an operator's request", "id", id, "suffrage", s.Suffrage.String())
	if err := waitFuture(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout)); err != nil {
		return fmt.Errorf("cluster: removing %s: %w", id, mapLeaderErr(err))
	}
	return nil
}

// TransferLeadership hands this leader's leadership over: to server to,
// or, when to is "", to the voter raft finds most up to date. It returns
// once raft has handed over (or failed to), with the ID of the leader
// this node knows then ("" while none is known yet). A follower answers
// *replication.NotLeaderError; a leader asked to transfer to itself keeps
// leading and answers its own ID.
func (n *Node) TransferLeadership(ctx context.Context, to string) (string, error) {
	if n.stopping.Load() {
		return "", replication.ErrShuttingDown
	}
	if n.raft.State() != raft.Leader {
		return "", n.notLeader()
	}
	if to == n.cfg.ID {
		return n.cfg.ID, nil
	}
	var fut raft.Future
	if to == "" {
		n.log.Info("handing leadership over at an operator's request")
		fut = n.raft.LeadershipTransfer()
	} else {
		f := n.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			return "", fmt.Errorf("cluster: reading the configuration: %w", err)
		}
		conf := f.Configuration()
		var s *raft.Server
		for i := range conf.Servers {
			if string(conf.Servers[i].ID) == to {
				s = &conf.Servers[i]
			}
		}
		switch {
		case s == nil:
			return "", fmt.Errorf("%w: %q", ErrUnknownPeer, to)
		case s.Suffrage != raft.Voter:
			return "", fmt.Errorf("%w: %q is a %s", ErrNotVoter, to, s.Suffrage)
		}
		n.log.Info("handing leadership over at an operator's request", "to", to)
		fut = n.raft.LeadershipTransferToServer(s.ID, s.Address)
	}
	if err := waitFuture(ctx, fut); err != nil {
		return "", fmt.Errorf("cluster: transferring leadership: %w", mapLeaderErr(err))
	}
	_, lid := n.raft.LeaderWithID()
	return string(lid), nil
}

// mapLeaderErr makes raft's "not the leader" errors the ledger's, so the
// HTTP layer answers them as it answers any write that lost its leader.
func mapLeaderErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", replication.ErrOutcomeUnknown, err)
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %w", replication.ErrNoLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", replication.ErrShuttingDown, err)
	}
	return err
}
