// Package localcluster starts a real intentd cluster of in-process nodes on
// loopback (Raft with raft-boltdb on disk, memberlist gossip and the HTTP
// API, each on its own ports), for the SDK's tests and the canary gate.
package localcluster

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
	"time"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/ledger"
)

// Cluster is a real intentd cluster of in-process nodes: Raft with
// raft-boltdb on disk, memberlist gossip and the HTTP API, each on its own
// loopback ports. Nodes forward writes to the leader as in production.
type Cluster struct {
	dir   string
	owned bool // dir was made by Start and is removed by Close
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

// Start starts size nodes that bootstrap together under dir (a new
// temporary directory, removed by Close, when dir is "") and waits within ctx
// until every one is ready (knows a leader and has caught up). On error
// everything started is stopped. Set INTENTD_TEST_LOGS=1 to see node logs.
func Start(ctx context.Context, size int, dir string) (*Cluster, error) {
	c := &Cluster{dir: dir}
	if dir == "" {
		d, err := os.MkdirTemp("", "intentd-local-")
		if err != nil {
			return nil, fmt.Errorf("localcluster: data dir: %w", err)
		}
		c.dir, c.owned = d, true
	}
	var join []string
	for i := 1; i <= size; i++ {
		n, err := c.start(fmt.Sprintf("n%d", i), size, join...)
		if err != nil {
			c.Close()
			return nil, err
		}
		if i == 1 {
			join = []string{n.Raft.GossipAddr()}
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("localcluster: cluster of %d did not become ready: %w", size, err)
	}
	return c, nil
}

// Close kills every node and removes the data directory Start made. It is
// safe to call more than once.
func (c *Cluster) Close() {
	for _, n := range c.Nodes() {
		n.Kill()
	}
	if c.owned && c.dir != "" {
		_ = os.RemoveAll(c.dir)
		c.dir = ""
	}
}

func logger() *slog.Logger {
	if os.Getenv("INTENTD_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (c *Cluster) start(id string, expect int, join ...string) (*Node, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("localcluster: listen: %w", err)
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
		Gossip: cluster.GossipTimings{
			ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond, GossipInterval: 50 * time.Millisecond,
		},
	})
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("localcluster: start node %s: %w", id, err)
	}
	api := httpapi.New(httpapi.Config{
		Service: ledger.New(rn, ledger.Limits{}), Cluster: rn, Logger: log, NodeID: id,
	})
	n := &Node{ID: id, URL: "http://" + ln.Addr().String(), Raft: rn, served: make(chan error, 1),
		srv: &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 5 * time.Second}}
	go func() { n.served <- n.srv.Serve(ln) }()
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n, nil
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
		return nil, fmt.Errorf("localcluster: waiting for a ready leader: %w", err)
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
		return fmt.Errorf("localcluster: waiting for every node to be ready: %w", err)
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
