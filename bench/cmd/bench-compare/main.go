// Command bench-compare measures intentd against etcd, side by side, on
// one machine: it starts a fresh 3-node intentd cluster and a fresh
// 3-member etcd cluster (one system at a time, alternating the order every
// repetition), drives each with the same closed-loop load generator
// (unique-key claims, then contended claims) and reports throughput,
// latency percentiles, errors and server CPU per operation, with the
// machine's fdatasync rate and load average.
//
// An intentd claim is POST /v1/intents; an etcd claim is the transaction
// If(CreateRevision(key) == 0) Then(Put(key, payload)) Else(Get(key)), sent
// over gRPC and, separately, over etcd's HTTP/JSON gateway (/v3/kv/txn).
// Both systems fsync every commit (neither is configured otherwise).
//
// bench/scripts/bench-compare.sh builds the binaries and runs this; see
// docs/performance.md for the method and the findings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// config is the parsed command line.
type config struct {
	intentdBin   string
	etcdBin      string
	workDir      string
	outDir       string
	readme       string
	svg          string
	clients      []int
	modes        []string
	routings     []string // leader, spread
	systems      []string
	warmup       time.Duration
	duration     time.Duration
	reps         int
	claimants    int
	keyBytes     int
	payloadBytes int
	portBase     int
	maxTime      time.Duration
	etcdHTTP     bool
	keepData     bool
	intentdArgs  []string
	profile      string // "mode:clients" or "mode:routing:clients" whose intentd CPU profiles are captured
	profileDir   string
	note         string
	from         string // results.json to report again instead of measuring
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench-compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.intentdBin, "intentd", "bin/intentd", "intentd binary")
	fs.StringVar(&c.etcdBin, "etcd", ".cache/bench-bin/etcd", "etcd binary")
	fs.StringVar(&c.workDir, "work", "", "scratch directory for data dirs and logs (default: a new directory under .cache/bench-run)")
	fs.StringVar(&c.outDir, "out", "", "directory for results.json, table.md and the plot (default: the work directory)")
	fs.StringVar(&c.readme, "readme", "", "README to update between the bench-compare markers (empty: none)")
	fs.StringVar(&c.svg, "svg", "", "also write the plot here (e.g. docs/img/bench-compare.svg)")
	clients := fs.String("clients", "1,16,64,256", "comma-separated concurrency levels")
	modes := fs.String("modes", "unique,contended", "workloads: unique (one claimant per key), contended (--claimants per key)")
	routings := fs.String("routing", "leader,spread", "where clients send: leader (every request to the leader), spread (round-robin over all three nodes)")
	systems := fs.String("systems", "intentd,etcd", "systems to start: intentd, etcd")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured time before each level")
	fs.DurationVar(&c.duration, "duration", 15*time.Second, "measured time per level")
	fs.IntVar(&c.reps, "reps", 3, "repetitions (fresh clusters each); medians are reported")
	fs.IntVar(&c.claimants, "claimants", 10, "claimants per key in contended mode")
	fs.IntVar(&c.keyBytes, "key-bytes", 32, "key length in bytes")
	fs.IntVar(&c.payloadBytes, "payload-bytes", 100, "payload length in bytes")
	fs.IntVar(&c.portBase, "port-base", 19000, "first of the loopback ports used (base+1..base+53)")
	fs.DurationVar(&c.maxTime, "max-time", 0, "bound on the whole run (default: twice the planned time plus 5 minutes)")
	fs.BoolVar(&c.etcdHTTP, "etcd-http", true, "also drive etcd through its HTTP/JSON gateway")
	fs.BoolVar(&c.keepData, "keep-data", false, "keep the clusters' data directories")
	extra := fs.String("intentd-args", "", "extra flags for every intentd node (space-separated)")
	fs.StringVar(&c.profile, "profile", "", "capture CPU profiles of every intentd node during one level, e.g. unique:64 (leader routing) or unique:spread:64")
	fs.StringVar(&c.profileDir, "profile-dir", "", "where profiles go (default: the output directory)")
	fs.StringVar(&c.from, "from", "", "report an earlier run's results.json again (table, plot, README) without measuring")
	fs.StringVar(&c.note, "note", "", "free text recorded in the report header (e.g. what changed)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return c, fmt.Errorf("--clients: bad level %q", s)
		}
		c.clients = append(c.clients, n)
	}
	for _, m := range strings.Split(*modes, ",") {
		if m = strings.TrimSpace(m); m != "unique" && m != "contended" {
			return c, fmt.Errorf("--modes: unknown mode %q", m)
		}
		c.modes = append(c.modes, strings.TrimSpace(m))
	}
	for _, r := range strings.Split(*routings, ",") {
		if r = strings.TrimSpace(r); r != "leader" && r != "spread" {
			return c, fmt.Errorf("--routing: unknown routing %q", r)
		}
		c.routings = append(c.routings, r)
	}
	for _, s := range strings.Split(*systems, ",") {
		if s = strings.TrimSpace(s); s != "intentd" && s != "etcd" {
			return c, fmt.Errorf("--systems: unknown system %q", s)
		}
		c.systems = append(c.systems, s)
	}
	c.intentdArgs = strings.Fields(*extra)
	switch {
	case c.reps < 1:
		return c, errors.New("--reps must be at least 1")
	case c.duration <= 0 || c.warmup < 0:
		return c, errors.New("--duration must be positive and --warmup not negative")
	case c.claimants < 1:
		return c, errors.New("--claimants must be at least 1")
	case c.keyBytes < 24 || c.keyBytes > 256:
		return c, errors.New("--key-bytes must be 24..256")
	case c.payloadBytes < 16:
		return c, errors.New("--payload-bytes must be at least 16")
	}
	if c.workDir == "" {
		c.workDir = filepath.Join(".cache", "bench-run", time.Now().UTC().Format("20060102-150405"))
	}
	if c.outDir == "" {
		c.outDir = c.workDir
	}
	if c.profileDir == "" {
		c.profileDir = c.outDir
	}
	if c.maxTime <= 0 {
		c.maxTime = 2*c.planned() + 5*time.Minute
	}
	return c, nil
}

// frontEnds lists the load targets of a system.
func (c config) frontEnds(system string) []string {
	if system == "etcd" {
		if c.etcdHTTP {
			return []string{"etcd-grpc", "etcd-http"}
		}
		return []string{"etcd-grpc"}
	}
	return []string{"intentd"}
}

// levels is the number of measured levels in the whole run.
func (c config) levels() int {
	n := 0
	for _, s := range c.systems {
		n += len(c.frontEnds(s))
	}
	return n * len(c.modes) * len(c.routings) * len(c.clients) * c.reps
}

// profiles reports whether the level (mode, routing, clients) is the one
// --profile names ("mode:clients" means the leader routing).
func (c config) profiles(mode, routing string, clients int) bool {
	if c.profile == "" {
		return false
	}
	if routing == "leader" && c.profile == fmt.Sprintf("%s:%d", mode, clients) {
		return true
	}
	return c.profile == fmt.Sprintf("%s:%s:%d", mode, routing, clients)
}

// planned is the expected run time without cluster starts.
func (c config) planned() time.Duration {
	return time.Duration(c.levels()) * (c.warmup + c.duration + time.Second)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench-compare:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.maxTime)
	defer cancel()
	var rep *report
	if cfg.from != "" {
		rep, err = loadReport(cfg.from)
		if err == nil {
			err = os.MkdirAll(cfg.outDir, 0o755)
		}
	} else {
		rep, err = compare(ctx, cfg, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench-compare:", err)
		return 1
	}
	md := rep.markdown()
	fmt.Fprintln(stdout, md)
	if err := rep.write(cfg, md); err != nil {
		fmt.Fprintln(stderr, "bench-compare:", err)
		return 1
	}
	fmt.Fprintf(stderr, "bench-compare: results in %s\n", cfg.outDir)
	return 0
}
