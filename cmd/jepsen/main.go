// Command jepsen runs the intent ledger's fault suite: real intentd
// processes, each in its own network namespace, under a seeded schedule of
// faults (partitions, kills, pauses, loss), with clients recording every
// operation; then it checks the history (at-most-once, no lost
// acknowledged write, linearizability, equal replicas, no panic) and
// writes a report.
//
//	go run ./cmd/jepsen --nodes 3 --nemesis kill-leader,isolate-leader,partition-halves --duration 60s --seed 7
//
// With --bug it runs a positive control: the nodes carry a seeded bug and
// the run passes only if the checkers catch it. With --regions, --rtt and
// --jitter the nodes' links go through a delaying relay layer (jepsen/wan).
// Needs root (namespaces, iptables).
//
// `jepsen aggregate DIR` writes the aggregate table of a soak
// (scripts/jepsen-soak.sh).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/intentledger/intentd/jepsen/nemesis"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitValid   = 0 // no violation (or, with --bug, the bug was caught)
	exitInvalid = 1 // a violation (or, with --bug, the bug was missed)
	exitUsage   = 2
	exitSkipped = 3 // cannot run here (not root, no namespaces) and CI is not set
	exitError   = 4 // the harness failed
)

type options struct {
	nodes     int
	nemeses   []string
	duration  time.Duration
	interval  time.Duration
	hold      time.Duration
	rate      float64
	clients   int
	claimants int
	// retryFraction is W1's share of late retries of recent keys.
	retryFraction float64
	seed          int64
	results       string
	binary        string
	bug           string
	finalRead     bool   // W2
	tls           bool   // nodes run with TLS (HTTPS, Raft over mutual TLS with node identities)
	storage       string // lazyfs mode under each node's data dir ("": none)
	logStore      string // the nodes' --log-store ("": their default)
	walSegment    int    // the nodes' --wal-segment-size (0: their default)
	stateEngine   string // the nodes' --state-engine ("": their default)
	powerLoss     nemesis.PowerLossMode
	trailingLogs  int // the nodes' --trailing-logs
	args          []string

	raftTimeout    time.Duration
	raftTimeoutSet bool // --raft-timeout was given
	wan            wanOptions
}

// profileTimeouts reports whether the nodes' --network profile sets their
// Raft timeouts (--node-network without --raft-timeout).
func (o options) profileTimeouts() bool { return o.wan.nodeNetwork != "" && !o.raftTimeoutSet }

// checkHold refuses a hold that a leader fault would end before the other
// nodes could elect a leader.
func (o options) checkHold() error {
	if o.hold < 4*o.raftTimeout {
		return fmt.Errorf("--hold %v is shorter than 4 Raft election timeouts (%v): a leader fault would heal before the others could elect a leader", o.hold, 4*o.raftTimeout)
	}
	return nil
}

func parse(args []string, stderr io.Writer) (options, error) {
	o := options{args: args}
	fs := flag.NewFlagSet("jepsen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nem := fs.String("nemesis", "kill-leader,isolate-leader,partition-halves", "comma-separated nemeses, or \"all\"")
	fs.IntVar(&o.nodes, "nodes", 3, "cluster size (3 or 5)")
	fs.DurationVar(&o.duration, "duration", 60*time.Second, "how long clients and faults run")
	fs.DurationVar(&o.interval, "interval", 6*time.Second, "time between the start of faults (jittered)")
	fs.DurationVar(&o.hold, "hold", 3*time.Second, "how long each fault lasts")
	fs.Float64Var(&o.rate, "rate", 200, "total client operations per second")
	fs.IntVar(&o.clients, "clients", 15, "concurrent clients")
	fs.IntVar(&o.claimants, "claimants", 3, "clients racing for each key")
	fs.Float64Var(&o.retryFraction, "retry-fraction", 0, "fraction of W1 iterations that first claim one of the client's recent keys again as a new owner (an agent retrying a call that already ran), 0..1")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the fault schedule and the workload (0: pick one and print it)")
	fs.StringVar(&o.results, "results", "", "results directory (default results/<time>-seed<seed>)")
	fs.StringVar(&o.binary, "binary", "", "intentd binary (default: go build -tags faults ./cmd/intentd into the results dir; --bug needs that build)")
	wl := fs.String("workload", "w1,w2,w3", "workloads: w1 contended claims (always), w2 final reads after healing, w3 reads through restarting nodes (adds the restart-read nemesis)")
	fs.StringVar(&o.bug, "bug", "", "positive control: seed this bug in the nodes and pass only if it is caught")
	fs.BoolVar(&o.tls, "tls", false, "run the nodes with TLS (a fresh development PKI): HTTPS, Raft over mutual TLS with node identities (raft-poke needs it)")
	fs.StringVar(&o.storage, "storage", "", "put each node's data dir on a lazy filesystem (jepsen/lazyfs) in this mode: strict (only a directory's fsync makes its entries durable) or ext4 (any fsync does); the storage nemeses (power-loss-*, disk-full-*, corrupt-*) need it and default it to strict")
	fs.StringVar(&o.logStore, "log-store", "", "pass --log-store VALUE (wal or boltdb) to the nodes (default: theirs)")
	fs.StringVar(&o.stateEngine, "state-engine", "", "pass --state-engine ENGINE to the nodes (pebble or memory; empty: their default, pebble)")
	fs.IntVar(&o.walSegment, "wal-segment-size", 0, "pass --wal-segment-size BYTES to the nodes (0: their default, 64 MiB): small segments make a full disk bite (segment rotations fail)")
	powerLoss := fs.String("power-loss", "mixed", "what the power-loss nemeses drop: mixed (each loss clean or torn, drawn from the seed), clean (every change not made durable) or torn (the file written last keeps its earlier unsynced writes and part of its last one)")
	fs.IntVar(&o.trailingLogs, "trailing-logs", 128, "pass --trailing-logs N to the nodes: log entries kept behind a snapshot; a node further behind than that is sent a snapshot instead")
	fs.DurationVar(&o.raftTimeout, "raft-timeout", 500*time.Millisecond, "the nodes' Raft heartbeat and election timeout (at least 500ms)")
	regions := fs.String("regions", "", "place the nodes in regions: NAME:VOTERS[+REPLICAS],... e.g. eu:2,us:2,ap:1 (sets the number of nodes; voters 3 or 5)")
	rtt := fs.String("rtt", "", "link delay: round trips between regions, A-B=80ms,..., or one duration for every pair (without --regions every node is a region); empty: no delay layer")
	jitter := fs.String("jitter", "", "with --rtt: each delay varies by this fraction either way (10% or 0.1)")
	fs.BoolVar(&o.wan.placement, "placement", false, "pass each node its place from --regions: --region NAME, and --voter=false (or --role replica) for replicas, each only if the binary knows the flag")
	fs.StringVar(&o.wan.nodeNetwork, "node-network", "", "pass --network VALUE (lan or wan) to the nodes, if the binary knows the flag")
	fs.BoolVar(&o.wan.localDuplicates, "local-duplicates", false, "pass --local-duplicates to the nodes (followers and replicas answer duplicates from their own copy), if the binary knows the flag")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	nodesSet := false
	fs.Visit(func(f *flag.Flag) {
		nodesSet = nodesSet || f.Name == "nodes"
		o.raftTimeoutSet = o.raftTimeoutSet || f.Name == "raft-timeout"
	})
	if err := o.wan.parse(*regions, *rtt, *jitter, &o.nodes, nodesSet); err != nil {
		return o, err
	}
	if o.nodes != 3 && o.nodes != 5 && o.wan.layout == nil {
		return o, errors.New("--nodes must be 3 or 5")
	}
	if o.raftTimeout < 500*time.Millisecond {
		return o, errors.New("--raft-timeout must be at least 500ms (the nodes' leader lease)")
	}
	if err := o.checkHold(); err != nil && !o.profileTimeouts() {
		return o, err // with the nodes' own profile, execute checks it once it knows the profile's timeout
	}
	if o.retryFraction < 0 || o.retryFraction > 1 {
		return o, errors.New("--retry-fraction must be within 0..1")
	}
	if o.duration <= 0 || o.hold <= 0 || o.interval <= o.hold || o.clients < 1 || o.claimants < 1 {
		return o, errors.New("need positive --duration, --hold < --interval, --clients and --claimants")
	}
	for _, n := range strings.Split(*nem, ",") {
		if n = strings.TrimSpace(n); n != "" {
			o.nemeses = append(o.nemeses, n)
		}
	}
	if o.storage == "" && slices.ContainsFunc(o.nemeses, nemesis.IsStorageNemesis) {
		o.storage = "strict"
	}
	if o.storage != "" && o.storage != "strict" && o.storage != "ext4" {
		return o, fmt.Errorf("--storage: unknown mode %q (want strict or ext4)", o.storage)
	}
	pl, err := nemesis.ParsePowerLossMode(*powerLoss)
	if err != nil {
		return o, fmt.Errorf("--power-loss: %w", err)
	}
	o.powerLoss = pl
	if o.trailingLogs < 1 {
		return o, errors.New("--trailing-logs must be at least 1")
	}
	for _, w := range strings.Split(*wl, ",") {
		switch strings.TrimSpace(w) {
		case "w1", "":
		case "w2":
			o.finalRead = true
		case "w3":
			if !slices.Contains(o.nemeses, "restart-read") && !slices.Contains(o.nemeses, "all") {
				o.nemeses = append(o.nemeses, "restart-read")
			}
		default:
			return o, fmt.Errorf("--workload: unknown workload %q (want w1, w2, w3)", w)
		}
	}
	if o.seed == 0 {
		o.seed = time.Now().UnixNano()%1_000_000 + 1
	}
	if o.results == "" {
		o.results = filepath.Join("results", fmt.Sprintf("%s-seed%d", time.Now().Format("20060102-150405"), o.seed))
	}
	return o, nil
}

// reproduce is the command line that repeats the run (same seed, faults
// and workload).
func (o options) reproduce() string {
	parts := []string{"go run ./cmd/jepsen"}
	for i := 0; i < len(o.args); i++ {
		a := o.args[i]
		if name := strings.TrimLeft(a, "-"); name == "seed" || name == "results" || name == "binary" {
			i++ // drop the flag and its value
			continue
		}
		if name := strings.TrimLeft(a, "-"); strings.HasPrefix(name, "seed=") || strings.HasPrefix(name, "results=") || strings.HasPrefix(name, "binary=") {
			continue
		}
		parts = append(parts, a)
	}
	return strings.Join(append(parts, fmt.Sprintf("--seed=%d", o.seed)), " ")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "aggregate" {
		return aggregate(args[1:], stdout, stderr)
	}
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitValid
	}
	if err != nil {
		fmt.Fprintln(stderr, "jepsen:", err)
		return exitUsage
	}
	code, err := execute(ctx, o, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "jepsen:", err)
	}
	return code
}

func buildIntentd(ctx context.Context, dir string) (string, error) {
	bin, err := filepath.Abs(filepath.Join(dir, "intentd"))
	if err != nil {
		return "", err
	}
	// The fault build: --bug's positive controls need the seeded bugs.
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "faults", "-o", bin, "./cmd/intentd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -tags faults ./cmd/intentd: %w\n%s", err, out)
	}
	return bin, nil
}
