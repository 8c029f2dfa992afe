package cluster

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

func TestNetworkProfiles(t *testing.T) {
	for _, tc := range []struct {
		network                      string
		set                          RaftTuning // explicit values
		heartbeat, election, leaseTO time.Duration
		err                          error
	}{
		{"", RaftTuning{}, time.Second, time.Second, 500 * time.Millisecond, nil},
		{NetworkLAN, RaftTuning{}, time.Second, time.Second, 500 * time.Millisecond, nil},
		{NetworkWAN, RaftTuning{}, time.Second, 3 * time.Second, time.Second, nil},
		// A timing set explicitly wins over the profile's.
		{NetworkWAN, RaftTuning{ElectionTimeout: 5 * time.Second}, time.Second, 5 * time.Second, time.Second, nil},
		{"mars", RaftTuning{}, 0, 0, 0, ErrNetwork},
	} {
		c := Config{ID: "n1", DataDir: t.TempDir(), Network: tc.network, Raft: tc.set}
		err := c.setDefaults()
		if !errors.Is(err, tc.err) {
			t.Errorf("%q: err %v, want %v", tc.network, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		if c.Raft.HeartbeatTimeout != tc.heartbeat || c.Raft.ElectionTimeout != tc.election || c.Raft.LeaderLeaseTimeout != tc.leaseTO {
			t.Errorf("%q %+v: raft %v/%v/%v", tc.network, tc.set, c.Raft.HeartbeatTimeout, c.Raft.ElectionTimeout, c.Raft.LeaderLeaseTimeout)
		}
	}
	// The memberlist profiles differ where a WAN needs it.
	lan, wan := networkProfiles[NetworkLAN].memberlist(), networkProfiles[NetworkWAN].memberlist()
	if wan.ProbeTimeout <= lan.ProbeTimeout || wan.TCPTimeout <= lan.TCPTimeout || wan.SuspicionMult <= lan.SuspicionMult {
		t.Errorf("wan gossip %v/%v/%d not slower than lan %v/%v/%d", wan.ProbeTimeout, wan.TCPTimeout, wan.SuspicionMult,
			lan.ProbeTimeout, lan.TCPTimeout, lan.SuspicionMult)
	}
}

// roles sets each node's region and role by ID, and what they may change
// to before a restart.
type roles struct {
	mu      sync.Mutex
	region  map[string]string
	replica map[string]bool
	prefer  string
}

func (r *roles) tune(c *Config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.Region, c.Replica, c.PreferLeaderRegion = r.region[c.ID], r.replica[c.ID], r.prefer
	c.LeaveOnShutdown = false // a restart keeps the node in the configuration
}

func (r *roles) setReplica(id string, replica bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.replica[id] = replica
}

func suffrageOf(n *Node, id string) string {
	for _, s := range n.Status().Nodes {
		if s.ID == id {
			return s.Suffrage
		}
	}
	return ""
}

func TestReplicaReceivesTheLogAndNeverVotes(t *testing.T) {
	r := &roles{region: map[string]string{"n1": "eu", "n2": "eu", "n3": "us", "n4": "ap"}, replica: map[string]bool{"n4": true}}
	tc := newTestCluster(t, r.tune)
	nodes := tc.startN(3)
	replica := tc.start("n4", 0, nodes[0].GossipAddr())
	leader := tc.leader()
	waitFor(t, 60*time.Second, "n4 to be added as a nonvoter", func() bool { return suffrageOf(tc.leader(), "n4") == "nonvoter" })
	if v := voters(leader); len(v) != 3 || v["n4"] {
		t.Fatalf("voters %v", v)
	}
	st := replica.Status()
	if st.Role != "replica" || st.Region != "ap" || st.Network != NetworkLAN {
		t.Errorf("replica status %+v", st)
	}
	for _, m := range leader.Status().Nodes {
		if want := r.region[m.ID]; m.Region != want {
			t.Errorf("%s announces region %q, want %q", m.ID, m.Region, want)
		}
	}

	// It receives the log and serves it locally.
	ctx := ctxT(t)
	res := tc.propose(ctx, claim("replicated", "o"))
	waitFor(t, 60*time.Second, "the replica to apply", func() bool {
		var in *fsm.Intent
		_ = replica.Read(ctx, ledger.Stale, func(l *fsm.Machine) { in = l.Get("default", "replicated") })
		return in != nil && in.FencingToken == res.Index
	})
	// It forwards what needs the leader: a write sent to it is applied.
	if r, err := replica.Propose(ctx, claim("via-replica", "o")); err != nil || r.Status != fsm.StatusGranted {
		t.Errorf("propose through the replica: %+v, %v", r, err)
	}

	// The leader lost: a voter takes over, never the replica.
	old := leader
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, old.ID())
	next := tc.leader()
	if next == replica || replica.IsLeader() {
		t.Fatalf("the replica leads")
	}
	// It follows the new leader once that leader's first heartbeat reaches it.
	waitFor(t, 60*time.Second, "the replica to follow "+next.ID()+" and be ready", func() bool {
		st := replica.Status()
		return st.LeaderID == next.ID() && st.Ready
	})
	if replica.IsLeader() || suffrageOf(next, "n4") != "nonvoter" {
		t.Fatalf("the replica leads or votes: %+v", next.Status().Nodes)
	}
}

func TestRoleChangesOnRestart(t *testing.T) {
	r := &roles{region: map[string]string{}, replica: map[string]bool{}}
	tc := newTestCluster(t, r.tune)
	nodes := tc.startN(3)
	tc.start("n4", 0, nodes[0].GossipAddr())
	waitFor(t, 60*time.Second, "n4 to become a voter", func() bool { return voters(tc.leader())["n4"] })

	restart := func(id string, replica bool) {
		t.Helper()
		n := tc.nodes[id]
		raftAddr, gossipAddr := n.RaftAddr(), n.GossipAddr()
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
		delete(tc.nodes, id)
		r.setReplica(id, replica)
		var join string
		for _, o := range tc.nodes {
			join = o.GossipAddr()
		}
		tc.startAt(id, raftAddr, gossipAddr, 0, join)
	}
	// Make sure n4 is not the leader, so a follower is demoted.
	if tc.leader().ID() == "n4" {
		restart("n4", false)
	}
	restart("n4", true)
	waitFor(t, 60*time.Second, "n4 to be demoted", func() bool { return suffrageOf(tc.leader(), "n4") == "nonvoter" })
	restart("n4", false)
	waitFor(t, 60*time.Second, "n4 to be promoted", func() bool { return suffrageOf(tc.leader(), "n4") == "voter" })
	if v := voters(tc.leader()); len(v) != 4 {
		t.Errorf("voters %v", v)
	}
}

func TestLeadershipMovesToThePreferredRegion(t *testing.T) {
	r := &roles{region: map[string]string{"n1": "eu", "n2": "eu", "n3": "us"}, replica: map[string]bool{}, prefer: "us"}
	tc := newTestCluster(t, r.tune)
	tc.startN(3)
	waitFor(t, 60*time.Second, "leadership in us", func() bool {
		l := tc.leader()
		st := l.Status()
		return l.ID() == "n3" && st.Placement != nil && st.Placement.State == PlacementInRegion && st.LeaderRegion == "us"
	})
	ctx := ctxT(t)
	tc.propose(ctx, claim("in-us", "o"))

	// us lost: an eu voter leads and waits for a us voter.
	n3 := tc.nodes["n3"]
	raftAddr, gossipAddr := n3.RaftAddr(), n3.GossipAddr()
	if err := n3.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, "n3")
	waitFor(t, 60*time.Second, "an eu leader waiting for us", func() bool {
		st := tc.leader().Status()
		return st.Region == "eu" && st.Placement != nil && st.Placement.State == PlacementWaiting
	})
	tc.propose(ctx, claim("in-eu", "o")) // writes go on meanwhile

	// us back: leadership returns once it has been healthy for a while.
	tc.startAt("n3", raftAddr, gossipAddr, 0, tc.nodes["n1"].GossipAddr())
	waitFor(t, 60*time.Second, "leadership back in us", func() bool {
		l := tc.leader()
		return l.ID() == "n3" && l.Status().Placement != nil && l.Status().Placement.State == PlacementInRegion
	})
	tc.propose(ctx, claim("back-in-us", "o"))
}
