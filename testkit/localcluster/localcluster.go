// Package localcluster starts a real intentd cluster of in-process nodes on
// loopback, for the SDK's tests and the canary gate. Each node is the
// production wiring (node: Raft with its log on disk, gossip, the
// ledger service and the HTTP API with its body cap, rate limits and
// metrics, the web console) with fast timings, each on its own ports, and
// auth off unless StartWith is given API keys.
package localcluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/node"
)

// Cluster is a real intentd cluster of in-process nodes (node),
// each on its own loopback ports. Nodes forward writes to the leader as in
// production.
type Cluster struct {
	dir   string
	owned bool // dir was made by Start and is removed by Close
	// apiKeys and gossipKey turn auth on (StartWith).
	apiKeys, gossipKey string

	mu    sync.Mutex
	nodes []*Node
}

// Node is one member of a Cluster.
type Node struct {
	// ID is the node's name ("n1", "n2" ...).
	ID string
	// URL is the node's HTTP base URL.
	URL string
	// Raft is the node's cluster member (Raft and gossip).
	Raft *cluster.Node

	node   *node.Node
	killed atomic.Bool
}

// Options configures StartWith.
type Options struct {
	// Size is the number of nodes.
	Size int
	// Dir holds the nodes' data directories; "" makes a temporary one,
	// removed by Close.
	Dir string
	// APIKeys, when set, turns auth on (--auth=required) with these keys,
	// in the INTENTD_API_KEYS form name:namespace:role+role:sha256,...
	// (auth.GenerateKey makes a key and its hash); the nodes then share a
	// fresh gossip key, as auth requires. Empty: auth off.
	APIKeys string
}

// Start starts size nodes that bootstrap together under dir (a new
// temporary directory, removed by Close, when dir is "") and waits within ctx
// until every one is ready (knows a leader and has caught up). On error
// everything started is stopped. Set INTENTD_TEST_LOGS=1 to see node logs.
func Start(ctx context.Context, size int, dir string) (*Cluster, error) {
	return StartWith(ctx, Options{Size: size, Dir: dir})
}

// StartWith is Start with options: with auth on when opts.APIKeys is set.
func StartWith(ctx context.Context, opts Options) (*Cluster, error) {
	size, dir := opts.Size, opts.Dir
	c := &Cluster{dir: dir, apiKeys: opts.APIKeys}
	if c.apiKeys != "" {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("localcluster: gossip key: %w", err)
		}
		c.gossipKey = base64.StdEncoding.EncodeToString(key)
	}
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
	cfg := node.DefaultConfig()
	cfg.ID, cfg.DataDir = id, filepath.Join(c.dir, id)
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Join, cfg.BootstrapExpect = join, expect
	cfg.Auth = node.AuthOff
	if c.apiKeys != "" {
		cfg.Auth, cfg.APIKeys, cfg.Security.GossipKey = node.AuthRequired, c.apiKeys, c.gossipKey
	}
	cfg.RateLimits = httpapi.RateLimits{} // load tests and the canary hammer few keys from one address
	cfg.Logger = logger()
	cfg.Timings = cluster.FastTimings()
	nd := node.New(cfg)
	if err := nd.Start(context.Background()); err != nil {
		return nil, fmt.Errorf("localcluster: start node %s: %w", id, err)
	}
	n := &Node{ID: id, URL: "http://" + nd.HTTPAddr(), Raft: nd.Cluster(), node: nd}
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
	n.node.Kill()
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
