package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/gossipforge"
	"github.com/intentledger/intentd/ledger"
)

// forgeMeta is the gossip meta a forger announces for node n.
func forgeMeta(t *testing.T, n *Node, change func(*memberMeta)) []byte {
	t.Helper()
	m := memberMeta{ID: n.ID(), Raft: n.RaftAddr(), HTTP: n.cfg.HTTPAddr, Bootstrapped: true, Encoding: fsm.EncodingVersion}
	change(&m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A member holding only the gossip key forges, for a live follower, an
// alive message with a far higher incarnation whose meta says leaving,
// replica and another HTTP address, then that follower's leave; and for
// the leader an alive message with another HTTP address. Nothing changes:
// the voters stay, no node lists or forwards to the forged address. (Before,
// the leader removed the follower on the forged leave, or demoted it on the
// forged replica meta, in 22 of 24 samples ending with one voter; and
// followers forwarded callers' requests, API keys included, to the forged
// address.)
func TestGossipForgeryChangesNoVoterAndNoAddress(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.GossipKey = gossipKeyA })
	nodes := tc.startN(3)
	leader := tc.leader()
	follower := tc.follower(leader)
	var other *Node
	for _, n := range nodes {
		if n != leader && n != follower {
			other = n
		}
	}
	tc.knowsLeader(other, leader)
	before := voters(leader)

	var hits atomic.Int64
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer trap.Close()
	trapAddr := trap.Listener.Addr().String()

	f := gossipforge.Forger{Key: gossipKeyA}
	followerMeta := forgeMeta(t, follower, func(m *memberMeta) { m.Leaving, m.Replica, m.HTTP = true, true, trapAddr })
	leaderMeta := forgeMeta(t, leader, func(m *memberMeta) { m.HTTP = trapAddr })
	inc := uint32(1000)
	forge := func() {
		inc += 1000
		_ = f.Alive([]string{leader.GossipAddr(), other.GossipAddr()}, follower.ID(), follower.GossipAddr(), inc, followerMeta)
		_ = f.Leave([]string{leader.GossipAddr(), other.GossipAddr()}, follower.ID(), inc)
		_ = f.Alive([]string{follower.GossipAddr(), other.GossipAddr()}, leader.ID(), leader.GossipAddr(), inc, leaderMeta)
	}
	// The forgery reaches the leader's gossip: it records the follower as
	// left with the forged meta.
	waitFor(t, 20*time.Second, "the leader to record the forged leave", func() bool {
		forge()
		m, ok := leader.gossip.lookup(follower.ID())
		return ok && m.state == memberlist.StateLeft && m.meta.Leaving && m.meta.Replica
	})
	// The others record the forged HTTP address of the leader.
	waitFor(t, 20*time.Second, "a follower to record the leader's forged HTTP address", func() bool {
		forge()
		m, ok := other.gossip.lookup(leader.ID())
		return ok && m.meta.HTTP == trapAddr
	})
	// Several reconcile rounds pass while the forgery goes on.
	rounds := leader.reconciles.Load()
	waitFor(t, 20*time.Second, "five reconcile rounds on the leader", func() bool {
		forge()
		return leader.reconciles.Load() >= rounds+5
	})
	if got := voters(leader); len(got) != len(before) || !got[follower.ID()] {
		t.Fatalf("voters %v after the forgery, want %v", got, before)
	}
	for _, n := range nodes {
		st := n.Status()
		if st.LeaderHTTP == trapAddr {
			t.Errorf("%s advertises the forged leader address", n.ID())
		}
		for _, m := range st.Nodes {
			if m.HTTPAddr == trapAddr {
				t.Errorf("%s lists %s at the forged address %s", n.ID(), m.ID, trapAddr)
			}
		}
	}
	for _, n := range []*Node{follower, other} {
		var nl *ledger.NotLeaderError
		if err := n.notLeader(); !errors.As(err, &nl) || nl.LeaderHTTP != leader.cfg.HTTPAddr {
			t.Errorf("%s would forward to %v, want the leader's %q", n.ID(), err, leader.cfg.HTTPAddr)
		}
	}
	if r := tc.propose(ctxT(t), claim("after-forgery", "o")); r.Status != fsm.StatusGranted {
		t.Fatalf("claim after the forgery: %+v", r)
	}
	if hits.Load() != 0 {
		t.Fatalf("the forged HTTP address received %d requests", hits.Load())
	}
}

// With TLS, a node leaving (Shutdown with LeaveOnShutdown, what SIGTERM
// with --leave-on-terminate does) asks the leader to remove it over its
// Raft port under its node certificate, and is removed; a node asking for
// another node's removal is refused, whatever it holds.
func TestSelfRemovalIsAuthenticated(t *testing.T) {
	pki := devPKI(t)
	tc := tlsCluster(t, pki)
	nodes := tc.startN(3)
	leader := tc.leader()
	var a, b *Node
	for _, n := range nodes {
		if n != leader {
			if a == nil {
				a = n
			} else {
				b = n
			}
		}
	}
	tc.knowsLeader(a, leader)
	tc.knowsLeader(b, leader)
	ctx := ctxT(t)

	// a, a server with its own certificate, asks for b's removal: refused.
	ans, err := a.memberCall(ctx, leader.RaftAddr(), leader.ID(), memberRequest{Op: opLeave, ID: b.ID()}, memberChangeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ans.err(), ErrNotYourself) {
		t.Fatalf("a's request to remove b: %+v, want refused as not its own", ans)
	}
	// So is its request to demote b.
	ans, err = a.memberCall(ctx, leader.RaftAddr(), leader.ID(), memberRequest{Op: opSync, ID: b.ID(), Raft: b.RaftAddr(), Replica: true},
		memberChangeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ans.err(), ErrNotYourself) {
		t.Fatalf("a's request to demote b: %+v, want refused as not its own", ans)
	}
	if v := voters(leader); len(v) != 3 || !v[b.ID()] {
		t.Fatalf("voters %v after forged requests", v)
	}

	// b leaves: the leader removes it at its own request.
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "b to be removed at its own request", func() bool {
		v := voters(leader)
		return len(v) == 2 && !v[b.ID()]
	})
	if r := tc.propose(ctx, claim("after-leave", "o")); r.Status != fsm.StatusGranted {
		t.Fatalf("claim after the leave: %+v", r)
	}
}

// Crash one follower (kill -9), stop the other (SIGTERM), start it again:
// with 2 of 3 voters up the cluster has a leader again within a few
// election timeouts, with the default (a stopped node stays a voter) and
// with an explicit leave, whose removal the leader refuses: the voters
// left would have no live majority. (Before, the default left; the
// leader's removal could not commit without the crashed node, and with 2
// of 3 up there was no leader for over 30 s, until the crashed node came
// back.)
func TestAStopAfterACrashKeepsAMajority(t *testing.T) {
	for _, leave := range []bool{false, true} {
		name := "default"
		if leave {
			name = "leave"
		}
		t.Run(name, func(t *testing.T) {
			tc := newTestCluster(t, func(c *Config) { c.LeaveOnShutdown = leave })
			tc.startN(3)
			leader := tc.leader()
			crashed := tc.follower(leader)
			var stopped *Node
			for _, n := range tc.nodes {
				if n != leader && n != crashed {
					stopped = n
				}
			}
			tc.knowsLeader(stopped, leader)
			tc.propose(ctxT(t), claim("before", "o"))
			if err := crashed.Kill(); err != nil {
				t.Fatal(err)
			}
			delete(tc.nodes, crashed.ID())
			// The leader notices: the crashed voter stopped answering.
			waitFor(t, 30*time.Second, "the leader to stop hearing from the crashed node", func() bool {
				return time.Since(leader.contact.since(crashed.ID())) > 2*leader.cfg.Raft.HeartbeatTimeout
			})
			id, raftAddr, gossipAddr := stopped.ID(), stopped.RaftAddr(), stopped.GossipAddr()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := stopped.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			delete(tc.nodes, id)
			if v := voters(leader); len(v) != 3 {
				t.Fatalf("voters %v after the stop, want all three", v)
			}
			tc.startAt(id, raftAddr, gossipAddr, 0, leader.GossipAddr())
			// Two of three voters are up: a leader within a few election
			// timeouts (the bound is a hang guard well under the 30 s seen).
			start := time.Now()
			waitFor(t, 20*time.Second, "a write committed with two of three voters up", func() bool {
				for _, n := range tc.nodes {
					if !n.IsLeader() {
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					r, err := n.Propose(ctx, claim("after", "o"))
					cancel()
					if err == nil && r.Status == fsm.StatusGranted {
						return true
					}
				}
				return false
			})
			t.Logf("a write committed %s after the restart", time.Since(start).Round(time.Millisecond))
		})
	}
}

// keepsLiveMajority counts the leader and the voters it heard from within
// a heartbeat timeout.
func TestKeepsLiveMajority(t *testing.T) {
	n := &Node{cfg: Config{ID: "n1", Raft: RaftTuning{HeartbeatTimeout: time.Second}}}
	now := time.Now()
	n.contact.note("n2", now.Add(-100*time.Millisecond), true)
	n.contact.note("n3", now.Add(-time.Minute), true)
	conf := threeVoters()
	if err := n.keepsLiveMajority(conf, "n3", now); err != nil {
		t.Errorf("removing the silent n3 leaves n1 and n2: %v", err)
	}
	if err := n.keepsLiveMajority(conf, "n2", now); !errors.Is(err, ErrNoLiveMajority) {
		t.Errorf("removing n2 leaves n1 and the silent n3: %v", err)
	}
	if err := n.keepsLiveMajority(conf, "n1", now); !errors.Is(err, ErrNoLiveMajority) {
		t.Errorf("the leader leaving leaves n2 and the silent n3: %v", err)
	}
	// n3 answered a moment ago, then crashed: an AppendEntries to it
	// failed since. It is not live, though its last answer is recent.
	n.contact.note("n3", now.Add(-200*time.Millisecond), true)
	if err := n.keepsLiveMajority(conf, "n2", now); err != nil {
		t.Errorf("n3 answered 200 ms ago: %v", err)
	}
	n.contact.note("n3", now.Add(-50*time.Millisecond), false)
	if err := n.keepsLiveMajority(conf, "n2", now); !errors.Is(err, ErrNoLiveMajority) {
		t.Errorf("n3 failed after its last answer, yet removing n2 was allowed: %v", err)
	}
}

func threeVoters() raft.Configuration {
	var c raft.Configuration
	for _, id := range []string{"n1", "n2", "n3"} {
		c.Servers = append(c.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":1")})
	}
	return c
}
