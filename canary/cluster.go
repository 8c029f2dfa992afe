package canary

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/token"
)

// Cluster is a real intentd cluster of in-process nodes on loopback: Raft
// with raft-boltdb in a temporary directory, memberlist gossip and the HTTP
// API, as clienttest.StartCluster builds it but without a testing.TB, so
// the canary command can use it too. Close stops it and removes its data.
type Cluster struct {
	dir   string
	nodes []*node
}

type node struct {
	url    string
	raft   *cluster.Node
	srv    *http.Server
	served chan error
}

// StartCluster starts size nodes that bootstrap together and waits, within
// ctx, until every one is ready. On error everything started is stopped.
func StartCluster(ctx context.Context, size int) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "intentd-canary-")
	if err != nil {
		return nil, fmt.Errorf("canary: cluster dir: %w", err)
	}
	c := &Cluster{dir: dir}
	var join []string
	for i := 1; i <= size; i++ {
		n, err := c.start(fmt.Sprintf("n%d", i), size, join)
		if err != nil {
			c.Close()
			return nil, err
		}
		if i == 1 {
			join = []string{n.raft.GossipAddr()}
		}
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !c.ready() {
		select {
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("canary: cluster of %d did not become ready: %w", size, context.Cause(ctx))
		case <-t.C:
		}
	}
	return c, nil
}

func (c *Cluster) ready() bool {
	for _, n := range c.nodes {
		if !n.raft.Status().Ready {
			return false
		}
	}
	return true
}

func (c *Cluster) start(id string, expect int, join []string) (*node, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("canary: listen: %w", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("INTENTD_CANARY_LOGS") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("node", id)
	}
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
		return nil, fmt.Errorf("canary: start node %s: %w", id, err)
	}
	tokens, err := token.NewHMACIssuer([]byte("canary"), 0)
	if err != nil {
		_ = rn.Kill()
		_ = ln.Close()
		return nil, fmt.Errorf("canary: token issuer: %w", err)
	}
	api := httpapi.New(httpapi.Config{
		Service: ledger.New(rn, ledger.Limits{}), Cluster: rn, Tokens: tokens, Logger: log, NodeID: id,
	})
	n := &node{url: "http://" + ln.Addr().String(), raft: rn, served: make(chan error, 1),
		srv: &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 5 * time.Second}}
	go func() { n.served <- n.srv.Serve(ln) }()
	c.nodes = append(c.nodes, n)
	return n, nil
}

// URLs returns every node's HTTP base URL.
func (c *Cluster) URLs() []string {
	out := make([]string, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n.url)
	}
	return out
}

// Close stops every node (HTTP first, then Raft) and removes the data
// directory. It is safe to call more than once.
func (c *Cluster) Close() {
	for _, n := range c.nodes {
		_ = n.srv.Close()
		if err := <-n.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the listener error is of no use after the run
		}
		_ = n.raft.Kill()
	}
	c.nodes = nil
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
		c.dir = ""
	}
}
