package clienttest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/token"
)

// startLimit bounds how long StartCluster waits for the cluster to form: a
// hang guard, not a performance threshold.
const startLimit = 90 * time.Second

// Cluster is a real intentd cluster of in-process nodes: Raft with
// raft-boltdb on disk, memberlist gossip and the HTTP API, each on its own
// loopback ports. Nodes forward writes to the leader as in production.
type Cluster struct {
	tb    testing.TB
	dir   string
	mu    sync.Mutex
	nodes []*Node
}

// Node is one member of a Cluster.
type Node struct {
	// ID is the node's name ("n1", "n2" ...).
	ID string
	// URL is the node's HTTP base URL.
	URL string
	// Raft is the cluster node.
	Raft *cluster.Node

	srv    *http.Server
	served chan error
	killed atomic.Bool
}

// StartCluster starts size nodes that bootstrap together and waits until
// every one is ready (knows a leader and has caught up). The nodes are
// killed when the test ends. Set INTENTD_TEST_LOGS=1 to see their logs.
func StartCluster(tb testing.TB, size int) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb, dir: tb.TempDir()}
	tb.Cleanup(func() {
		for _, n := range c.Nodes() {
			n.Kill()
		}
	})
	first := c.start("n1", size)
	for i := 2; i <= size; i++ {
		c.start(fmt.Sprintf("n%d", i), size, first.Raft.GossipAddr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), startLimit)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		tb.Fatalf("clienttest: cluster of %d did not become ready: %v", size, err)
	}
	return c
}

func logger() *slog.Logger {
	if os.Getenv("INTENTD_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (c *Cluster) start(id string, expect int, join ...string) *Node {
	c.tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.tb.Fatalf("clienttest: listen: %v", err)
	}
	log := logger().With("node", id)
	rn, err := cluster.New(cluster.Config{
		ID: id, DataDir: filepath.Join(c.dir, id),
		RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", HTTPAddr: ln.Addr().String(),
		Join: join, BootstrapExpect: expect, Logger: log,
		Raft: cluster.RaftTuning{
			HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
			LeaderLeaseTimeout: 500 * time.Millisecond,
		},
		ReconcileInterval: 200 * time.Millisecond,
		GossipTuning: func(mc *memberlist.Config) {
			mc.ProbeInterval, mc.ProbeTimeout, mc.GossipInterval = 200*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
		},
	})
	if err != nil {
		_ = ln.Close()
		c.tb.Fatalf("clienttest: start node %s: %v", id, err)
	}
	tokens, err := token.NewHMACIssuer([]byte("clienttest"), 0)
	if err != nil {
		_ = rn.Kill()
		_ = ln.Close()
		c.tb.Fatalf("clienttest: token issuer: %v", err)
	}
	api := httpapi.New(httpapi.Config{
		Service: ledger.New(rn, ledger.Limits{}), Cluster: rn, Tokens: tokens, Logger: log, NodeID: id,
	})
	n := &Node{ID: id, URL: "http://" + ln.Addr().String(), Raft: rn, served: make(chan error, 1),
		srv: &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 5 * time.Second}}
	go func() { n.served <- n.srv.Serve(ln) }()
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n
}

// Nodes returns every node, killed ones included.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// URLs returns every node's base URL, killed ones included (as a client
// configured before a crash would hold them).
func (c *Cluster) URLs() []string {
	var out []string
	for _, n := range c.Nodes() {
		out = append(out, n.URL)
	}
	return out
}

// Alive reports whether the node has not been killed.
func (n *Node) Alive() bool { return !n.killed.Load() }

// Kill stops the node like a crash: its connections are cut and Raft stops
// without handing leadership over or leaving gossip. It is safe to call
// more than once.
func (n *Node) Kill() {
	if n.killed.Swap(true) {
		return
	}
	_ = n.srv.Close()
	_ = n.Raft.Kill()
	<-n.served
}

// Leader waits until a live node leads and is ready, and returns it.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	var leader *Node
	err := poll(ctx, func() bool {
		for _, n := range c.Nodes() {
			if n.Alive() && n.Raft.IsLeader() && n.Raft.Status().Ready {
				leader = n
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, fmt.Errorf("clienttest: waiting for a ready leader: %w", err)
	}
	return leader, nil
}

// WaitReady waits until every live node is ready: it knows a leader whose
// term's barrier completed and has applied nearly everything committed.
func (c *Cluster) WaitReady(ctx context.Context) error {
	err := poll(ctx, func() bool {
		for _, n := range c.Nodes() {
			if n.Alive() && !n.Raft.Status().Ready {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("clienttest: waiting for every node to be ready: %w", err)
	}
	return nil
}

// poll checks cond on a ticker until it holds or ctx ends.
func poll(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
	return nil
}
