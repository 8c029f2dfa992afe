// Package clienttest runs intentd API servers for tests of code that uses
// the client package: one node over an in-memory ledger (fast, with a clock
// the test moves and failures it injects) and real Raft clusters of
// in-process nodes on loopback. It lives under testkit/, not client/, so
// that the SDK's package tree imports no server package.
package clienttest

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// Epoch is where the clock of a Memory starts.
var Epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Memory is one intentd node serving the real HTTP API over an in-memory
// ledger. It reports itself as the ready leader of a one-node cluster.
type Memory struct {
	// Ledger is the replicated state: move its clock with Advance, make
	// proposals fail with FailNext.
	Ledger *ledgertest.Memory
	// Service is the ledger service the API calls (for
	// ledgertest.AwaitWaiting, say).
	Service *ledger.Service
	// URL is the node's base URL (https:// under WithTLS).
	URL string

	api    http.Handler
	server *httptest.Server

	mu      sync.Mutex
	counts  map[string]int
	changed chan struct{}
}

// MemoryOption configures NewMemory.
type MemoryOption func(*memoryConfig)

type memoryConfig struct {
	wrap      func(http.Handler) http.Handler
	limits    ledger.Limits
	cluster   httpapi.ClusterInfo
	keys      *auth.Keyset
	snapshots httpapi.Snapshotter
	tls       *tls.Config
}

// WithMiddleware puts wrap in front of the API (to drop answers, delay
// them or inject problems). Requests are counted before wrap sees them.
func WithMiddleware(wrap func(http.Handler) http.Handler) MemoryOption {
	return func(c *memoryConfig) { c.wrap = wrap }
}

// WithLimits sets the ledger's limits (zero fields take the defaults).
func WithLimits(l ledger.Limits) MemoryOption {
	return func(c *memoryConfig) { c.limits = l }
}

// WithCluster makes the node report info's status (GET /v1/cluster,
// /readyz) instead of that of a one-node cluster it leads.
func WithCluster(info httpapi.ClusterInfo) MemoryOption {
	return func(c *memoryConfig) { c.cluster = info }
}

// WithAuth turns API keys on: every request but the public ones must
// present one of keys.
func WithAuth(keys *auth.Keyset) MemoryOption {
	return func(c *memoryConfig) { c.keys = keys }
}

// WithSnapshots serves /v1/admin/snapshot (backup and restore) from s.
func WithSnapshots(s httpapi.Snapshotter) MemoryOption {
	return func(c *memoryConfig) { c.snapshots = s }
}

// WithTLS serves HTTPS with conf (its certificates and client
// authentication) instead of plain HTTP.
func WithTLS(conf *tls.Config) MemoryOption {
	return func(c *memoryConfig) { c.tls = conf }
}

// NewMemory starts a node; it stops when the test ends.
func NewMemory(tb testing.TB, opts ...MemoryOption) *Memory {
	tb.Helper()
	var cfg memoryConfig
	for _, o := range opts {
		o(&cfg)
	}
	m := &Memory{Ledger: ledgertest.NewMemory(Epoch), counts: map[string]int{}, changed: make(chan struct{})}
	m.Service = ledgertest.NewService(tb, m.Ledger, ledger.Config{Limits: cfg.limits})
	m.server = httptest.NewUnstartedServer(nil)
	var info httpapi.ClusterInfo = selfLeader{addr: m.server.Listener.Addr().String()}
	if cfg.cluster != nil {
		info = cfg.cluster
	}
	api := httpapi.New(httpapi.Config{
		Service: m.Service, Cluster: info, NodeID: "mem", Now: m.Ledger.Now,
		Auth: cfg.keys, Snapshots: cfg.snapshots,
	})
	m.api = api.Handler()
	var h http.Handler = m.api
	if cfg.wrap != nil {
		h = cfg.wrap(h)
	}
	m.server.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.count(Op(r))
		h.ServeHTTP(w, r)
	})
	if cfg.tls != nil {
		m.server.TLS = cfg.tls
		m.server.StartTLS()
	} else {
		m.server.Start()
	}
	m.URL = m.server.URL
	tb.Cleanup(m.server.Close)
	return m
}

// API returns the API handler itself, without middleware or counting.
func (m *Memory) API() http.Handler { return m.api }

// Close stops the server: later calls fail to connect.
func (m *Memory) Close() { m.server.Close() }

func (m *Memory) count(op string) {
	m.mu.Lock()
	m.counts[op]++
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// Requests returns how many requests of the operation op (see Op) the
// node received.
func (m *Memory) Requests(op string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[op]
}

// WaitRequests blocks until the node received at least n requests of
// operation op, or ctx ends.
func (m *Memory) WaitRequests(ctx context.Context, op string, n int) error {
	for {
		m.mu.Lock()
		got, changed := m.counts[op], m.changed
		m.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Op names the API operation of a request: "claim", "complete", "renew",
// "commit", "resolve", "approve", "reject", "get", "list", "audit",
// "cluster", "healthz", "readyz" or "other".
func Op(r *http.Request) string {
	path := r.URL.Path
	switch {
	case path == "/v1/intents":
		if r.Method == http.MethodPost {
			return "claim"
		}
		return "list"
	case path == "/v1/cluster":
		return "cluster"
	case path == "/healthz", path == "/readyz":
		return path[1:]
	case strings.HasPrefix(path, "/v1/intents/"):
		rest := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/intents/")
		if i := strings.LastIndexByte(rest, '/'); i >= 0 {
			switch action := rest[i+1:]; action {
			case "complete", "renew", "commit", "resolve", "approve", "reject", "audit":
				return action
			}
		}
		return "get"
	}
	return "other"
}

// selfLeader is the status of a one-node cluster led by the node itself.
type selfLeader struct{ addr string }

func (s selfLeader) Status() cluster.Status {
	return cluster.Status{
		NodeID: "mem", State: "leader", LeaderID: "mem", LeaderHTTP: s.addr, Term: 1, Ready: true,
		Nodes: []cluster.MemberStatus{{ID: "mem", RaftAddr: "in-memory", HTTPAddr: s.addr, Suffrage: "voter", Gossip: "alive", Leader: true}},
	}
}
