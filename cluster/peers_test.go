package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// A voter that died cannot ask for its own removal: an operator removes
// it through the leader (RemovePeer). The leader refuses to remove itself,
// an unknown node, and a live voter whose removal would leave the dead one
// among too few live voters; it removes the dead one, the voters shrink to
// two and writes commit; the removed node restarted with its old data is
// not added back by gossip reconcile; restarted empty, it is, as a new
// member.
func TestOperatorRemovesADeadVoter(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.LeaveOnShutdown = false })
	nodes := tc.startN(3)
	leader := tc.leader()
	dead := tc.follower(leader)
	var other *Node
	for _, n := range nodes {
		if n != leader && n != dead {
			other = n
		}
	}
	tc.knowsLeader(other, leader)
	ctx := ctxT(t)
	tc.propose(ctx, claim("before", "o"))

	id, raftAddr, gossipAddr := dead.ID(), dead.RaftAddr(), dead.GossipAddr()
	if err := dead.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, id)

	if err := leader.RemovePeer(ctx, leader.ID()); !errors.Is(err, ErrRemoveLeader) {
		t.Fatalf("removing the leader: %v, want ErrRemoveLeader", err)
	}
	if err := leader.RemovePeer(ctx, "nope"); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("removing an unknown node: %v, want ErrUnknownPeer", err)
	}
	var nl *ledger.NotLeaderError
	if err := other.RemovePeer(ctx, id); !errors.As(err, &nl) || nl.LeaderID != leader.ID() {
		t.Fatalf("removing through a follower: %v, want NotLeaderError naming %s", err, leader.ID())
	}
	// The dead voter is silent: removing the live follower would leave it
	// and the leader, one live voter of two.
	waitFor(t, 30*time.Second, "the leader to see the dead voter silent", func() bool {
		return time.Since(leader.contact.since(id)) > 2*leader.cfg.Raft.HeartbeatTimeout
	})
	if err := leader.RemovePeer(ctx, other.ID()); !errors.Is(err, ErrNoLiveMajority) {
		t.Fatalf("removing a live voter while another is dead: %v, want ErrNoLiveMajority", err)
	}
	if v := voters(leader); len(v) != 3 {
		t.Fatalf("voters %v after a refused removal, want 3", v)
	}

	if err := leader.RemovePeer(ctx, id); err != nil {
		t.Fatalf("removing the dead voter: %v", err)
	}
	if v := voters(leader); len(v) != 2 || v[id] {
		t.Fatalf("voters %v after the removal, want the two live ones", v)
	}
	if r := tc.propose(ctx, claim("after-removal", "o")); r.Status != fsm.StatusGranted {
		t.Fatalf("claim after the removal: %+v", r)
	}

	// The removed node comes back with its old data dir: the leader sees it
	// alive in gossip and still does not add it back.
	tc.startAt(id, raftAddr, gossipAddr, 3, leader.GossipAddr())
	waitFor(t, 30*time.Second, "the leader to see the removed node alive in gossip", func() bool {
		m, ok := leader.gossip.lookup(id)
		return ok && m.state == memberlist.StateAlive
	})
	rounds := leader.reconciles.Load()
	waitFor(t, 30*time.Second, "five reconcile rounds on the leader", func() bool { return leader.reconciles.Load() >= rounds+5 })
	if v := voters(leader); len(v) != 2 || v[id] {
		t.Fatalf("voters %v after the removed node returned, want it kept out", v)
	}
	if r := tc.propose(ctx, claim("after-return", "o")); r.Status != fsm.StatusGranted {
		t.Fatalf("claim after the removed node returned: %+v", r)
	}

	// Wiped, it comes back empty (the recovery of a node whose data dir
	// cannot be trusted): the leader adds it at once, within the hold, as a
	// new member, and promotes it once caught up.
	if err := tc.nodes[id].Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, id)
	if err := os.RemoveAll(filepath.Join(tc.dir, id)); err != nil {
		t.Fatal(err)
	}
	rejoined := tc.startAt(id, raftAddr, gossipAddr, 3, leader.GossipAddr())
	waitFor(t, 60*time.Second, "the wiped node to rejoin as a voter", func() bool { return voters(leader)[id] })
	want, _ := leader.Digest()
	waitFor(t, 60*time.Second, "the rejoined node to catch up", func() bool {
		got, _ := rejoined.Digest()
		want, _ = leader.Digest()
		return got == want
	})
}

// An operator moves leadership to a named voter, then to any voter; the
// cluster keeps committing. A follower answers NotLeaderError; an unknown
// target is refused.
func TestOperatorTransfersLeadership(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	leader := tc.leader()
	target := tc.follower(leader)
	ctx := ctxT(t)
	// A follower that learned the leader's HTTP address is ready.
	waitFor(t, 30*time.Second, "the follower to be ready", func() bool { return target.Status().Ready })

	var nl *ledger.NotLeaderError
	if _, err := target.TransferLeadership(ctx, ""); !errors.As(err, &nl) || nl.LeaderID != leader.ID() {
		t.Fatalf("transfer through a follower: %v, want NotLeaderError naming %s", err, leader.ID())
	}
	if _, err := leader.TransferLeadership(ctx, "nope"); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("transfer to an unknown node: %v, want ErrUnknownPeer", err)
	}
	if _, err := leader.TransferLeadership(ctx, target.ID()); err != nil {
		t.Fatalf("transfer to %s: %v", target.ID(), err)
	}
	if got := tc.leader(); got != target {
		t.Fatalf("leader after the transfer is %s, want %s", got.ID(), target.ID())
	}
	if r := tc.propose(ctx, claim("after-transfer", "o")); r.Status != fsm.StatusGranted {
		t.Fatalf("claim after the transfer: %+v", r)
	}

	if _, err := target.TransferLeadership(ctx, ""); err != nil {
		t.Fatalf("transfer to any voter: %v", err)
	}
	waitFor(t, 30*time.Second, "another node to lead", func() bool { return tc.leader() != target })
	if r := tc.propose(ctx, claim("after-second-transfer", "o")); r.Status != fsm.StatusGranted {
		t.Fatalf("claim after the second transfer: %+v", r)
	}
}
