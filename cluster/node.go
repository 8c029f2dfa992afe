// Package cluster runs one intent ledger node: hashicorp/raft with its log
// and stable store in raft-wal (or raft-boltdb, see Config.LogStore), file
// snapshots, and its own stream layer under raft's network transport (TCP,
// optionally mutual TLS; transport.go), and memberlist gossip for
// discovery. The leader turns gossip membership into Raft voters and
// proposes the time-driven sweeps. It implements replication.Replicator. No
// raft or memberlist type appears in its API. See DESIGN.md for why it
// works the way it does.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/internal/faults"
)

// Config configures a Node. Zero values take the defaults noted.
type Config struct {
	// ID names the node in Raft and gossip; it must be unique and stable.
	ID string
	// dirSync fsyncs a directory (nil: syncDir); tests record the calls.
	dirSync func(string) error
	// DataDir holds the Raft log and stable store (wal/ or raft.db, see
	// LogStore) and snapshots/.
	DataDir string
	// LogStore selects the Raft log and stable store: LogStoreWAL ("wal",
	// the default) or LogStoreBoltDB ("boltdb"). A data dir keeps the kind
	// it was made with: New refuses one that holds the other kind
	// (ErrLogStore). See DESIGN.md, "Log store".
	LogStore string
	// StateEngine is where the state machine lives: StateEnginePebble
	// (the default: on disk under <data-dir>/state) or StateEngineMemory.
	// See DESIGN.md, "The state machine on disk".
	StateEngine string
	// StateCacheBytes bounds the on-disk state machine's block cache and
	// StateMemTableBytes each of its memtables (0: pebblestate's defaults,
	// 64 and 16 MiB).
	StateCacheBytes    int64
	StateMemTableBytes uint64
	// WALSegmentSize is the size in bytes of raft-wal's segment files
	// (LogStoreWAL only; 0: raft-wal's default, 64 MiB; at least
	// MinWALSegmentSize). An advanced knob: smaller segments are created
	// (and preallocated) more often, so a full disk shows sooner; the fault
	// suite's storage profile uses them. A data dir's existing segments
	// keep their size; new ones take this one.
	WALSegmentSize int
	// RaftAddr is the Raft TCP bind address (host:port; port 0 picks one).
	RaftAddr string
	// RaftAdvertise is the Raft address other nodes dial (default: the
	// bound address).
	RaftAdvertise string
	// GossipAddr is the memberlist bind address (host:port; port 0 picks).
	GossipAddr string
	// GossipAdvertise is the gossip address others reach (default: bound).
	GossipAdvertise string
	// HTTPAddr is this node's advertised HTTP address (host:port), shared
	// through gossip so followers can forward to the leader.
	HTTPAddr string
	// Join lists gossip addresses of existing members; joining is retried
	// in the background until one answers.
	Join []string
	// BootstrapExpect is the number of nodes to wait for in gossip before
	// bootstrapping a new cluster; 0 never bootstraps (join an existing
	// one). A node with existing Raft state never bootstraps again.
	BootstrapExpect int
	// LeaveOnShutdown makes Shutdown a decommission: the node asks the
	// leader, over its Raft port (with TLS, under its node certificate),
	// to remove it from the configuration, then leaves gossip. The leader
	// refuses a removal that would leave the voters without a live
	// majority. False (the default) keeps the node a voter across a stop
	// and a restart: a routine stop never shrinks the voter set.
	LeaveOnShutdown bool
	// Logger receives structured logs (default: slog.Default()).
	Logger *slog.Logger
	// Clock stamps proposals on the leader (default: time.Now). Tests and
	// the fault suite skew it per node.
	Clock func() time.Time
	// Raft timing and log bounds.
	Raft RaftTuning
	// SweepInterval is how often the leader looks for passed leases and
	// dedupe windows (default 1s).
	SweepInterval time.Duration
	// ReconcileInterval is how often the leader reconciles gossip members
	// into voters besides reacting to gossip events (default 2s).
	ReconcileInterval time.Duration
	// ApplyTimeout bounds how long a proposal may wait to be enqueued
	// (default 5s).
	ApplyTimeout time.Duration
	// ForwardTimeout bounds how long a follower waits for the leader's
	// answer to a command it forwarded (default DefaultForwardTimeout);
	// past it the outcome is unknown.
	ForwardTimeout time.Duration
	// TracerProvider records the node's commit and forward spans
	// (tracing.go); nil records none and costs nothing.
	TracerProvider trace.TracerProvider
	// Gossip adjusts gossip's timings; zero values keep memberlist's
	// local-network defaults. FastTimings sets them with Raft's for
	// clusters on one machine.
	Gossip GossipTimings
	// Faults are the fault suite's seeded bugs this node carries
	// (faults.StaleReads, LeadershipLostIsFailure, TrustGossipIDs): always
	// none in the product build.
	Faults faults.Set
	// RaftTLS, when set, runs Raft over mutual TLS (see transport.go); it
	// must require and verify client certificates. nil is plaintext.
	RaftTLS *tls.Config
	// PeerIdentity returns the node ID a verified TLS peer's certificate
	// carries, or an error for one that is not a node of the cluster
	// (tlsutil.PeerIdentity); required with RaftTLS. A peer speaks Raft to
	// this node only as a server of its configuration, and a gossip member
	// becomes a voter only if its Raft address proves its ID.
	PeerIdentity func(*tls.ConnectionState) (string, error)
	// GossipKey, when set, encrypts and authenticates gossip with this
	// AES key (16, 24 or 32 bytes); members without it cannot join.
	GossipKey []byte
	// Region names where the node runs ("eu-west"); it is announced in
	// gossip, shown in Status and used by PreferLeaderRegion. Empty: none.
	Region string
	// Replica makes the node a non-voting member: it receives the log and
	// serves what a follower serves locally (stale reads, long-polls), but
	// never counts toward a quorum and never becomes leader. The leader
	// adds it as a nonvoter; a voter restarted as a replica is demoted and
	// a replica restarted as a voter is promoted (see DESIGN.md, Regions).
	Replica bool
	// PreferLeaderRegion, on the leader, moves leadership to a healthy
	// voter of that region when the leader is elsewhere (see placement.go).
	// Set it on every voter. Empty: leadership stays where elections put it.
	PreferLeaderRegion string
	// Network picks the defaults of the timings that depend on the network
	// between members: NetworkLAN (one data centre, the default) or
	// NetworkWAN (members 30-300 ms apart). Timings set explicitly (Raft,
	// Gossip) win over the profile's.
	Network string
	// ReadyMaxLag is how many entries this node's applied index may be
	// behind the commit index its leader last reported and still count
	// ready, and how close to the leader's log a new member's must be
	// before the leader promotes it from nonvoter to voter (default
	// DefaultReadyMaxLag; progress.go).
	ReadyMaxLag uint64
	// Identity is what every node of the cluster shares (cluster name,
	// KEK and API keys digests): the leader adds no member whose cluster
	// name or KEK differs (progress.go).
	Identity Identity
	// ObserveLogWrite, when set, is called after every append to the Raft
	// log store with the time it took: the write and the fsync that makes
	// it durable (StoreLogs returns only once both are done), so it is the
	// node's fsync latency as Raft sees it. Nil: not measured.
	ObserveLogWrite func(time.Duration)
}

// The network profiles of Config.Network.
const (
	NetworkLAN = "lan"
	NetworkWAN = "wan"
)

// ErrNetwork is a Config.Network that names no profile.
var ErrNetwork = errors.New("cluster: unknown network profile (want lan or wan)")

// RaftTuning holds the Raft settings the ledger exposes.
type RaftTuning struct {
	HeartbeatTimeout   time.Duration // default 1000ms
	ElectionTimeout    time.Duration // default 1000ms
	LeaderLeaseTimeout time.Duration // default 500ms
	CommitTimeout      time.Duration // default 50ms
	MaxAppendEntries   int           // default 256
	SnapshotThreshold  uint64        // entries since last snapshot (default 8192)
	SnapshotInterval   time.Duration // how often to check (default 30s)
	TrailingLogs       uint64        // entries kept after a snapshot (default 10240)
	SnapshotRetain     int           // snapshots kept on disk (default 2)
}

func (c *Config) setDefaults() error {
	if c.ID == "" {
		return errors.New("cluster: node ID is required")
	}
	if c.DataDir == "" {
		return errors.New("cluster: data dir is required")
	}
	if c.LogStore == "" {
		c.LogStore = LogStoreWAL
	}
	if c.StateEngine == "" {
		c.StateEngine = StateEnginePebble
	}
	if c.StateEngine != StateEnginePebble && c.StateEngine != StateEngineMemory {
		return fmt.Errorf("%w %q: want %q or %q", ErrStateEngine, c.StateEngine, StateEnginePebble, StateEngineMemory)
	}
	if c.WALSegmentSize != 0 && (c.WALSegmentSize < MinWALSegmentSize || c.WALSegmentSize > MaxWALSegmentSize) {
		return fmt.Errorf("%w: WAL segment size %d: want %d to %d bytes (or 0, the default)",
			ErrLogStore, c.WALSegmentSize, MinWALSegmentSize, MaxWALSegmentSize)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = time.Second
	}
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = 2 * time.Second
	}
	if c.ApplyTimeout <= 0 {
		c.ApplyTimeout = 5 * time.Second
	}
	if c.Network == "" {
		c.Network = NetworkLAN
	}
	if c.ReadyMaxLag == 0 {
		c.ReadyMaxLag = DefaultReadyMaxLag
	}
	profile, ok := networkProfiles[c.Network]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNetwork, c.Network)
	}
	if c.ForwardTimeout <= 0 {
		c.ForwardTimeout = DefaultForwardTimeout
	}
	r := &c.Raft
	defaultDuration(&r.HeartbeatTimeout, profile.HeartbeatTimeout)
	defaultDuration(&r.ElectionTimeout, profile.ElectionTimeout)
	defaultDuration(&r.LeaderLeaseTimeout, profile.LeaderLeaseTimeout)
	if r.CommitTimeout <= 0 {
		r.CommitTimeout = 50 * time.Millisecond
	}
	if r.MaxAppendEntries <= 0 {
		r.MaxAppendEntries = 256
	}
	if r.SnapshotThreshold == 0 {
		r.SnapshotThreshold = 8192
	}
	if r.SnapshotInterval <= 0 {
		r.SnapshotInterval = 30 * time.Second
	}
	if r.TrailingLogs == 0 {
		r.TrailingLogs = 10240
	}
	if r.SnapshotRetain <= 0 {
		r.SnapshotRetain = 2
	}
	return nil
}

// Node is one member of the ledger cluster.
type Node struct {
	cfg   Config
	tr    trace.Tracer // nil: the node does not trace
	log   *slog.Logger
	raft  *raft.Raft
	store logStore
	// fullGuard keeps the node from standing for election while its disk
	// is full (fullstore.go).
	fullGuard *fullGuard
	logs      raft.LogStore // store behind an in-memory cache of recent entries
	trans     *raft.NetworkTransport
	// raftTrans is trans as raft gets it: without the heartbeat fast path.
	raftTrans raft.Transport
	stream    *streamLayer // under trans: closeInbound on shutdown
	snaps     *indexedSnapshots
	sm        *stateMachine
	ml        *memberlist.Memberlist
	gossip    *gossip
	// gossipAddr is read once at start: memberlist's LocalNode races with
	// its own UpdateNode.
	gossipAddr string

	notifyCh  chan bool
	readyTerm atomic.Uint64 // term whose leader barrier completed
	lastStamp atomic.Int64  // last time stamped on a proposal
	// unverified counts members not added because their Raft address did
	// not prove their node identity.
	unverified atomic.Uint64
	// reconciles counts the leader's reconcile rounds.
	reconciles atomic.Uint64
	// peers is the leader's view of its heartbeats to each peer, and
	// placementState its leader placement (nil unless it leads with a
	// preferred region): placement.go.
	peers          *peerHealth
	placementState atomic.Pointer[LeaderPlacement]
	// raftStarted is set once n.raft is: the stream layer accepts
	// connections (and so forwarded commands) while raft.NewRaft still
	// restores its snapshot.
	raftStarted atomic.Bool
	// fwd forwards this node's commands to the leader while it follows;
	// fwdServer serves the followers' while it leads (forward.go).
	fwd       forwarder
	fwdServer forwardServer
	// contact is when each peer last answered this node's AppendEntries
	// (the leader's own view of who is alive); addrs the HTTP addresses
	// the servers told this node themselves; memberMu serializes the
	// membership changes nodes ask the leader for (membership.go).
	contact  contacts
	addrs    provenAddrs
	memberMu sync.Mutex
	// removed holds the servers an operator removed (peers.go).
	removed removedPeers
	// watch is what the leader last reported to this node; joins the
	// leader's refusals and members catching up; drops a test hook
	// (progress.go).
	watch leaderWatch
	joins joinCheck
	drops appendDrops

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopping atomic.Bool
	stopOnce sync.Once
	// raftStopped closes once Raft's shutdown has finished: a command
	// Raft has not answered by then it never will (awaitApply).
	raftStopped chan struct{}
	stopErr     error
}

// New opens the node's stores, starts Raft and gossip and returns. The node
// joins and bootstraps in the background; use WaitLeader to wait.
func New(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("cluster: data dir: %w", err)
	}
	if err := syncDirs(cfg.dirSync, filepath.Dir(cfg.DataDir), cfg.DataDir); err != nil {
		return nil, err
	}
	sm, err := openStateMachine(cfg)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.ID), sm: sm, notifyCh: make(chan bool, 16),
		peers: &peerHealth{fail: map[string]bool{}}, raftStopped: make(chan struct{})}
	n.tr = n.tracer()
	n.fwd = forwarder{n: n, timeout: cfg.ForwardTimeout, version: forwardVersion}
	if n.tr != nil {
		n.fwd.version = forwardVersionTraced
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	ok := false
	defer func() {
		if !ok {
			_ = n.closeAll(context.Background())
		}
	}()

	store, err := openLogStore(cfg.DataDir, cfg.LogStore, newHCLog(n.log, "logstore"),
		logStoreOptions{noSync: cfg.Faults.Has(faults.LogNoFsync), segmentSize: cfg.WALSegmentSize})
	if err != nil {
		return nil, err
	}
	n.store = store
	// The log store's directory (wal/) or file (raft.db) and what raft-wal
	// created in it are durable before the first entry is appended.
	walDir := filepath.Join(cfg.DataDir, "wal")
	if cfg.LogStore != LogStoreWAL {
		walDir = cfg.DataDir
	}
	if err := syncDirs(cfg.dirSync, walDir, cfg.DataDir); err != nil {
		return nil, err
	}
	// Every entry and every term and vote is checksummed (checkedlog.go,
	// checkedstable.go); a corrupt term or vote stops the node here.
	storePath := filepath.Join(cfg.DataDir, "wal")
	if cfg.LogStore == LogStoreBoltDB {
		storePath = filepath.Join(cfg.DataDir, "raft.db")
	}
	stableStore, err := openCheckedStable(store, storePath)
	if err != nil {
		return nil, err
	}
	checked := checkedStore{
		checkedLog:    &checkedLog{LogStore: store, where: storePath, log: n.log, noVerify: cfg.Faults.Has(faults.LogNoChecksum)},
		checkedStable: stableStore,
	}
	n.fullGuard = &fullGuard{ctx: n.ctx, log: n.log, probe: func() error { return probeWrite(cfg.DataDir) },
		stand: n.standForElection}
	var logs raft.LogStore = guardedLogStore{LogStore: checked.checkedLog, guard: n.fullGuard}
	if cfg.ObserveLogWrite != nil {
		logs = timedLogStore{LogStore: logs, observe: cfg.ObserveLogWrite}
	}
	if n.logs, err = raft.NewLogCache(logCacheSize, logs); err != nil {
		return nil, fmt.Errorf("cluster: log cache: %w", err)
	}
	fileSnaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.Raft.SnapshotRetain, newHCLog(n.log, "snapshots"))
	if err != nil {
		return nil, fmt.Errorf("cluster: snapshot store: %w", err)
	}
	snapDir := filepath.Join(cfg.DataDir, "snapshots")
	if err := syncDirs(cfg.dirSync, snapDir, cfg.DataDir); err != nil {
		return nil, err
	}
	if k, err := removeTempSnapshots(snapDir, cfg.dirSync); err != nil {
		return nil, err
	} else if k > 0 {
		n.log.Warn("removed unfinished snapshots", "count", k, "dir", snapDir)
	}
	n.snaps = &indexedSnapshots{SnapshotStore: fileSnaps, dir: snapDir, sync: cfg.dirSync,
		noChecksum: cfg.Faults.Has(faults.SnapshotNoChecksum)}
	trans, err := n.newTransport()
	if err != nil {
		return nil, err
	}
	n.trans = trans
	n.raftTrans = serialTransport{NetworkTransport: trans, contact: &n.contact, drops: &n.drops}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = newHCLog(n.log, "raft")
	rc.HeartbeatTimeout = cfg.Raft.HeartbeatTimeout
	rc.ElectionTimeout = cfg.Raft.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.Raft.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.Raft.CommitTimeout
	rc.MaxAppendEntries = cfg.Raft.MaxAppendEntries
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = cfg.Raft.SnapshotThreshold
	rc.SnapshotInterval = cfg.Raft.SnapshotInterval
	rc.TrailingLogs = cfg.Raft.TrailingLogs
	rc.NotifyCh = n.notifyCh
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("cluster: raft config: %w", err)
	}
	if err := n.recoverPeers(rc, checked, n.snaps, n.raftTrans); err != nil {
		return nil, err
	}
	hasState, err := raft.HasExistingState(checked, checked, n.snaps)
	if err != nil {
		return nil, fmt.Errorf("cluster: inspect raft state: %w", err)
	}
	var restored uint64 // raft replays the log after it
	if n.sm.dir != nil {
		// The state is on disk: raft goes on from it without restoring a
		// snapshot (statestore.go).
		rc.NoSnapshotRestoreOnStart = true
		restored, err = n.catchUpStore(checked, snapDir)
	} else {
		restored, err = checkRestorable(checked, n.snaps, snapDir)
	}
	if err != nil {
		return nil, err
	}
	if err := verifyLog(checked, restored+1); err != nil {
		return nil, err
	}
	stable := &patientStable{StableStore: checked, ctx: n.ctx, log: n.log}
	r, err := raft.NewRaft(rc, n.sm, n.logs, stable, n.snaps, n.raftTrans)
	if err != nil {
		return nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	n.raft = r
	n.raftStarted.Store(true) // forwarded commands may be served from now on

	if err := n.startGossip(hasState); err != nil {
		return nil, err
	}
	n.wg.Add(6)
	go n.observeLeadership()
	go n.followLeader()
	go n.joinAndBootstrap(hasState)
	go n.watchPeers()
	go n.keepMembership()
	go n.watchLeader()
	ok = true
	n.log.Info("node started", "log_store", cfg.LogStore, "raft", n.RaftAddr(), "gossip", n.GossipAddr(), "http", cfg.HTTPAddr,
		"existing_state", hasState, "bootstrap_expect", cfg.BootstrapExpect, "region", cfg.Region, "replica", cfg.Replica,
		"network", cfg.Network, "prefer_leader_region", cfg.PreferLeaderRegion)
	return n, nil
}

// ID returns the node's ID.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the Raft address other nodes dial.
func (n *Node) RaftAddr() string { return string(n.trans.LocalAddr()) }

// GossipAddr returns the gossip address other nodes can join through.
func (n *Node) GossipAddr() string { return n.gossipAddr }

// WaitLeader blocks until the node knows a leader whose barrier completed
// (if it is the leader itself) or ctx ends.
func (n *Node) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if n.Status().Ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for a leader: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// leaveBudget bounds the gossip leave within a shutdown: the leaving
// meta's broadcast, its push to every member and the leave broadcast each
// get at most this long.
const leaveBudget = 2 * time.Second

// Shutdown stops the node gracefully: a leader hands leadership over
// first, then (with LeaveOnShutdown) the node asks the leader to remove it
// and leaves gossip, then it stops Raft and closes its stores. Every step is bounded by ctx (and the leave by leaveBudget
// too): a slow, lossy, paused or dead member delays the shutdown by at most
// those bounds, and when ctx ends first Shutdown returns its error with
// whatever step was waiting abandoned (the process should then exit: the
// data directory is as a crash would leave it, which Raft recovers from).
// It is safe to call more than once.
func (n *Node) Shutdown(ctx context.Context) error {
	n.stopOnce.Do(func() {
		n.stopping.Store(true)
		if n.raft.State() == raft.Leader && n.hasPeers() {
			n.log.Info("transferring leadership before shutdown")
			if err := waitFuture(ctx, n.raft.LeadershipTransfer()); err != nil {
				n.log.Warn("leadership transfer failed", "err", err)
			}
		}
		if n.cfg.LeaveOnShutdown && n.ml != nil {
			if err := n.leaveGossip(ctx); err != nil {
				n.log.Warn("gossip leave failed", "err", err)
			}
		}
		n.stopErr = n.closeAll(ctx)
		if n.stopErr != nil {
			n.log.Error("node stopped with errors", "err", n.stopErr)
			return
		}
		n.log.Info("node stopped")
	})
	return n.stopErr
}

// Kill stops the node abruptly, like a crash: no leadership transfer, no
// gossip leave. The data directory stays as a crash would leave it
// (everything Raft acknowledged is already fsynced).
func (n *Node) Kill() error {
	n.stopOnce.Do(func() {
		n.stopping.Store(true)
		n.stopErr = n.closeAll(context.Background())
		n.log.Info("node killed")
	})
	return n.stopErr
}

// closeAll stops gossip and Raft and closes the stores. Raft's shutdown
// waits for its goroutines; inbound Raft connections are cut first, so
// none of them waits on a peer (closeInbound). If ctx ends before Raft or
// the node's own goroutines stop, the stores stay open (a goroutine may
// still use them) and the error says which step was waiting.
func (n *Node) closeAll(ctx context.Context) error {
	n.cancel()
	n.fwd.close()
	n.fwdServer.stop()
	var errs []error
	if n.ml != nil {
		if err := n.ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("gossip shutdown: %w", err))
		}
	}
	if n.raft != nil {
		f := n.raft.Shutdown()
		if n.stream != nil {
			n.stream.closeInbound()
		}
		if err := waitFuture(ctx, f); err != nil {
			return errors.Join(append(errs, fmt.Errorf("raft shutdown: %w", err))...)
		}
		close(n.raftStopped)
	}
	// Raft answered every command the followers forwarded and their
	// connections are cut (closeInbound): the servers end.
	if err := n.fwdServer.wait(ctx); err != nil {
		return errors.Join(append(errs, fmt.Errorf("waiting for the forwarding connections: %w", err))...)
	}
	stopped := make(chan struct{})
	go func() { n.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		return errors.Join(append(errs, fmt.Errorf("waiting for the node's goroutines: %w", ctx.Err()))...)
	}
	if n.trans != nil {
		if err := n.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raft transport: %w", err))
		}
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("log store: %w", err))
		}
	}
	if err := n.sm.close(); err != nil {
		errs = append(errs, fmt.Errorf("state store: %w", err))
	}
	return errors.Join(errs...)
}

func (n *Node) hasPeers() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	return len(f.Configuration().Servers) > 1
}

// errRaftStopped ends a waitFuture whose stop channel closed first.
var errRaftStopped = errors.New("raft shut down before answering")

// waitFuture waits for a raft future or ctx.
func waitFuture(ctx context.Context, f raft.Future) error { return waitFutureUntil(ctx, f, nil) }

// waitFutureUntil waits for a raft future, ctx, or stop (nil: never). If
// stop and the future are ready together, the future's answer wins.
func waitFutureUntil(ctx context.Context, f raft.Future, stop <-chan struct{}) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		select {
		case err := <-done:
			return err
		default:
			return errRaftStopped
		}
	}
}
