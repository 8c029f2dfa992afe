package cluster

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// rogueMeta is a memberlist delegate that announces a chosen meta.
type rogueMeta struct{ meta []byte }

func (r rogueMeta) NodeMeta(int) []byte                      { return r.meta }
func (rogueMeta) NotifyMsg([]byte)                           {}
func (rogueMeta) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (rogueMeta) LocalState(bool) []byte                     { return nil }
func (rogueMeta) MergeRemoteState([]byte, bool)              {}

// startRogue joins a gossip member named name (with the cluster's gossip
// key: an insider's credential, or a stolen one) announcing meta, and
// returns it.
func startRogue(t *testing.T, name string, meta memberMeta, join string) *memberlist.Memberlist {
	t.Helper()
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr, mc.BindPort = "127.0.0.1", 0
	mc.SecretKey = gossipKeyA
	mc.Delegate = rogueMeta{meta: b}
	mc.LogOutput = io.Discard
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	if _, err := ml.Join([]string{join}); err != nil {
		t.Fatalf("rogue %s join: %v", name, err)
	}
	return ml
}

// A member that announces another node's ID, or takes another node's name,
// gets nothing: it is not recorded under that ID, receives no forwarded
// request, never becomes a voter, and the cluster keeps its leader. (Before,
// a member was recorded under whatever ID its meta announced: a rogue
// announcing the leader's ID received a follower's forwarded writes with
// the client's API key, and answered them.)
func TestRogueGossipMembersCannotTakeAnID(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.GossipKey = gossipKeyA })
	nodes := tc.startN(3)
	leader := tc.leader()
	term := leader.raft.CurrentTerm()
	before := voters(leader)

	var hits atomic.Int64
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer trap.Close()
	trapAddr := trap.Listener.Addr().String()
	raftTrap, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raftTrap.Close()

	// One announces the leader's ID under a name of its own; one takes the
	// leader's name outright (memberlist refuses it while the leader lives).
	impostorMeta := memberMeta{ID: leader.ID(), Raft: raftTrap.Addr().String(), HTTP: trapAddr, Bootstrapped: true, Encoding: fsm.EncodingVersion}
	startRogue(t, "rogue-1", impostorMeta, nodes[1].GossipAddr())
	startRogue(t, leader.ID(), impostorMeta, nodes[2].GossipAddr())

	follower := tc.follower(leader)
	// Wait until the rogues' alive messages reached every node, and at
	// least one node refused the name conflict.
	waitFor(t, 20*time.Second, "a node to refuse the second claim to the leader's name", func() bool {
		for _, n := range nodes {
			if n.gossip.conflicts.Load() > 0 {
				return true
			}
		}
		return false
	})
	for _, n := range nodes {
		for _, m := range n.gossip.snapshot() {
			if m.meta.HTTP == trapAddr || m.meta.Raft == raftTrap.Addr().String() {
				t.Fatalf("%s recorded a rogue: %+v", n.ID(), m)
			}
		}
	}
	var nl *ledger.NotLeaderError
	if err := follower.notLeader(); !errors.As(err, &nl) || nl.LeaderHTTP != leader.cfg.HTTPAddr {
		t.Fatalf("the follower would forward to %v, want the leader's %q", err, leader.cfg.HTTPAddr)
	}
	// A reconcile round passes: nothing changes.
	tc.propose(ctxT(t), claim("after-rogues", "o"))
	if got := voters(tc.leader()); len(got) != len(before) {
		t.Fatalf("voters %v, want %v", got, before)
	}
	if tc.leader() != leader || leader.raft.CurrentTerm() != term {
		t.Fatalf("the rogues cost the cluster its leader (term %d -> %d)", term, leader.raft.CurrentTerm())
	}
	if hits.Load() != 0 {
		t.Fatalf("the rogue's HTTP address received %d requests", hits.Load())
	}
}

// With TLS, a gossip member with a new ID (and the gossip key) is added as
// a voter only if its Raft address proves that node identity: a rogue
// without a node certificate stays out, so it cannot shrink the quorum.
// (Before, three such rogues became voters and the cluster lost its leader
// for good.)
func TestTLSLeaderAddsNoVoterWithoutANodeIdentity(t *testing.T) {
	pki := devPKI(t)
	tc := tlsCluster(t, pki)
	nodes := tc.startN(3)
	leader := tc.leader()
	term := leader.raft.CurrentTerm()
	raftTrap, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raftTrap.Close()
	go func() { // accept and hold, as a silent rogue would
		for {
			c, err := raftTrap.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for _, id := range []string{"n5", "n6", "n7"} {
		startRogue(t, id, memberMeta{ID: id, Raft: raftTrap.Addr().String(), HTTP: "127.0.0.1:1", Bootstrapped: true,
			Encoding: fsm.EncodingVersion}, nodes[0].GossipAddr())
	}
	waitFor(t, 20*time.Second, "the leader to see the rogues in gossip", func() bool {
		seen := 0
		for _, m := range leader.gossip.snapshot() {
			if m.meta.Raft == raftTrap.Addr().String() {
				seen++
			}
		}
		return seen == 3
	})
	waitFor(t, 30*time.Second, "the leader to refuse each rogue's identity", func() bool {
		return leader.unverified.Load() >= 3
	})
	tc.propose(ctxT(t), claim("tls-after-rogues", "o"))
	if got := voters(leader); len(got) != 3 {
		t.Fatalf("voters %v: a member without a node certificate became a voter", got)
	}
	if !leader.IsLeader() || leader.raft.CurrentTerm() != term {
		t.Fatalf("the rogues cost the cluster its leader (term %d -> %d)", term, leader.raft.CurrentTerm())
	}
}
