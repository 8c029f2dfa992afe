package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/clusterview"
)

// LeaderPlacement is the leader's view of Config.PreferLeaderRegion, in
// Status (clusterview.LeaderPlacement).
type LeaderPlacement = clusterview.LeaderPlacement

// The states of LeaderPlacement.
const (
	PlacementInRegion = clusterview.PlacementInRegion
	PlacementWaiting  = clusterview.PlacementWaiting
	PlacementMoving   = clusterview.PlacementMoving
	PlacementBackoff  = clusterview.PlacementBackoff
)

// placement is the leader's duty of moving leadership to the preferred
// region: while this leader is outside it and a voter there is healthy, it
// asks Raft to hand leadership to that voter. Raft's transfer catches the
// target up first and gives up after an election timeout (the leader then
// leads on), and new writes wait during it (ErrNoLeader, retried by the
// client), so it is only tried when the target and a quorum are healthy,
// and after a failure only with a growing pause. A replica that leads (a
// voter restarted as a replica, not yet demoted) hands leadership to any
// healthy voter the same way.
type placement struct {
	n          *Node
	aliveSince map[string]time.Time // gossip members alive without a break, since
	nextTry    time.Time
	failures   int
	transfers  int
}

func newPlacement(n *Node, now time.Time) *placement {
	return &placement{n: n, aliveSince: map[string]time.Time{}}
}

// settle is how long a voter must be alive in gossip, without a failed
// heartbeat, before leadership is moved to it: a node that just came back
// is often still catching up, and one that flaps must not take
// leadership with it.
func (p *placement) settle() time.Duration {
	return 3*p.n.cfg.Raft.ElectionTimeout + p.n.cfg.ReconcileInterval
}

// backoff is the pause after the failures-th failed transfer: ten
// election timeouts, doubling, at most 5 minutes.
func (p *placement) backoff() time.Duration {
	d := 10 * p.n.cfg.Raft.ElectionTimeout
	for i := 1; i < p.failures && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

func (p *placement) set(lp LeaderPlacement) {
	lp.Transfers = p.transfers
	p.n.placementState.Store(&lp)
}

// step looks once: it records the leader's placement and starts a
// transfer when one is due.
func (p *placement) step(ctx context.Context, now time.Time) {
	n := p.n
	pref := n.cfg.PreferLeaderRegion
	if pref == "" && !n.cfg.Replica {
		n.placementState.Store(nil)
		return
	}
	members := n.gossip.snapshot()
	for _, m := range members {
		if m.state == memberlist.StateAlive && !m.meta.Leaving {
			if _, ok := p.aliveSince[m.meta.ID]; !ok {
				p.aliveSince[m.meta.ID] = now
			}
		} else {
			delete(p.aliveSince, m.meta.ID)
		}
	}
	for _, id := range n.peers.failing() {
		delete(p.aliveSince, id) // a failed heartbeat restarts the clock
	}
	if n.cfg.Replica {
		pref = "" // any voter will do
	} else if n.cfg.Region == pref {
		p.failures = 0
		p.set(LeaderPlacement{PreferredRegion: pref, State: PlacementInRegion})
		return
	}
	if now.Before(p.nextTry) {
		if lp := n.placementState.Load(); lp != nil {
			p.set(*lp)
		}
		return
	}
	target, detail := p.choose(members, pref, now)
	if target == nil {
		p.set(LeaderPlacement{PreferredRegion: pref, State: PlacementWaiting, Detail: detail})
		return
	}
	p.transfers++
	p.set(LeaderPlacement{PreferredRegion: pref, State: PlacementMoving, Target: target.meta.ID})
	n.log.Info("moving leadership to the preferred region", "to", target.meta.ID, "region", target.meta.Region,
		"preferred", pref, "replica_leader", n.cfg.Replica)
	err := waitFuture(ctx, n.raft.LeadershipTransferToServer(raft.ServerID(target.meta.ID), raft.ServerAddress(target.meta.Raft)))
	if err == nil {
		return // leadership moves on: this duty ends with it
	}
	p.failures++
	p.nextTry = time.Now().Add(p.backoff())
	n.log.Warn("leadership transfer failed; this node leads on", "to", target.meta.ID, "err", err, "next_try_in", p.backoff())
	p.set(LeaderPlacement{PreferredRegion: pref, State: PlacementBackoff, Target: target.meta.ID,
		Detail: fmt.Sprintf("transfer to %s failed: %v; next try at %s", target.meta.ID, err, p.nextTry.UTC().Format(time.RFC3339))})
}

// choose returns the voter to move leadership to (in region pref, or any
// when pref is empty), or nil and why none qualifies. A voter qualifies
// when it has been alive in gossip, with no failed heartbeat, for settle;
// and only while such healthy voters, this leader included, make a quorum,
// so the new leader can commit at once.
func (p *placement) choose(members []member, pref string, now time.Time) (*member, string) {
	n := p.n
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, "the Raft configuration is not readable: " + err.Error()
	}
	voters := map[string]bool{}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters[string(s.ID)] = true
		}
	}
	healthy, inRegion := 1, 0 // this leader counts
	var best *member
	for i := range members {
		m := &members[i]
		if m.meta.ID == n.cfg.ID || !voters[m.meta.ID] {
			continue
		}
		since, ok := p.aliveSince[m.meta.ID]
		if !ok || now.Sub(since) < p.settle() {
			if pref == "" || m.meta.Region == pref {
				inRegion++
			}
			continue
		}
		healthy++
		if pref != "" && m.meta.Region != pref {
			continue
		}
		inRegion++
		if best == nil {
			best = m // members come sorted by ID: the choice is stable
		}
	}
	quorum := len(voters)/2 + 1
	switch {
	case best == nil && inRegion == 0:
		return nil, fmt.Sprintf("no voter in region %q", pref)
	case best == nil:
		return nil, fmt.Sprintf("no voter in region %q has been healthy for %s", pref, p.settle())
	case healthy < quorum:
		return nil, fmt.Sprintf("only %d of %d voters are healthy, fewer than a quorum: moving leadership could stall writes", healthy, len(voters))
	}
	return best, ""
}

// peerHealth follows the leader's heartbeats to each peer (raft's
// observations): a peer is failing from a failed heartbeat until one
// succeeds again.
type peerHealth struct {
	mu   sync.Mutex
	fail map[string]bool
}

func (h *peerHealth) observe(o raft.Observation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		h.fail[string(d.PeerID)] = true
	case raft.ResumedHeartbeatObservation:
		delete(h.fail, string(d.PeerID))
	}
}

// failing returns the peers whose last heartbeat failed.
func (h *peerHealth) failing() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.fail))
	for id := range h.fail {
		out = append(out, id)
	}
	return out
}

// watchPeers feeds raft's heartbeat observations to n.peers until the
// node stops.
func (n *Node) watchPeers() {
	defer n.wg.Done()
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		select {
		case <-n.ctx.Done():
			return
		case o := <-ch:
			n.peers.observe(o)
		}
	}
}
