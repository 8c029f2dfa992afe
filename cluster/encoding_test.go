package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
)

// lastEntryEncoding is the encoding byte of the newest command entry in
// n's log.
func lastEntryEncoding(t *testing.T, n *Node) byte {
	t.Helper()
	last, err := n.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := last; i > 0; i-- {
		var l raft.Log
		if err := n.logs.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type == raft.LogCommand {
			return l.Data[1]
		}
	}
	t.Fatal("no command in the log")
	return 0
}

// A rolling upgrade: while one server is of a version that reads only
// JSON entries, the leader writes JSON; once it runs a version that reads
// the binary encoding, the leader switches, and every replica applies
// both kinds to the same state.
func TestLogEncodingWaitsForEveryServer(t *testing.T) {
	old := true
	tc := newTestCluster(t, func(c *Config) {
		c.LeaveOnShutdown = false
		if c.ID == "n3" && old {
			c.MaxLogEncoding = fsm.EncodingJSON
		}
	})
	tc.startN(3)
	ctx := ctxT(t)
	leader := tc.leader()
	waitFor(t, 30*time.Second, "every server in gossip", func() bool {
		st := leader.Status()
		return len(st.Nodes) == 3 && st.Nodes[0].Decodes > 0 && st.Nodes[1].Decodes > 0
	})
	tc.propose(ctx, claim("before", "o"))
	leader = tc.leader()
	if got := lastEntryEncoding(t, leader); got != fsm.EncodingJSON {
		t.Fatalf("with an old server the leader wrote encoding %d", got)
	}
	if st := leader.Status(); st.LogEncoding != int(fsm.EncodingJSON) {
		t.Fatalf("status log_encoding %d, want %d", st.LogEncoding, fsm.EncodingJSON)
	}

	// Upgrade n3 in place: same data and addresses, a version that reads
	// binary entries.
	n3 := tc.nodes["n3"]
	raftAddr, gossipAddr := n3.RaftAddr(), n3.GossipAddr()
	if err := n3.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, "n3")
	old = false
	var join string
	for _, n := range tc.nodes {
		join = n.GossipAddr()
	}
	tc.startAt("n3", raftAddr, gossipAddr, 3, join)
	waitFor(t, 30*time.Second, "the leader to write the binary encoding", func() bool {
		l := tc.leader()
		return l.Status().LogEncoding == int(fsm.MaxEncoding)
	})
	for i := 0; i < 5; i++ {
		tc.propose(ctx, claim(fmt.Sprintf("after-%d", i), "o"))
	}
	leader = tc.leader()
	if got := lastEntryEncoding(t, leader); got != fsm.MaxEncoding {
		t.Fatalf("after the upgrade the leader wrote encoding %d", got)
	}
	want, wantIndex := leader.Digest()
	for id, n := range tc.nodes {
		waitFor(t, 30*time.Second, id+" to apply both encodings to the same state", func() bool {
			got, idx := n.Digest()
			if idx < wantIndex {
				return false
			}
			want, wantIndex = leader.Digest()
			return got == want
		})
	}
}

// inConfig reports whether id is a server in n's Raft configuration.
func inConfig(t *testing.T, n *Node, id string) bool {
	t.Helper()
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// A server of an older version that joins gossip is not added to the
// Raft configuration: it could not install this leader's snapshots nor
// replay its binary entries, and as a voter it would crash-loop. Once it
// is upgraded in place it is added, and the leader keeps writing binary.
func TestLeaderDoesNotAddAnOlderServer(t *testing.T) {
	old := true
	tc := newTestCluster(t, func(c *Config) {
		c.LeaveOnShutdown = false
		if c.ID == "n4" && old {
			c.MaxLogEncoding = fsm.EncodingJSON
		}
	})
	first := tc.startN(3)[0]
	ctx := ctxT(t)
	tc.propose(ctx, claim("before", "o"))
	n4 := tc.start("n4", 0, first.GossipAddr())
	waitFor(t, 30*time.Second, "n4 in the leader's gossip", func() bool {
		_, ok := tc.leader().gossip.lookup("n4")
		return ok
	})
	// n5, of this version, joins after n4: once the leader has added it,
	// a reconcile has seen n4 too.
	tc.start("n5", 0, first.GossipAddr())
	waitFor(t, 30*time.Second, "n5 added as a voter", func() bool { return inConfig(t, tc.leader(), "n5") })
	leader := tc.leader()
	if inConfig(t, leader, "n4") {
		t.Fatal("the leader added n4, which decodes only JSON")
	}
	if got := leader.Status().LogEncoding; got != int(fsm.MaxEncoding) {
		t.Fatalf("log_encoding %d with the older server kept out, want %d", got, fsm.MaxEncoding)
	}

	raftAddr, gossipAddr := n4.RaftAddr(), n4.GossipAddr()
	if err := n4.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, "n4")
	old = false
	tc.startAt("n4", raftAddr, gossipAddr, 0, first.GossipAddr())
	waitFor(t, 30*time.Second, "the upgraded n4 added as a voter", func() bool { return inConfig(t, tc.leader(), "n4") })
	tc.propose(ctx, claim("after", "o"))
	if got := lastEntryEncoding(t, tc.leader()); got != fsm.MaxEncoding {
		t.Fatalf("after n4's upgrade the leader wrote encoding %d", got)
	}
}

// A leader that loses leadership forgets the encoding it chose: the next
// term, its own or another node's, chooses again from its configuration
// (which another leader may have changed meanwhile).
func TestEncodingIsChosenAgainEachTerm(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.LeaveOnShutdown = false })
	tc.startN(3)
	ctx := ctxT(t)
	tc.propose(ctx, claim("k", "o"))
	old := tc.leader()
	waitFor(t, 30*time.Second, "the binary encoding", func() bool { return old.Status().LogEncoding == int(fsm.MaxEncoding) })
	if err := old.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatalf("leadership transfer: %v", err)
	}
	waitFor(t, 30*time.Second, "a new leader", func() bool { return tc.leader() != old })
	if got := old.logEncoding(); got != fsm.EncodingJSON {
		t.Fatalf("the former leader still holds encoding %d", got)
	}
	waitFor(t, 30*time.Second, "the new leader to choose binary", func() bool {
		return tc.leader().Status().LogEncoding == int(fsm.MaxEncoding)
	})
}
