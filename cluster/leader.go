package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/faults"
	"github.com/intentledger/intentd/replication"
)

// verifyBackoff is how long reconcile waits before it checks a member that
// failed the node identity check again.
const verifyBackoff = 30 * time.Second

// sweepBatch bounds the keys in one Expire or Purge command.
const sweepBatch = 256

// observeLeadership follows Raft's ordered leadership notifications and
// runs the leader's duties for exactly as long as this node leads.
func (n *Node) observeLeadership() {
	defer n.wg.Done()
	var d duties
	defer d.stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case isLeader := <-n.notifyCh:
			if isLeader {
				n.markBootstrapped()
				d.start(n.ctx, n.lead)
			} else {
				n.readyTerm.Store(0)
				d.stop()
			}
		}
	}
}

// duties runs one function for as long as leadership lasts.
type duties struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (d *duties) start(parent context.Context, fn func(context.Context)) {
	if d.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(parent)
	d.cancel = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		fn(ctx)
	}()
}

func (d *duties) stop() {
	if d.cancel == nil {
		return
	}
	d.cancel()
	d.wg.Wait()
	d.cancel = nil
}

// lead runs while this node is the leader: first a barrier, so the state
// machine has applied everything committed by earlier terms before any
// linearizable read is served, then membership reconciliation and sweeps.
func (n *Node) lead(ctx context.Context) {
	term := n.raft.CurrentTerm()
	n.log.Info("became leader", "term", term)
	for {
		err := waitFuture(ctx, n.raft.Barrier(n.cfg.ApplyTimeout))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("leader barrier failed; retrying", "err", err)
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return
		}
	}
	if n.raft.CurrentTerm() != term || n.raft.State() != raft.Leader {
		return
	}
	n.readyTerm.Store(term)
	n.log.Info("leader ready", "term", term, "applied", n.raft.AppliedIndex())
	// unverified remembers the members whose Raft address failed the node
	// identity check, and when, so reconcile warns once and does not probe
	// a refused address on every round.
	unverified := map[string]time.Time{}

	reconcile := time.NewTicker(n.cfg.ReconcileInterval)
	defer reconcile.Stop()
	sweep := time.NewTicker(n.cfg.SweepInterval)
	defer sweep.Stop()
	place := newPlacement(n, time.Now())
	defer n.placementState.Store(nil)
	n.reconcile(ctx, unverified)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.gossip.changed:
			n.reconcile(ctx, unverified)
		case <-reconcile.C:
			n.reconcile(ctx, unverified)
			place.step(ctx, time.Now())
		case <-sweep.C:
			n.sweep(ctx)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// reconcile adds, as Consul's leader does, the alive gossip members
// missing from the Raft configuration: as nonvoters, promoted to voters
// once they caught up (promoteCaughtUp), or, for members that announce
// themselves replicas, as nonvoters for good (a member announcing that it
// is leaving is not added, nor one whose cluster name or KEK differs from
// the leader's: checkIdentity). With TLS a member is added only once its Raft
// address proved the node identity it claims (verifyServer; a refusal is
// remembered in unverified and retried after verifyBackoff).
//
// Gossip never changes a server already in the configuration: anyone with
// the gossip key can forge a member's state and meta (an alive message
// with a higher incarnation, then a leave), which used to remove or demote
// voters and move their addresses. A server leaves, changes role or moves
// at its own request over its Raft port (membership.go); a member that
// merely failed stays, as it always did.
func (n *Node) reconcile(ctx context.Context, unverified map[string]time.Time) {
	defer n.reconciles.Add(1)
	n.gossip.recordSelf(n.gossipAddr)
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	servers := map[string]raft.Server{}
	voters := 0
	for _, s := range f.Configuration().Servers {
		servers[string(s.ID)] = s
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	for _, m := range n.gossip.snapshot() {
		if n.cfg.Faults.Has(faults.TrustGossipLeave) {
			voters = n.reconcileTrustingGossip(ctx, m, servers, voters)
		}
		if _, inConf := servers[m.meta.ID]; inConf || m.state != memberlist.StateAlive || m.meta.Leaving {
			continue
		}
		if m.meta.Bootstrapped && n.removed.held(m.meta.ID, time.Now()) {
			continue // an operator removed it, and it came back with its old state (peers.go)
		}
		n.addMember(ctx, m, unverified)
	}
	n.promoteCaughtUp(ctx, servers)
	n.warnEvenVoters(voters)
}

// addMember adds gossip member m to the configuration once its Raft address
// proved its node identity (with TLS).
func (n *Node) addMember(ctx context.Context, m member, unverified map[string]time.Time) {
	if at, ok := unverified[m.meta.ID]; ok && time.Since(at) < verifyBackoff {
		return
	}
	if err := n.stream.verifyServer(m.meta.Raft, m.meta.ID); err != nil {
		unverified[m.meta.ID] = time.Now()
		n.unverified.Add(1)
		n.log.Warn("not adding a gossip member: its Raft address does not prove its node identity",
			"id", m.meta.ID, "raft", m.meta.Raft, "err", err, "retry_in", verifyBackoff)
		return
	}
	delete(unverified, m.meta.ID)
	if _, err := n.checkIdentity(ctx, m); err != nil {
		n.log.Debug("not adding a gossip member", "id", m.meta.ID, "err", err)
		return
	}
	id, addr := raft.ServerID(m.meta.ID), raft.ServerAddress(m.meta.Raft)
	if m.meta.Replica {
		n.log.Info("adding replica (nonvoter) from gossip", "id", m.meta.ID, "raft", m.meta.Raft, "region", m.meta.Region)
		if err := waitFuture(ctx, n.raft.AddNonvoter(id, addr, 0, n.cfg.ApplyTimeout)); err != nil {
			n.log.Warn("add nonvoter failed", "id", m.meta.ID, "err", err)
		}
		return
	}
	// A new voter catches up as a nonvoter first (promoteCaughtUp): added
	// as a voter at once, a member far behind would count toward the
	// quorum while it cannot acknowledge a single new entry.
	n.log.Info("adding a new member from gossip as a nonvoter until it catches up", "id", m.meta.ID, "raft", m.meta.Raft,
		"region", m.meta.Region)
	if err := waitFuture(ctx, n.raft.AddNonvoter(id, addr, 0, n.cfg.ApplyTimeout)); err != nil {
		n.log.Warn("add nonvoter failed", "id", m.meta.ID, "err", err)
		return
	}
	n.joins.startCatchUp(m.meta.ID, time.Now())
}

// reconcileTrustingGossip is the seeded bug faults.TrustGossipLeave: the
// reconcile of servers already in the configuration as it was before
// membership changes needed the node's own request. It demotes a voter
// whose meta says replica, moves or promotes a server as its meta says
// (after verifyServer), and removes a member gossip says left. It returns
// the voters left. Never set in the product build.
func (n *Node) reconcileTrustingGossip(ctx context.Context, m member, servers map[string]raft.Server, voters int) int {
	s, inConf := servers[m.meta.ID]
	switch {
	case !inConf || m.meta.ID == n.cfg.ID:
	case m.state == memberlist.StateAlive && m.meta.Replica && string(s.Address) == m.meta.Raft && s.Suffrage == raft.Voter:
		if voters <= 1 {
			break
		}
		n.log.Info("seeded bug: demoting a voter that gossip says is a replica", "id", m.meta.ID)
		if err := waitFuture(ctx, n.raft.DemoteVoter(raft.ServerID(m.meta.ID), 0, n.cfg.ApplyTimeout)); err == nil {
			voters--
		}
	case m.state == memberlist.StateAlive && (string(s.Address) != m.meta.Raft || !m.meta.Replica && s.Suffrage != raft.Voter):
		if n.stream.verifyServer(m.meta.Raft, m.meta.ID) != nil {
			break
		}
		n.log.Info("seeded bug: moving or promoting a server as gossip says", "id", m.meta.ID, "raft", m.meta.Raft)
		_ = waitFuture(ctx, n.raft.AddVoter(raft.ServerID(m.meta.ID), raft.ServerAddress(m.meta.Raft), 0, n.cfg.ApplyTimeout))
	case m.state == memberlist.StateLeft:
		n.log.Info("seeded bug: removing a member that gossip says left", "id", m.meta.ID)
		if err := waitFuture(ctx, n.raft.RemoveServer(raft.ServerID(m.meta.ID), 0, n.cfg.ApplyTimeout)); err == nil && s.Suffrage == raft.Voter {
			voters--
		}
	}
	return voters
}

// sweep proposes Expire for leases that passed and Purge for finished
// records whose dedupe window passed. The state machine checks each key
// again when it applies the command, so a stale sweep is harmless.
func (n *Node) sweep(ctx context.Context) {
	now := n.cfg.Clock().UnixNano()
	var leases, purges []fsm.Ref
	n.sm.read(func(l *fsm.Machine) {
		leases = l.DueLeases(now, sweepBatch)
		purges = l.DuePurges(now, sweepBatch)
	})
	if len(leases) > 0 {
		if r, err := n.Propose(ctx, &fsm.Expire{Keys: leases}); err != nil {
			n.log.Warn("lease sweep failed", "err", err)
		} else if r.Count > 0 {
			n.log.Info("leases passed without a report; intents now in_doubt", "count", r.Count)
		}
	}
	if len(purges) > 0 {
		if r, err := n.Propose(ctx, &fsm.Purge{Keys: purges}); err != nil {
			n.log.Warn("purge sweep failed", "err", err)
		} else if r.Count > 0 {
			n.log.Debug("purged finished intents past their dedupe window", "count", r.Count)
		}
	}
}

var _ replication.Replicator = (*Node)(nil)
