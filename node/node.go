// Package node wires one intentd node: the cluster member (Raft and
// gossip), the ledger service, the HTTP API with its authentication, rate
// limits and metrics, the web console under /ui/, and the optional pprof
// and fault-suite endpoints.
// cmd/intentd fills a Config from flags and calls Run; the local cluster,
// the canary and every test that needs a node start the same wiring with
// New and Start, so what they test is what runs in production.
package node

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
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/console"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/internal/faults"
	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/internal/tracing"
	"github.com/intentledger/intentd/ledger"
)

// Config is everything a node needs; cmd/intentd fills it from flags.
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
	// LogStore is the Raft log store: cluster.LogStoreWAL (the default)
	// or cluster.LogStoreBoltDB.
	LogStore string
	// WALSegmentSize is raft-wal's segment size in bytes
	// (cluster.Config.WALSegmentSize; 0: 64 MiB).
	WALSegmentSize int
	// StateEngine is where the state machine lives:
	// cluster.StateEnginePebble (the default, on disk) or
	// cluster.StateEngineMemory.
	StateEngine string
	// StateMemory sizes the on-disk state machine's cache and memtables
	// (zero fields: the engine's defaults; cmd/intentd sizes them from the
	// memory capacity, SizeStateMemory).
	StateMemory     StateMemory
	Limits          ledger.Limits
	Raft            cluster.RaftTuning
	LogLevel        string
	LogFormat       string
	ShutdownTimeout time.Duration
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
	// APIKeysPoll is how often the node checks APIKeysFile and reloads
	// the keys when its content changed (0: never; DefaultConfig sets
	// DefaultAPIKeysPoll). Reload, when set, reloads them on every value
	// (cmd/intentd sends SIGHUP). See reload.go.
	APIKeysPoll time.Duration
	Reload      <-chan os.Signal
	// RateLimits bound requests per client and per intent key.
	RateLimits httpapi.RateLimits
	// NamespaceQuotasFile is a JSON file of quotas by namespace
	// (ledger.ParseNamespaceQuotas): claims per second and stored
	// intents, checked by the leader. Reloaded with the API keys (Reload,
	// SIGHUP). Empty: no quotas.
	NamespaceQuotasFile string
	// Capacity is where the leader refuses claims of new keys with 507
	// ledger_full: the data dir's free disk, its size, the live heap
	// (capacity.go).
	Capacity CapacityConfig
	// PprofAddr, when set, serves /debug/pprof/ on its own listener.
	PprofAddr string
	// TestHooks serves the fault suite's debug endpoints; TestBug seeds one
	// of faults.All (only in a binary built with -tags faults). Neither is
	// for production.
	TestHooks bool
	TestBug   string
	Logger    *slog.Logger
	// Timings, where not zero, override Raft's, the reconcile loop's and
	// gossip's intervals (cluster.FastTimings for in-process clusters).
	Timings cluster.Timings
	// Region, Replica, PreferLeaderRegion and Network are cluster.Config's:
	// where the node runs, whether it is a non-voting replica, where the
	// leader should be, and the timing profile (lan or wan).
	Region             string
	Replica            bool
	PreferLeaderRegion string
	Network            string
	// LocalDuplicates makes the node, while it is not the leader, answer
	// duplicate claims from its own copy (ledger.LocalDuplicates), with
	// LocalDuplicateMargin as the clock skew margin (0: its default).
	LocalDuplicates      bool
	LocalDuplicateMargin time.Duration
	// ReadyMaxLag is cluster.Config's: how many entries the node may be
	// behind its leader's commit index and count ready (0: its default).
	ReadyMaxLag uint64
	// OTLPEndpoint turns tracing on: spans are exported over OTLP/HTTP to
	// this collector URL (internal/tracing). Empty: no spans, no exporter.
	OTLPEndpoint string
	// TracerProvider, when set, records the node's spans instead (tests:
	// an in-memory exporter); OTLPEndpoint is then ignored.
	TracerProvider trace.TracerProvider
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
		LeaveOnTerminate: false, // a routine stop never shrinks the voter set
		ReadyMaxLag:      cluster.DefaultReadyMaxLag,
		LogStore:         cluster.LogStoreWAL,
		Limits:           ledger.DefaultLimits,
		Capacity:         CapacityConfig{MinFreeDiskAuto: true},
		LogLevel:         "info",
		LogFormat:        "text",
		StateEngine:      StateEnginePebble,
		ShutdownTimeout:  20 * time.Second,
		Auth:             AuthRequired,
		APIKeysPoll:      DefaultAPIKeysPoll,
		RateLimits:       httpapi.DefaultRateLimits,
		Security:         SecurityConfig{ClusterName: tlsutil.DefaultCluster},
	}
}

// The values of Config.Network: the timing profiles of cluster.Config.
const (
	NetworkLAN = cluster.NetworkLAN
	NetworkWAN = cluster.NetworkWAN
)

// The values of Config.StateEngine (cluster.Config.StateEngine).
const (
	StateEnginePebble = cluster.StateEnginePebble
	StateEngineMemory = cluster.StateEngineMemory
)

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
	log.Info("API keys loaded", "keys", ks.Len(), "names", strings.Join(ks.Names(), ","), "digest", ks.Digest())
	return ks, nil
}

// The API declares what it consumes of the cluster member over
// clusterview's plain data and does not import cluster: the wiring checks
// here, at compile time, that *cluster.Node has it all (PeerAdmin is
// otherwise only found by a type assertion at run time).
var (
	_ httpapi.ClusterInfo = (*cluster.Node)(nil)
	_ httpapi.Snapshotter = (*cluster.Node)(nil)
	_ httpapi.PeerAdmin   = (*cluster.Node)(nil)
)

// Node is one running node: cluster member plus HTTP API. Tests run it
// in-process with ports set to 0.
type Node struct {
	cfg      Config
	log      *slog.Logger
	ln       net.Listener
	srv      *http.Server
	cluster  *cluster.Node
	svc      *ledger.Service
	registry *prometheus.Registry
	served   chan error
	debug    *debugServer // pprof, when --pprof is set
	// capacity samples the resources behind ledger_full; stopCapacity
	// stops its loop.
	capacity     *ledger.CapacityMonitor
	stopCapacity func()
	reloader     *keyReloader // API key reloads (reload.go); nil with auth off
	// tracer records spans (nil: tracing off); exporter is the OTLP
	// provider the node made and flushes on Shutdown (nil otherwise).
	tracer   trace.TracerProvider
	exporter *sdktrace.TracerProvider
	// clockOffset skews this node's clock (nanoseconds); set only through
	// the test hooks.
	clockOffset atomic.Int64
	// afterStep, set only by tests, is called after each step of Start
	// with the step's name (loading, listening, cluster, ledger, pprof).
	afterStep func(step string)
}

// New returns a node that Start will run.
func New(cfg Config) *Node {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.ID)}
}

// Start applies the configuration's defaults (Config.WithDefaults),
// checks it (Config.Validate), binds the HTTP listener, starts the cluster
// node and the ledger service and serves the API. It does not wait for a
// leader (Cluster().WaitLeader does).
//
// Every step that starts something registers how to stop it; if a later
// step fails, Start stops them all, last first, and returns the error:
// a failed Start leaves no listener, Raft, gossip, open file or goroutine
// behind. ctx bounds the start: once it ends, Start stops at its next step
// the same way and returns ctx's error.
func (n *Node) Start(ctx context.Context) (err error) {
	n.cfg = n.cfg.WithDefaults()
	if err := n.cfg.Validate(); err != nil {
		return err
	}
	var undo unwind
	defer func() {
		if err != nil {
			undo.run()
		}
	}()
	// step ends the start when ctx has ended, after the step named done.
	step := func(done string) error {
		if n.afterStep != nil {
			n.afterStep(done)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("start stopped after %s: %w", done, err)
		}
		return nil
	}
	bugs, err := faults.Parse(n.cfg.TestBug)
	if err != nil {
		return fmt.Errorf("--test-bug: %w", err)
	}
	sec, err := n.cfg.Security.load(n.cfg.ID)
	if err != nil {
		return err
	}
	kek, err := n.cfg.KEK.load(n.log, n.cfg.Auth != AuthOff)
	if err != nil {
		return err
	}
	// Before Raft starts: a bad keys file stops the node with its own
	// error, not after a bootstrap and a kill.
	keys, err := n.cfg.loadKeys(n.log)
	if err != nil {
		return err
	}
	quotas, err := n.cfg.loadQuotas()
	if err != nil {
		return err
	}
	if err := step("loading"); err != nil {
		return err
	}
	n.tracer = n.cfg.TracerProvider
	if n.tracer == nil && n.cfg.OTLPEndpoint != "" {
		tp, err := tracing.New(ctx, tracing.Config{Endpoint: n.cfg.OTLPEndpoint, Service: "intentd", Instance: n.cfg.ID})
		if err != nil {
			return err
		}
		n.tracer, n.exporter = tp, tp
		undo.push(func() { n.stopExporter(ctx) })
	}
	ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on --http-addr: %w", err)
	}
	undo.push(func() { _ = ln.Close() })
	n.ln = ln
	if err := step("listening"); err != nil {
		return err
	}
	advertise := n.cfg.HTTPAdvertise
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	if sec.http != nil && !strings.Contains(advertise, "://") {
		advertise = "https://" + advertise // followers forward with this scheme
	}
	cc := cluster.Config{
		ID: n.cfg.ID, DataDir: n.cfg.DataDir,
		RaftAddr: n.cfg.RaftAddr, RaftAdvertise: n.cfg.RaftAdvertise,
		GossipAddr: n.cfg.GossipAddr, GossipAdvertise: n.cfg.GossipAdvertise,
		HTTPAddr: advertise, Join: n.cfg.Join, BootstrapExpect: n.cfg.BootstrapExpect,
		LeaveOnShutdown: n.cfg.LeaveOnTerminate, LogStore: n.cfg.LogStore, WALSegmentSize: n.cfg.WALSegmentSize,
		StateEngine: n.cfg.StateEngine, StateCacheBytes: int64(n.cfg.StateMemory.CacheBytes),
		StateMemTableBytes: n.cfg.StateMemory.MemTableBytes, Logger: n.cfg.Logger, Raft: n.cfg.Raft,
		RaftTLS: sec.peer, PeerIdentity: sec.identity, GossipKey: sec.gossipKey,
		Clock:  func() time.Time { return time.Now().Add(time.Duration(n.clockOffset.Load())) },
		Faults: bugs, Region: n.cfg.Region, Replica: n.cfg.Replica, PreferLeaderRegion: n.cfg.PreferLeaderRegion,
		Network: n.cfg.Network, ReadyMaxLag: n.cfg.ReadyMaxLag, TracerProvider: n.tracer,
		// Digests only: nodes compare them at join (cluster/progress.go).
		Identity: cluster.Identity{Cluster: clusterName(n.cfg.Security), KEK: kek.ID(), APIKeys: keys.Digest},
	}
	n.cfg.Timings.Apply(&cc)
	logWrite := newLogWriteHistogram()
	cc.ObserveLogWrite = func(d time.Duration) { logWrite.Observe(d.Seconds()) }
	cn, err := cluster.New(cc)
	if err != nil {
		return err
	}
	undo.push(func() { _ = cn.Kill() })
	n.cluster = cn
	if err := step("cluster"); err != nil {
		return err
	}
	n.registry = prometheus.NewRegistry()
	n.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n.registry.MustRegister(newClusterCollector(cn), logWrite, newDiskCollector(n.cfg.DataDir))
	if n.cfg.Capacity.MaxMemoryAuto {
		if v, _, err := MemoryCapacity(); err == nil {
			n.cfg.Capacity.MaxMemory = v
		}
	}
	capacity, err := newCapacityMonitor(n.cfg.Capacity, n.cfg.DataDir, n.log)
	if err != nil {
		return fmt.Errorf("--memory-high-water: %w", err)
	}
	n.capacity, n.stopCapacity = capacity, runCapacity(capacity)
	undo.push(n.stopCapacity)
	n.registry.MustRegister(newCapacityCollector(capacity))
	lc := ledger.Config{Limits: n.cfg.Limits, KEK: kek, Log: n.log, Node: n.cfg.ID, Faults: bugs,
		RefusalNotes: ledger.RefusalNotes{Now: cc.Clock, Log: n.log}, Leading: cn.IsLeader, NamespaceQuotas: quotas,
		Capacity: capacity}
	if n.cfg.LocalDuplicates {
		lc.LocalDuplicates = &ledger.LocalDuplicates{Node: n.cfg.ID, Leading: cn.IsLeader,
			Margin: n.cfg.LocalDuplicateMargin, Now: cc.Clock, Log: n.log}
	}
	svc, err := ledger.New(n.instrument(cn), lc)
	if err != nil {
		return err
	}
	undo.push(svc.Close)
	n.svc = svc
	if n.cfg.TestBug != "" {
		n.log.Warn("SEEDED BUG ACTIVE: this node is deliberately incorrect (fault-suite positive control)", "bug", n.cfg.TestBug)
	}
	if err := step("ledger"); err != nil {
		return err
	}
	n.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "intentd_long_polls_waiting",
		Help: "Long-polls (GET /v1/intents/{key}?wait=) waiting on this node; capped by --max-waiters.",
	}, func() float64 { return float64(svc.Waiting()) }))
	if n.cfg.LocalDuplicates {
		n.registry.MustRegister(newLocalDuplicateCollector(svc))
	}
	if n.reloader = n.newKeyReloader(keys); n.reloader != nil {
		n.reloader.onSignal = n.reloadQuotas
		n.registry.MustRegister(n.reloader)
	}
	api := httpapi.New(httpapi.Config{
		Auth:           keys,
		RateLimits:     &n.cfg.RateLimits,
		Service:        svc,
		Cluster:        cn,
		Registry:       n.registry,
		ForwardClient:  sec.forward,
		ForwardTLS:     sec.http != nil,
		PeerAuth:       sec.peers,
		Snapshots:      cn,
		Logger:         n.log,
		NodeID:         n.cfg.ID,
		TracerProvider: n.tracer,
	})
	// The web console: static files under /ui/, no key needed to load
	// them; every call its pages make is an API call with the person's key.
	handler := console.Mount(api.Handler())
	if n.cfg.TestHooks {
		n.log.Warn("test hooks enabled: /debug/digest and /debug/clock-offset are served")
		handler = n.withTestHooks(handler, keys)
	}
	n.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      ledger.MaxWait + 30*time.Second, // a long-poll answers after up to MaxWait
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
	if n.cfg.PprofAddr != "" {
		d, err := startDebugServer(n.cfg.PprofAddr, n.log)
		if err != nil {
			return err
		}
		undo.push(func() { _ = d.close() })
		n.debug = d
	}
	if err := step("pprof"); err != nil {
		return err
	}
	// Nothing fails from here on: serve.
	if sec.http != nil {
		ln = tls.NewListener(ln, sec.http)
	}
	n.served = make(chan error, 1)
	go func() { n.served <- n.srv.Serve(ln) }()
	if n.reloader != nil {
		n.reloader.start()
	}
	n.log.Info("serving", "http", advertise, "tls", sec.http != nil, "gossip_encrypted", sec.gossipKey != nil, "raft", cn.RaftAddr(), "gossip", cn.GossipAddr(),
		"data_dir", n.cfg.DataDir)
	return nil
}

// unwind is how a failing Start stops what it had started: each step that
// starts something pushes how to stop it, and run stops them all, last
// first. Their errors are dropped: Start returns the error that made it
// fail.
type unwind []func()

func (u *unwind) push(stop func()) { *u = append(*u, stop) }

func (u unwind) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// HTTPAddr is the bound HTTP address.
func (n *Node) HTTPAddr() string { return n.ln.Addr().String() }

// Cluster returns the node's cluster member (Raft and gossip).
func (n *Node) Cluster() *cluster.Node { return n.cluster }

// httpDrain bounds how long Shutdown waits for requests in flight (a
// long-poll may wait up to a minute) before it closes their connections.
const httpDrain = 5 * time.Second

// Shutdown answers every waiting long-poll, stops accepting requests and
// drains the ones in flight (for at most httpDrain, or a quarter of ctx's
// time if that is less, then cuts them), then shuts the node down
// gracefully (leadership handover, gossip
// leave, Raft close), bounded by ctx.
func (n *Node) Shutdown(ctx context.Context) error {
	var errs []error
	n.reloader.close()
	n.stopCapacity()
	n.svc.Close() // waiting long-polls answer now with what they have
	drain := httpDrain
	if d, ok := ctx.Deadline(); ok {
		drain = min(drain, time.Until(d)/4)
	}
	drainCtx, cancel := context.WithTimeout(ctx, drain)
	err := n.srv.Shutdown(drainCtx)
	cancel()
	if err != nil {
		n.log.Warn("requests still in flight after the drain; closing their connections", "drain", drain)
		if err := n.srv.Close(); err != nil {
			errs = append(errs, fmt.Errorf("http close: %w", err))
		}
	}
	if err := n.cluster.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("node shutdown: %w", err))
	}
	if err := <-n.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("http serve: %w", err))
	}
	if n.debug != nil {
		if err := n.debug.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.exporter != nil {
		// The spans still queued go out before the process ends.
		if err := n.exporter.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flushing spans: %w", err))
		}
	}
	return errors.Join(errs...)
}

// stopExporter stops the OTLP exporter of a start that failed, or of a
// killed node, giving it at most a second to send what it holds. ctx may
// be done already (a start stopped by its ctx): the SDK's Shutdown skips
// stopping its span processors when handed a done context, which would
// leave their goroutines and HTTP client running, so the shutdown gets a
// context of its own.
func (n *Node) stopExporter(ctx context.Context) {
	if n.exporter != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = n.exporter.Shutdown(sctx)
		n.exporter = nil
	}
}

// Kill stops the node like a crash: connections are cut and Raft stops
// without handing over leadership or leaving gossip. The ledger's loops
// stop too (in a test process they would outlive the node), after Raft:
// the notes they held are lost, as in a crash, not recorded.
func (n *Node) Kill() {
	n.reloader.close()
	n.stopCapacity()
	_ = n.srv.Close()
	_ = n.cluster.Kill()
	n.svc.Close()
	<-n.served
	if n.debug != nil {
		_ = n.debug.close()
	}
	// A crash would send nothing; the SDK has no way to drop its queue, so
	// the exporter gets at most a second to stop.
	n.stopExporter(context.Background())
}
