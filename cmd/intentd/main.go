// Command intentd runs one node of the intent ledger: the Raft-replicated
// at-most-once gate for AI agents' side-effecting tool calls.
//
//	intentd --data-dir /tmp/intentd          # a single-node ledger
//	intentd --id n2 --data-dir ./data/n2 --http-addr 127.0.0.1:8102 \
//	  --raft-addr 127.0.0.1:8202 --gossip-addr 127.0.0.1:8302 \
//	  --join 127.0.0.1:8301 --bootstrap-expect 3
//
// Every flag can also be set through the environment as INTENTD_<FLAG>
// (upper case, dashes as underscores); flags win over the environment.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/internal/cli"
	"github.com/intentledger/intentd/internal/faults"
	"github.com/intentledger/intentd/internal/tracing"
	"github.com/intentledger/intentd/node"
)

// privateUmask makes every file and directory the node creates readable by
// its own user only: the Raft log, the WAL and the snapshots hold the
// ledger and its signing keys, and raft's snapshot store and raft-wal would
// otherwise create them 0644/0755 under the usual umask.
const privateUmask = 0o077

func main() {
	syscall.Umask(privateUmask)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stderr))
}

// run parses flags and the environment, runs a node until ctx ends, then
// shuts it down gracefully. It returns the process exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "healthcheck" {
		return runHealthcheck(ctx, args[1:], getenv, stderr)
	}
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "intentd:", err)
		return 2
	}
	logger, err := cli.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(stderr, "intentd:", err)
		return 2
	}
	cfg.Logger = logger
	setMemoryCapacity(&cfg, logger)
	// SIGHUP reloads the API keys (--api-keys-file, INTENTD_API_KEYS as
	// started); a keys file that does not validate changes nothing.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg.Reload = hup
	if err := node.Run(ctx, cfg, stderr); err != nil {
		logger.Error("stopped", "err", err)
		return 1
	}
	return 0
}

// parseConfig reads flags, with INTENTD_* environment variables as
// defaults.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (node.Config, error) {
	c := node.DefaultConfig()
	fs := flag.NewFlagSet("intentd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var join string
	fs.StringVar(&c.ID, "id", c.ID, "node ID, unique and stable across restarts")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the Raft log, stable store and snapshots")
	fs.StringVar(&c.HTTPAddr, "http-addr", c.HTTPAddr, "HTTP API listen address")
	fs.StringVar(&c.HTTPAdvertise, "http-advertise", "", "HTTP address other nodes forward to (default: the listen address)")
	fs.StringVar(&c.RaftAddr, "raft-addr", c.RaftAddr, "Raft TCP listen address")
	fs.StringVar(&c.RaftAdvertise, "raft-advertise", "", "Raft address other nodes dial (default: the listen address)")
	fs.StringVar(&c.GossipAddr, "gossip-addr", c.GossipAddr, "gossip (memberlist) listen address")
	fs.StringVar(&c.GossipAdvertise, "gossip-advertise", "", "gossip address other nodes reach (default: the listen address)")
	fs.StringVar(&join, "join", "", "comma-separated gossip addresses of existing members")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", -1, "voters to wait for before bootstrapping a new cluster (default: 1 without --join, 0 with it)")
	voter := true
	fs.BoolVar(&voter, "voter", true, "take part in quorums and elections; --voter=false makes a non-voting replica (receives the log, serves stale reads and long-polls, forwards the rest; needs --join)")
	fs.StringVar(&c.Region, "region", "", "the region this node runs in (gossip, /v1/cluster, metrics; --prefer-leader-region)")
	fs.StringVar(&c.PreferLeaderRegion, "prefer-leader-region", "", "move leadership to a healthy voter of this region whenever the leader is elsewhere (set it on every voter)")
	fs.StringVar(&c.Network, "network", node.NetworkLAN, "timing profile: lan (one data centre: Raft 1s/1s/500ms, memberlist local) or wan (members 30-300 ms apart: Raft 1s/3s/1s, memberlist WAN); explicit timing flags win")
	fs.BoolVar(&c.LocalDuplicates, "local-duplicates", false, "while not the leader, answer a duplicate claim (key executed or committed with the same payload, inside its dedupe window) from this node's own copy, without a round trip to the leader; the key's audit trail gets the duplicate from a note sent after the answer (every node must run a version that knows the note)")
	fs.DurationVar(&c.LocalDuplicateMargin, "local-duplicate-margin", 5*time.Second, "with --local-duplicates: no local answer this close to the end of a dedupe window; must exceed the clock skew between nodes")
	fs.StringVar(&c.LogStore, "log-store", c.LogStore, "Raft log store: wal (raft-wal, one fsync per append) or boltdb (raft-boltdb); a data dir keeps the kind it was made with")
	fs.StringVar(&c.StateEngine, "state-engine", c.StateEngine, "where the ledger lives: pebble (on disk under <data-dir>/state, memory a bounded cache; a restart replays only the log after the store) or memory (the whole ledger in RAM, rebuilt from the latest snapshot at every start)")
	fs.Var(sizeFlag{&c.StateMemory.CacheBytes, nil}, "state-cache", "block cache of --state-engine pebble (e.g. 256MiB; 0, the default: an eighth of the memory capacity, 8 to 64 MiB)")
	fs.IntVar(&c.WALSegmentSize, "wal-segment-size", c.WALSegmentSize, "advanced: size in bytes of raft-wal's log segment files (0: 64 MiB; at least 64 KiB); smaller segments are preallocated more often, so a full disk shows sooner")
	fs.Uint64Var(&c.ReadyMaxLag, "ready-max-lag", c.ReadyMaxLag, "entries this node's applied index may be behind the leader's commit index and still answer /readyz 200; the leader promotes a new member from nonvoter to voter once its log is this close")
	fs.BoolVar(&c.LeaveOnTerminate, "leave-on-terminate", c.LeaveOnTerminate, "decommission on SIGTERM: ask the leader (over the Raft port, under this node's certificate with TLS) to remove this node, then leave gossip; the leader refuses if the voters left would have no live majority. Off by default: a stopped node stays a voter")
	fs.IntVar(&c.Limits.MaxPayloadBytes, "max-payload-bytes", c.Limits.MaxPayloadBytes, "largest intent payload accepted")
	fs.IntVar(&c.Limits.MaxResultBytes, "max-result-bytes", c.Limits.MaxResultBytes, "largest result accepted")
	fs.DurationVar(&c.Limits.DefaultLease, "default-lease", c.Limits.DefaultLease, "lease when a claim names none")
	fs.DurationVar(&c.Limits.DedupeWindow, "dedupe-window", c.Limits.DedupeWindow, "how long a finished intent blocks reuse of its key")
	fs.IntVar(&c.Limits.MaxWaiters, "max-waiters", c.Limits.MaxWaiters, "long-polls (GET ...?wait=) that may wait on this node at once; more are answered 429 too_many_waiters")
	fs.IntVar(&c.Limits.MaxWaitersPerKey, "max-waiters-per-key", c.Limits.MaxWaitersPerKey, "long-polls that may wait on one intent key at once")
	fs.IntVar(&c.Limits.MaxWaitersPerCaller, "max-waiters-per-caller", c.Limits.MaxWaitersPerCaller, "long-polls one caller (API key, or address without auth) may hold waiting on this node at once, on every key and the audit log together")
	fs.DurationVar(&c.Raft.HeartbeatTimeout, "raft-heartbeat-timeout", c.Raft.HeartbeatTimeout, "Raft heartbeat timeout")
	fs.DurationVar(&c.Raft.ElectionTimeout, "raft-election-timeout", c.Raft.ElectionTimeout, "Raft election timeout")
	fs.Uint64Var(&c.Raft.SnapshotThreshold, "snapshot-threshold", c.Raft.SnapshotThreshold, "log entries between snapshots")
	fs.Uint64Var(&c.Raft.TrailingLogs, "trailing-logs", c.Raft.TrailingLogs, "log entries kept after a snapshot")
	fs.DurationVar(&c.Raft.SnapshotInterval, "snapshot-interval", 30*time.Second, "how often to check whether to snapshot (jittered up to twice)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "bound on graceful shutdown: past it the process dumps its goroutines to the log and exits")
	registerSecurityFlags(fs, &c.Security)
	registerKEKFlag(fs, &c.KEK)
	fs.StringVar(&c.Auth, "auth", c.Auth, "required: every API call but /healthz, /readyz, /metrics and /v1/keys needs an API key; off: DEVELOPMENT ONLY, no authentication")
	fs.Float64Var(&c.RateLimits.PerClient, "rate-limit-client", c.RateLimits.PerClient, "requests per second per client (API key, or address without auth); 0 turns it off")
	fs.IntVar(&c.RateLimits.ClientBurst, "rate-limit-client-burst", c.RateLimits.ClientBurst, "burst of the per-client limit")
	fs.Float64Var(&c.RateLimits.PerKey, "rate-limit-key", c.RateLimits.PerKey, "requests per second on one intent key; 0 turns it off")
	fs.IntVar(&c.RateLimits.KeyBurst, "rate-limit-key-burst", c.RateLimits.KeyBurst, "burst of the per-key limit")
	fs.Float64Var(&c.RateLimits.AuthFailures, "rate-limit-auth-failures", c.RateLimits.AuthFailures, "failed authentications per second per client address, past which the address gets 429; 0 turns it off")
	fs.IntVar(&c.RateLimits.AuthFailureBurst, "rate-limit-auth-failure-burst", c.RateLimits.AuthFailureBurst, "burst of the failed-authentication limit")
	fs.StringVar(&c.APIKeysFile, "api-keys-file", "", "JSON file of API keys (name, namespace, roles, sha256); also "+auth.EnvVar+
		"; reloaded on SIGHUP and when its content changes (--api-keys-poll), a file that does not validate changes nothing")
	fs.DurationVar(&c.APIKeysPoll, "api-keys-poll", c.APIKeysPoll, "how often to check --api-keys-file for changes and reload the keys (0: only on SIGHUP)")
	fs.StringVar(&c.NamespaceQuotasFile, "namespace-quotas", "", "JSON file of quotas by namespace, e.g. {\"payments\": {\"claims_per_second\": 50, \"burst\": 100, \"max_intents\": 100000}}: over them claims are answered 429 namespace_rate_limited or 507 namespace_full; give every node the same file; reloaded on SIGHUP with the API keys")
	c.Capacity.MaxMemoryAuto = true
	registerCapacityFlags(fs, &c.Capacity)
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP to this collector (http://collector:4318; /v1/traces is added to a URL without a path); empty: "+tracing.EnvTracesEndpoint+" or "+tracing.EnvEndpoint+" if set, else no tracing")
	fs.StringVar(&c.PprofAddr, "pprof", "", "serve Go's /debug/pprof/ profiling endpoints on this separate address (e.g. 127.0.0.1:6060; off when empty)")
	fs.BoolVar(&c.TestHooks, "test-hooks", false, "TESTING ONLY: serve /debug/digest and /debug/clock-offset for the fault suite")
	fs.StringVar(&c.TestBug, "test-bug", "", "TESTING ONLY (needs --test-hooks and a binary built with -tags faults): seed a known bug: "+faults.Names())

	_, envErr := cli.SetFromEnv(fs, "INTENTD_", getenv)
	if envErr != nil {
		return c, envErr
	}
	c.APIKeys = getenv(auth.EnvVar)
	c.KEK.Value = getenv(node.KEKEnvVar)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, j := range strings.Split(join, ",") {
		if j = strings.TrimSpace(j); j != "" {
			c.Join = append(c.Join, j)
		}
	}
	c.Replica = !voter
	otlp, err := tracing.Endpoint(c.OTLPEndpoint, getenv)
	if err != nil {
		return c, err
	}
	c.OTLPEndpoint = otlp
	if c.BootstrapExpect < 0 {
		c.BootstrapExpect = 0
		if len(c.Join) == 0 {
			c.BootstrapExpect = 1
		}
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// setMemoryCapacity resolves --max-memory=auto (node.MemoryCapacity),
// sizes the on-disk state engine's cache and memtables from it
// (node.SizeStateMemory) and sets GOMEMLIMIT from what is left for the Go
// heap unless it is set: the Go runtime then collects harder as it nears
// the capacity, instead of growing its heap past it. When the engine's
// memory is off the Go heap (cgo), the capacity the guard holds the live
// heap to is the capacity less what the engine reserves.
func setMemoryCapacity(cfg *node.Config, log *slog.Logger) {
	c := &cfg.Capacity
	source := "--max-memory"
	if c.MaxMemoryAuto {
		v, src, err := node.MemoryCapacity()
		if err != nil {
			log.Warn("no memory capacity: ledger_full will not refuse claims for memory", "err", err)
		}
		c.MaxMemory, c.MaxMemoryAuto, source = v, false, src
	}
	if cfg.StateEngine == node.StateEnginePebble {
		sm := node.SizeStateMemory(c.MaxMemory, cfg.StateMemory.CacheBytes)
		cfg.StateMemory = sm
		if sm.OffHeap() && c.MaxMemory > 2*sm.Reserved() {
			c.MaxMemory -= sm.Reserved()
		}
		log.Info("state engine memory", "cache_bytes", sm.CacheBytes, "memtable_bytes", sm.MemTableBytes,
			"reserved_bytes", sm.Reserved(), "off_heap", sm.OffHeap(), "heap_capacity", c.MaxMemory)
	}
	limit, err := node.SetGoMemLimit(c.MaxMemory)
	if err != nil {
		log.Warn("setting GOMEMLIMIT", "err", err)
	}
	if c.MaxMemory > 0 {
		log.Info("memory capacity", "bytes", c.MaxMemory, "source", source, "high_water", c.MemoryHighWater, "gomemlimit", limit)
	}
}
