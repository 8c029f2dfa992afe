package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// testCluster runs nodes in-process on loopback with real TCP.
type testCluster struct {
	t     *testing.T
	dir   string
	nodes map[string]*Node
	tune  func(*Config)
}

// parallelTests records the tests newTestCluster already made parallel (a
// test may start two clusters; t.Parallel may be called once).
var parallelTests sync.Map

// newTestCluster runs the test in parallel with the other cluster tests
// (each node on its own ports and data directory) and skips it under
// -short: the unit tier starts no cluster.
func newTestCluster(t *testing.T, tune func(*Config)) *testCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster: integration tier")
	}
	if _, again := parallelTests.LoadOrStore(t, true); !again {
		t.Parallel()
	}
	tc := &testCluster{t: t, dir: t.TempDir(), nodes: map[string]*Node{}, tune: tune}
	t.Cleanup(func() {
		for _, n := range tc.nodes {
			_ = n.Kill()
		}
	})
	return tc
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("INTENTD_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (tc *testCluster) start(id string, expect int, join ...string) *Node {
	tc.t.Helper()
	return tc.startAt(id, "127.0.0.1:0", "127.0.0.1:0", expect, join...)
}

// startAt starts a node on given Raft and gossip addresses (a restart keeps
// its addresses, as a real deployment does).
func (tc *testCluster) startAt(id, raftAddr, gossipAddr string, expect int, join ...string) *Node {
	tc.t.Helper()
	n, err := New(tc.config(id, raftAddr, gossipAddr, expect, join...))
	if err != nil {
		tc.t.Fatalf("start %s: %v", id, err)
	}
	tc.nodes[id] = n
	return n
}

// config is the configuration startAt starts a node with.
func (tc *testCluster) config(id, raftAddr, gossipAddr string, expect int, join ...string) Config {
	cfg := Config{
		ID:              id,
		DataDir:         filepath.Join(tc.dir, id),
		RaftAddr:        raftAddr,
		GossipAddr:      gossipAddr,
		HTTPAddr:        "http-" + id,
		Join:            join,
		BootstrapExpect: expect,
		LeaveOnShutdown: true,
		Logger:          testLogger(tc.t),
		SweepInterval:   50 * time.Millisecond,
		Gossip:          GossipTimings{PushPullInterval: time.Second},
	}
	FastTimings().Apply(&cfg)
	if tc.tune != nil {
		tc.tune(&cfg)
	}
	return cfg
}

// startN starts n nodes that bootstrap together through the first one's
// gossip address.
func (tc *testCluster) startN(count int) []*Node {
	first := tc.start("n1", count)
	out := []*Node{first}
	for i := 2; i <= count; i++ {
		out = append(out, tc.start(fmt.Sprintf("n%d", i), count, first.GossipAddr()))
	}
	return out
}

func (tc *testCluster) leader() *Node {
	tc.t.Helper()
	var leader *Node
	waitFor(tc.t, 60*time.Second, "a ready leader", func() bool {
		for _, n := range tc.nodes {
			if n.stopping.Load() {
				continue
			}
			if n.IsLeader() && n.Status().Ready {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

// follower returns a running node other than leader, once it knows that
// leader (a follower that has not heard the new leader's first heartbeat
// answers ErrNoLeader, as a client would retry).
func (tc *testCluster) follower(leader *Node) *Node {
	tc.t.Helper()
	for _, n := range tc.nodes {
		if n != leader && !n.stopping.Load() {
			tc.knowsLeader(n, leader)
			return n
		}
	}
	tc.t.Fatal("no follower")
	return nil
}

// knowsLeader waits until n follows leader.
func (tc *testCluster) knowsLeader(n, leader *Node) {
	tc.t.Helper()
	waitFor(tc.t, 60*time.Second, n.ID()+" knowing the leader "+leader.ID(), func() bool {
		_, id := n.raft.LeaderWithID()
		return string(id) == leader.ID()
	})
}

// propose sends cmd to the current leader, retrying (as a client would:
// commands are idempotent) while the outcome is unknown or there is no
// leader.
func (tc *testCluster) propose(ctx context.Context, cmd fsm.Command) *fsm.Result {
	tc.t.Helper()
	for attempt := 0; ; attempt++ {
		r, err := tc.leader().Propose(ctx, cmd)
		if err == nil {
			return r
		}
		if attempt == 20 || !(errors.Is(err, ledger.ErrOutcomeUnknown) || errors.Is(err, ledger.ErrNoLeader) || errors.Is(err, ledger.ErrNotLeader)) {
			tc.t.Fatalf("propose %T: %v", cmd, err)
		}
	}
}

// waitFor polls cond until it holds or the deadline passes (the deadline is
// a hang guard, not a performance threshold).
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func claim(key, owner string) *fsm.Claim {
	payload, fp, err := fsm.Fingerprint("tool", []byte(`{"k":"`+key+`"}`))
	if err != nil {
		panic(err)
	}
	return &fsm.Claim{Namespace: "default", Key: key, Tool: "tool", Owner: owner, Payload: payload, Fingerprint: fp,
		LeaseMS: 60_000, DedupeWindowMS: 3_600_000}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func voters(n *Node) map[string]bool {
	out := map[string]bool{}
	for _, s := range n.Status().Nodes {
		if s.Suffrage == "voter" {
			out[s.ID] = true
		}
	}
	return out
}

func TestThreeNodesReplicateAndServeReads(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)

	r, err := leader.Propose(ctx, claim("k1", "o1"))
	if err != nil {
		t.Fatalf("propose: %v", err)
	}
	if r.Status != fsm.StatusGranted || !r.Created || r.Intent.FencingToken != r.Index {
		t.Fatalf("claim result = %+v", r)
	}
	var got *fsm.Intent
	if err := leader.Read(ctx, ledger.Linearizable, func(l *fsm.Machine) { got = l.Get("default", "k1") }); err != nil {
		t.Fatalf("linearizable read on leader: %v", err)
	}
	if got == nil || got.Owner != "o1" {
		t.Fatalf("leader read %+v", got)
	}
	for id, n := range tc.nodes {
		if n == leader {
			continue
		}
		tc.knowsLeader(n, leader)
		err := n.Read(ctx, ledger.Linearizable, func(*fsm.Machine) {})
		var nl *ledger.NotLeaderError
		if !errors.As(err, &nl) || nl.LeaderID != leader.ID() || nl.LeaderHTTP != "http-"+leader.ID() {
			t.Fatalf("follower %s linearizable read: %v", id, err)
		}
		// A follower's proposal is forwarded: the leader answers it.
		if r, err := n.Propose(ctx, claim("k2", "o1")); err != nil || r.Status != fsm.StatusGranted {
			t.Fatalf("follower %s propose: %+v, %v", id, r, err)
		}
		waitFor(t, 60*time.Second, "follower applies the claim", func() bool {
			var in *fsm.Intent
			_ = n.Read(ctx, ledger.Stale, func(l *fsm.Machine) { in = l.Get("default", "k1") })
			return in != nil && in.FencingToken == r.Index
		})
	}
	if v := voters(leader); len(v) != 3 {
		t.Fatalf("voters = %v", v)
	}
}

// A leader crash loses no acknowledged write, at the replication layer
// (cmd/intentd's TestProcessKill9LeaderNothingAcknowledgedLost is the same
// with real processes and SIGKILL).
func TestLeaderCrashKeepsAcknowledgedWrites(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)
	acked := map[string]uint64{}
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("key-%d", i)
		acked[key] = tc.propose(ctx, claim(key, "owner")).Intent.FencingToken
	}
	leader = tc.leader()
	if err := leader.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	next := tc.leader()
	if next == leader {
		t.Fatal("killed node still leads")
	}
	err := next.Read(ctx, ledger.Linearizable, func(l *fsm.Machine) {
		for key, fence := range acked {
			in := l.Get("default", key)
			if in == nil || in.FencingToken != fence || in.State != fsm.StateDeclared {
				t.Errorf("after failover %s = %+v, want fencing token %d", key, in, fence)
			}
		}
	})
	if err != nil {
		t.Fatalf("read on new leader: %v", err)
	}
	// The same owner re-claiming gets its grant back; another is refused.
	if r := tc.propose(ctx, claim("key-0", "owner")); r.Status != fsm.StatusGranted || r.Created {
		t.Fatalf("re-claim after failover: %+v", r)
	}
	if r := tc.propose(ctx, claim("key-0", "other")); r.Status != fsm.StatusInFlight {
		t.Fatalf("other owner after failover: %+v", r)
	}
}

func TestRestartedNodeCatchesUpFromSnapshot(t *testing.T) {
	tc := newTestCluster(t, compacting)
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)
	follower := tc.follower(leader)
	id, gossipJoin := follower.ID(), leader.GossipAddr()
	raftAddr, gossipAddr := follower.RaftAddr(), follower.GossipAddr()
	if err := follower.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, id)
	for i := 0; i < 200; i++ {
		tc.propose(ctx, claim(fmt.Sprintf("snap-%d", i), "o"))
	}
	leader = tc.leader()
	waitFor(t, 60*time.Second, "the leader to snapshot and compact", func() bool {
		first, err := leader.store.FirstIndex()
		return err == nil && first > 100
	})
	restarted := tc.startAt(id, raftAddr, gossipAddr, 3, gossipJoin)
	waitSameDigest(t, restarted, leader, "the restarted node to catch up")
}

func TestFourthNodeJoinsThroughGossipAsVoter(t *testing.T) {
	tc := newTestCluster(t, nil)
	nodes := tc.startN(3)
	leader := tc.leader()
	fourth := tc.start("n4", 0, nodes[1].GossipAddr())
	waitFor(t, 60*time.Second, "n4 to become a voter", func() bool { return voters(leader)["n4"] })
	ctx := ctxT(t)
	r, err := leader.Propose(ctx, claim("after-join", "o"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "n4 to apply", func() bool {
		var in *fsm.Intent
		_ = fourth.Read(ctx, ledger.Stale, func(l *fsm.Machine) { in = l.Get("default", "after-join") })
		return in != nil && in.FencingToken == r.Index
	})
}

func TestGracefulShutdownHandsOverAndLeaves(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)
	if _, err := leader.Propose(ctx, claim("before", "o")); err != nil {
		t.Fatal(err)
	}
	if err := leader.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	next := tc.leader()
	waitFor(t, 60*time.Second, "the departed leader to be removed from the voters", func() bool {
		v := voters(next)
		return !v[leader.ID()] && len(v) == 2
	})
	if _, err := next.Propose(ctx, claim("after", "o")); err != nil {
		t.Fatalf("propose after handover: %v", err)
	}
	if _, err := leader.Propose(ctx, claim("x", "o")); !errors.Is(err, ledger.ErrShuttingDown) {
		t.Fatalf("propose on stopped node: %v", err)
	}
}

func TestSweeperMovesPassedLeasesToInDoubt(t *testing.T) {
	tc := newTestCluster(t, nil)
	n := tc.start("solo", 1)
	leader := tc.leader()
	if leader != n {
		t.Fatal("single node is not the leader")
	}
	ctx := ctxT(t)
	c := claim("short", "o")
	c.LeaseMS = 100
	if _, err := n.Propose(ctx, c); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the sweeper to expire the lease", func() bool {
		var in *fsm.Intent
		_ = n.Read(ctx, ledger.Stale, func(l *fsm.Machine) { in = l.Get("default", "short") })
		return in != nil && in.State == fsm.StateInDoubt
	})
}

// waitSameDigest waits until n has applied as far as the leader and holds
// the same ledger.
func waitSameDigest(t *testing.T, n, leader *Node, what string) {
	t.Helper()
	want, wantIndex := leader.Digest()
	waitFor(t, 60*time.Second, what, func() bool {
		got, idx := n.Digest()
		if idx < wantIndex {
			return false
		}
		want, wantIndex = leader.Digest()
		return got == want
	})
}

// compacting tunes a node to snapshot and compact its log every few
// entries and to stay a voter across stops: a node stopped for a while
// then needs a snapshot to catch up.
func compacting(c *Config) {
	c.Raft.SnapshotThreshold = 32
	c.Raft.SnapshotInterval = 50 * time.Millisecond
	c.Raft.TrailingLogs = 8
	c.LeaveOnShutdown = false
}
