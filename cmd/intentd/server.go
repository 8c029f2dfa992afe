package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/ledger"
)

// Config is everything a node needs; flags fill it in run.
type Config struct {
	ID               string
	DataDir          string
	HTTPAddr         string
	HTTPAdvertise    string
	RaftAddr         string
	RaftAdvertise    string
	GossipAddr       string
	GossipAdvertise  string
	Join             []string
	BootstrapExpect  int
	LeaveOnTerminate bool
	Limits           ledger.Limits
	Raft             cluster.RaftTuning
	LogLevel         string
	LogFormat        string
	ShutdownTimeout  time.Duration
	// Security is TLS and gossip encryption (security.go).
	Security SecurityConfig
	// KEK is the key-encryption key that seals signing seeds (kek.go).
	KEK KEKConfig
	// Auth is "required" (every API call but the public ones needs an API
	// key from APIKeysFile or APIKeys, the INTENTD_API_KEYS value) or
	// "off" (development only: anyone who reaches the port may do
	// anything).
	Auth        string
	APIKeysFile string
	APIKeys     string
	// RateLimits bound requests per client and per intent key.
	RateLimits httpapi.RateLimits
	// PprofAddr, when set, serves /debug/pprof/ on its own listener.
	PprofAddr string
	// TestHooks serves the fault suite's debug endpoints; TestBug seeds one
	// of testBugs. Neither is for production.
	TestHooks bool
	TestBug   string
	Logger    *slog.Logger
	// Tune lets tests adjust the cluster configuration (clock, intervals).
	Tune func(*cluster.Config)
}

// DefaultConfig is a single-node ledger on loopback.
func DefaultConfig() Config {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node1"
	}
	return Config{
		ID:               host,
		DataDir:          filepath.Join("data", host),
		HTTPAddr:         "127.0.0.1:8100",
		RaftAddr:         "127.0.0.1:8200",
		GossipAddr:       "127.0.0.1:8300",
		LeaveOnTerminate: true,
		Limits:           ledger.DefaultLimits,
		LogLevel:         "info",
		LogFormat:        "text",
		ShutdownTimeout:  20 * time.Second,
		Auth:             AuthRequired,
		RateLimits:       httpapi.DefaultRateLimits,
	}
}

// The values of Config.Auth.
const (
	AuthRequired = "required"
	AuthOff      = "off"
)

// loadKeys returns the API keys the node enforces, nil when auth is off.
func (c Config) loadKeys(log *slog.Logger) (*auth.Keyset, error) {
	if c.Auth == AuthOff {
		log.Warn("AUTH IS OFF (--auth=off): every API call is accepted from anyone who reaches the HTTP port, " +
			"in the default namespace, with every role. Development only: never expose this node.")
		return nil, nil
	}
	ks, err := auth.Load(c.APIKeysFile, c.APIKeys)
	if errors.Is(err, auth.ErrNoKeys) {
		return nil, fmt.Errorf("no API keys: give --api-keys-file FILE or %s (intentctl apikey new makes one), or --auth=off for development", auth.EnvVar)
	}
	if err != nil {
		return nil, fmt.Errorf("API keys: %w", err)
	}
	log.Info("API keys loaded", "keys", ks.Len(), "names", strings.Join(ks.Names(), ","))
	return ks, nil
}

// Main is one running node: cluster member plus HTTP API. Tests run it
// in-process with ports set to 0.
type Main struct {
	cfg      Config
	log      *slog.Logger
	ln       net.Listener
	srv      *http.Server
	node     *cluster.Node
	svc      *ledger.Service
	registry *prometheus.Registry
	served   chan error
	debug    *debugServer // pprof, when --pprof is set
	// clockOffset skews this node's clock (nanoseconds); set only through
	// the test hooks.
	clockOffset atomic.Int64
}

// NewMain returns a node that Start will run.
func NewMain(cfg Config) *Main {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Main{cfg: cfg, log: cfg.Logger.With("node", cfg.ID)}
}

// Start binds the HTTP listener, starts the cluster node and serves the API.
func (m *Main) Start(ctx context.Context) error {
	sec, err := m.cfg.Security.load(m.cfg.ID)
	if err != nil {
		return err
	}
	kek, err := m.cfg.KEK.load(m.log, m.cfg.Auth != AuthOff)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", m.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on --http-addr: %w", err)
	}
	m.ln = ln
	advertise := m.cfg.HTTPAdvertise
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if sec.http != nil && !strings.Contains(advertise, "://") {
		advertise = "https://" + advertise // followers forward with this scheme
	}
	cc := cluster.Config{
		ID: m.cfg.ID, DataDir: m.cfg.DataDir,
		RaftAddr: m.cfg.RaftAddr, RaftAdvertise: m.cfg.RaftAdvertise,
		GossipAddr: m.cfg.GossipAddr, GossipAdvertise: m.cfg.GossipAdvertise,
		HTTPAddr: advertise, Join: m.cfg.Join, BootstrapExpect: m.cfg.BootstrapExpect,
		LeaveOnShutdown: m.cfg.LeaveOnTerminate, Logger: m.cfg.Logger, Raft: m.cfg.Raft,
		RaftTLS: sec.peer, PeerIdentity: sec.identity, GossipKey: sec.gossipKey,
		Clock: func() time.Time { return time.Now().Add(time.Duration(m.clockOffset.Load())) },
		Bugs: cluster.Bugs{
			StaleReads:              m.cfg.TestBug == bugStaleReads,
			LeadershipLostIsFailure: m.cfg.TestBug == bugLeadershipLost,
			TrustAnnouncedIDs:       m.cfg.TestBug == bugTrustGossipIDs,
		},
	}
	if m.cfg.Tune != nil {
		m.cfg.Tune(&cc)
	}
	node, err := cluster.New(cc)
	if err != nil {
		_ = ln.Close()
		return err
	}
	m.node = node
	m.registry = prometheus.NewRegistry()
	m.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.registry.MustRegister(newClusterCollector(node))
	svc := ledger.New(m.instrument(node), m.cfg.Limits)
	svc.SetKEK(kek, m.log)
	m.svc = svc
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "intentd_long_polls_waiting",
		Help: "Long-polls (GET /v1/intents/{key}?wait=) waiting on this node; capped by --max-waiters.",
	}, func() float64 { return float64(svc.Waiting()) }))
	if m.cfg.TestBug == bugCheckThenClaim {
		svc.SeedCheckThenClaimBug()
	}
	if m.cfg.TestBug != "" {
		m.log.Warn("SEEDED BUG ACTIVE: this node is deliberately incorrect (fault-suite positive control)", "bug", m.cfg.TestBug)
	}
	keys, err := m.cfg.loadKeys(m.log)
	if err != nil {
		_ = node.Kill()
		_ = ln.Close()
		return err
	}
	api := httpapi.New(httpapi.Config{
		Auth:          keys,
		RateLimits:    &m.cfg.RateLimits,
		Service:       svc,
		Cluster:       node,
		Registry:      m.registry,
		ForwardClient: sec.forward,
		ForwardTLS:    sec.http != nil,
		PeerAuth:      sec.peers,
		Snapshots:     node,
		Logger:        m.log,
		NodeID:        m.cfg.ID,
	})
	handler := api.Handler()
	if m.cfg.TestHooks {
		m.log.Warn("test hooks enabled: /debug/digest and /debug/clock-offset are served")
		handler = m.withTestHooks(handler, keys)
	}
	m.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      ledger.MaxWait + 30*time.Second, // a long-poll answers after up to MaxWait
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
	}
	if sec.http != nil {
		ln = tls.NewListener(ln, sec.http)
	}
	if m.cfg.PprofAddr != "" {
		if m.debug, err = startDebugServer(m.cfg.PprofAddr, m.log); err != nil {
			_ = node.Kill()
			_ = ln.Close()
			return err
		}
	}
	m.served = make(chan error, 1)
	go func() { m.served <- m.srv.Serve(ln) }()
	m.log.Info("serving", "http", advertise, "tls", sec.http != nil, "gossip_encrypted", sec.gossipKey != nil, "raft", node.RaftAddr(), "gossip", node.GossipAddr(),
		"data_dir", m.cfg.DataDir)
	return nil
}

// HTTPAddr is the bound HTTP address.
func (m *Main) HTTPAddr() string { return m.ln.Addr().String() }

// Node returns the cluster node.
func (m *Main) Node() *cluster.Node { return m.node }

// httpDrain bounds how long Shutdown waits for requests in flight (a
// long-poll may wait up to a minute) before it closes their connections.
const httpDrain = 5 * time.Second

// Shutdown answers every waiting long-poll, stops accepting requests and
// drains the ones in flight (for at most httpDrain, or a quarter of ctx's
// time if that is less, then cuts them), then shuts the node down
// gracefully (leadership handover, gossip
// leave, Raft close), bounded by ctx.
func (m *Main) Shutdown(ctx context.Context) error {
	var errs []error
	m.svc.Close() // waiting long-polls answer now with what they have
	drain := httpDrain
	if d, ok := ctx.Deadline(); ok {
		drain = min(drain, time.Until(d)/4)
	}
	drainCtx, cancel := context.WithTimeout(ctx, drain)
	err := m.srv.Shutdown(drainCtx)
	cancel()
	if err != nil {
		m.log.Warn("requests still in flight after the drain; closing their connections", "drain", drain)
		if err := m.srv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("http close: %w", err))
		}
	}
	if err := m.node.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("node shutdown: %w", err))
	}
	if err := <-m.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("http serve: %w", err))
	}
	if m.debug != nil {
		if err := m.debug.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Kill stops the node like a crash: connections are cut and Raft stops
// without handing over leadership or leaving gossip.
func (m *Main) Kill() {
	_ = m.srv.Close()
	_ = m.node.Kill()
	<-m.served
	if m.debug != nil {
		_ = m.debug.close()
	}
}
