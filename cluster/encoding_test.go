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
		return l.Status().LogEncoding == int(fsm.EncodingBinary)
	})
	for i := 0; i < 5; i++ {
		tc.propose(ctx, claim(fmt.Sprintf("after-%d", i), "o"))
	}
	leader = tc.leader()
	if got := lastEntryEncoding(t, leader); got != fsm.EncodingBinary {
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
