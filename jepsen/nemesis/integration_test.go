package nemesis

import (
	"context"
	"math/rand"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
	"github.com/intentledger/intentd/jepsen/netns"
	"github.com/intentledger/intentd/jepsen/netns/netnstest"
	"github.com/intentledger/intentd/jepsen/nodes"
	"github.com/intentledger/intentd/jepsen/wan"
)

const testPrefix = "ijtest-" // shared by the suite's tests: each run removes any crashed one's leftovers

// testContext ends with the test, on Ctrl-C, or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, stop := signal.NotifyContext(t.Context(), os.Interrupt, syscall.SIGTERM)
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return ctx
}

// startCluster builds intentd and starts n nodes in fresh namespaces; the
// test's cleanup tears everything down.
func startCluster(ctx context.Context, t *testing.T, n int) (*netns.Net, *nodes.Cluster) {
	t.Helper()
	nw, c, _ := startClusterOver(ctx, t, n, nil)
	return nw, c
}

// startClusterOver is startCluster with, when m is not nil, the link-delay
// layer of matrix m between the nodes.
func startClusterOver(ctx context.Context, t *testing.T, n int, m *wan.Matrix) (*netns.Net, *nodes.Cluster, *wan.Shaper) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "intentd")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/intentd")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/intentd: %v\n%s", err, out)
	}
	nw, err := netns.Create(ctx, testPrefix, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nw.Close(); err != nil {
			t.Errorf("netns close: %v", err)
		}
	})
	var sh *wan.Shaper
	if m != nil {
		sh = wan.NewShaper(*m, 1)
		links, err := wan.Start(nw, sh, []wan.Port{
			{Name: "http", Listen: nodes.HTTPPeerPort, Backend: nodes.HTTPPort},
			{Name: "raft", Listen: nodes.RaftPort, Backend: nodes.RaftBackendPort},
			{Name: "gossip", Listen: nodes.GossipPort, Backend: nodes.GossipBackendPort, UDP: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // runs after the cluster's cleanup, before the network's
			t.Log(links.Summary())
			if err := links.Close(); err != nil {
				t.Errorf("links close: %v", err)
			}
		})
	}
	c, err := nodes.Start(ctx, nodes.Config{Binary: bin, Net: nw, Dir: t.TempDir(), Relayed: m != nil,
		ExtraArgs: []string{"--test-hooks", "--snapshot-threshold", "64", "--trailing-logs", "16", "--snapshot-interval", "500ms"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // runs before the network's cleanup
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
		if p, err := c.Panics(); err != nil || len(p) > 0 {
			t.Errorf("node logs: panics %q, %v", p, err)
		}
	})
	return nw, c, sh
}

// waitOtherLeader waits until a node other than old says it leads.
func waitOtherLeader(ctx context.Context, t *testing.T, c *nodes.Cluster, old int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		for i := 1; i <= c.Nodes(); i++ {
			if i == old || !c.Running(i) || c.Paused(i) {
				continue
			}
			if st, err := c.Status(ctx, i); err == nil && st.State == "leader" {
				t.Logf("n%d leads while n%d is out", i, old)
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no node other than n%d became leader: %v", old, ctx.Err())
		case <-tick.C:
		}
	}
}

// hold waits d or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}

// once injects nemesis name, checks that leader faults hit, heals it and
// checks every node is ready again.
func once(ctx context.Context, t *testing.T, env *Env, name string) {
	t.Helper()
	nem, err := ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	c := env.Nodes
	before, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	detail, targets, heal, err := nem.Start(ctx, env)
	if err != nil {
		if heal != nil {
			_ = heal(context.WithoutCancel(ctx))
		}
		t.Fatalf("start: %v", err)
	}
	t.Logf("%s: %s, targets %v (leader was n%d)", name, detail, targets, before)
	switch name {
	case "isolate-leader", "kill-leader", "pause-leader", "isolate-leader-region", "kill-leader-region":
		if len(targets) != 1 || targets[0] != nodes.Name(before) { // the regions of the tests have one node
			t.Errorf("targets %v, want the leader n%d", targets, before)
		}
		waitOtherLeader(ctx, t, c, before)
	default:
		hold(ctx, time.Second)
	}
	healCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HealTimeout)
	defer cancel()
	if err := heal(healCtx); err != nil {
		t.Fatalf("heal: %v", err)
	}
	ids := make([]int, c.Nodes())
	for i := range ids {
		ids[i] = i + 1
	}
	readyCtx, cancel2 := context.WithTimeout(ctx, DefaultRecover)
	defer cancel2()
	if err := c.WaitReady(readyCtx, ids...); err != nil {
		t.Fatalf("not ready after healing: %v", err)
	}
	for i := 1; i <= env.Net.Nodes(); i++ {
		if r, err := env.Net.Rules(ctx, i); err != nil || len(r) > 0 {
			t.Errorf("n%d fault rules after healing: %q %v", i, r, err)
		}
	}
}

func TestNemesesThreeNodes(t *testing.T) {
	netnstest.Require(t)
	ctx := testContext(t, 3*time.Minute)
	nw, c := startCluster(ctx, t, 3)
	rec := history.NewRecorder(nil)
	env := &Env{Net: nw, Nodes: c, Rec: rec, Rand: rand.New(rand.NewSource(1)), Log: t.Logf}
	for _, name := range []string{"partition-halves", "isolate-leader", "deafen-leader", "kill-random", "kill-leader",
		"kill-minority", "pause-leader", "pause-random", "loss", "clock-skew", "snapshot-install", "membership"} {
		t.Run(name, func(t *testing.T) { once(ctx, t, env, name) })
		if t.Failed() {
			return
		}
	}

	t.Run("run", func(t *testing.T) {
		runCtx, cancel := context.WithTimeout(ctx, 6*time.Second)
		defer cancel()
		if err := Run(runCtx, env, all(t, "kill-leader", "isolate-leader"), 500*time.Millisecond, time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		_, _, faults := rec.Snapshot()
		if len(faults) == 0 {
			t.Fatal("Run injected no fault")
		}
		for _, f := range faults {
			t.Logf("fault %s: %s targets %v leader %s -> %s (%v..%v)", f.Nemesis, f.Detail, f.Targets,
				f.LeaderBefore, f.LeaderAfter, f.Start.Round(time.Millisecond), f.End.Round(time.Millisecond))
			if f.End == 0 || f.LeaderBefore == "" {
				t.Errorf("fault record incomplete: %+v", f)
			}
		}
		if err := c.WaitReady(ctx, 1, 2, 3); err != nil {
			t.Fatalf("not ready after Run: %v", err)
		}
	})
}

func TestRingAndBridgeFiveNodes(t *testing.T) {
	netnstest.Require(t)
	if testing.Short() {
		t.Skip("5-node cluster skipped in -short mode")
	}
	ctx := testContext(t, 2*time.Minute)
	nw, c := startCluster(ctx, t, 5)
	env := &Env{Net: nw, Nodes: c, Rand: rand.New(rand.NewSource(3)), Log: t.Logf}
	for _, name := range []string{"ring", "bridge"} {
		t.Run(name, func(t *testing.T) { once(ctx, t, env, name) })
	}
}

// Over the link-delay layer (three regions, 80-150 ms round trips, 10%
// jitter): the region nemeses and the network and process faults they
// sit beside all inject, hit and heal.
func TestNemesesOverTheDelayLayer(t *testing.T) {
	netnstest.Require(t)
	ctx := testContext(t, 3*time.Minute)
	layout, err := wan.ParseLayout("eu:1,us:1,ap:1")
	if err != nil {
		t.Fatal(err)
	}
	rtt, err := wan.ParseRTT("eu-us=80ms,eu-ap=150ms,us-ap=150ms", layout)
	if err != nil {
		t.Fatal(err)
	}
	m := wan.NewMatrix(layout, rtt, 0.1)
	nw, c, sh := startClusterOver(ctx, t, 3, &m)
	env := &Env{Net: nw, Nodes: c, Rand: rand.New(rand.NewSource(1)), Log: t.Logf, Layout: &layout, Shaper: sh}
	for _, name := range []string{"wan", "isolate-leader-region", "kill-leader-region", "partition-halves", "deafen-leader",
		"pause-leader", "snapshot-install", "membership"} {
		t.Run(name, func(t *testing.T) { once(ctx, t, env, name) })
		if t.Failed() {
			return
		}
	}
	if got := sh.Matrix(); got.OneWay(1, 3) != 75*time.Millisecond || got.Jitter != 0.1 {
		t.Errorf("after the wan nemesis healed: %s", got)
	}
}
