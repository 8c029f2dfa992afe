package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/intentledger/intentd/internal/progress"
	"github.com/intentledger/intentd/jepsen/checker"
	"github.com/intentledger/intentd/jepsen/history"
	"github.com/intentledger/intentd/jepsen/nemesis"
	"github.com/intentledger/intentd/jepsen/netns"
	"github.com/intentledger/intentd/jepsen/nodes"
	"github.com/intentledger/intentd/jepsen/report"
	"github.com/intentledger/intentd/jepsen/wan"
	"github.com/intentledger/intentd/jepsen/workload"
)

// execute runs one fault run end to end and returns the exit code.
func execute(ctx context.Context, o options, stdout, stderr io.Writer) (int, error) {
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			return exitError, fmt.Errorf("the fault suite cannot run here: %w", err)
		}
		fmt.Fprintf(stderr, "jepsen: skipped: %v (run as root on Linux with iproute2 and iptables)\n", err)
		return exitSkipped, nil
	}
	var nems []nemesis.Nemesis
	if len(o.nemeses) == 1 && o.nemeses[0] == "all" {
		o.nemeses = nil
		for _, n := range nemesis.Names() {
			// gossip-forgery and kill-stop-restart came after seeds were
			// published: "all" leaves them out so their schedules stay the
			// same (the trust run and the short profile name them).
			if o.nodes < 5 && (n == "ring" || n == "bridge") || !o.tls && n == "raft-poke" || n == "gossip-forgery" ||
				n == "kill-stop-restart" || nemesis.IsRegionNemesis(n) || nemesis.IsStorageNemesis(n) {
				continue
			}
			o.nemeses = append(o.nemeses, n)
		}
		// Only a run with regions or link delay gets the region nemeses, so
		// the schedule of a published seed without them stays the same.
		o.nemeses = append(o.nemeses, o.wan.regionNemesesFor()...)
	}
	if err := o.wan.checkNemeses(o.nemeses); err != nil {
		return exitUsage, err
	}
	for _, name := range o.nemeses {
		n, err := nemesis.ByName(name)
		if err != nil {
			return exitUsage, err
		}
		nems = append(nems, n)
	}
	if err := os.MkdirAll(o.results, 0o755); err != nil {
		return exitError, err
	}
	// Status lines are redrawn on a terminal and thinned to plain lines in
	// a log; nemesis and phase lines are always written whole.
	prog := progress.New(stderr)
	defer prog.Clear()
	bin := o.binary
	if bin == "" {
		var err error
		if bin, err = buildIntentd(ctx, o.results); err != nil {
			return exitError, err
		}
	}
	prog.Event("jepsen: seed %d, %d nodes, nemeses %v, %s; results in %s", o.seed, o.nodes, o.nemeses, o.duration, o.results)
	nf, code, err := resolveNodeFlags(ctx, &o, bin)
	if err != nil {
		return code, err
	}
	notes := nf.notes
	network := o.wan.describe(o.raftTimeout)
	if network != "" {
		prog.Event("jepsen: %s", network)
	}
	for _, n := range notes {
		prog.Event("jepsen: note: %s", n)
	}

	net, err := netns.Create(ctx, fmt.Sprintf("ij%d", o.seed%1000), o.nodes)
	if err != nil {
		return exitError, fmt.Errorf("network namespaces: %w", err)
	}
	defer net.Close()
	var shaper *wan.Shaper
	var links *wan.Links
	if o.wan.matrix != nil {
		// The relays listen before the nodes start: a node's peers reach it
		// only through them (nodes.Config.Relayed).
		shaper = wan.NewShaper(*o.wan.matrix, o.seed)
		if links, err = wan.Start(net, shaper, relayPorts()); err != nil {
			return exitError, fmt.Errorf("link-delay layer: %w", err)
		}
		defer links.Close()
	}
	// Small snapshot settings so a follower cut off for a few seconds must
	// install a snapshot (snapshot-install, partitions, kills; unless
	// --trailing-logs keeps more of the log). A node's own
	// shutdown bound comes well before the harness's (nodes.StopTimeout),
	// so a hung step is reported by the node, with its goroutines.
	extra := []string{"--test-hooks", "--snapshot-threshold", "256", "--trailing-logs", strconv.Itoa(o.trailingLogs), "--snapshot-interval", "1s",
		"--shutdown-timeout", "10s"}
	if o.bug != "" {
		extra = append(extra, "--test-bug", o.bug)
	}
	if o.logStore != "" {
		extra = append(extra, "--log-store", o.logStore)
	}
	if o.stateEngine != "" {
		extra = append(extra, "--state-engine", o.stateEngine)
	}
	if o.walSegment != 0 {
		extra = append(extra, "--wal-segment-size", strconv.Itoa(o.walSegment))
	}
	trust, err := newTrust(o, net)
	if err != nil {
		return exitError, err
	}
	cl, err := nodes.Start(ctx, nodes.Config{Binary: bin, Net: net, Dir: o.results, ExtraArgs: extra,
		GossipKey: trust.gossipKey, TLSDir: trust.pkiDir, RaftHeartbeat: o.raftTimeout, ProfileTimeouts: nf.profile,
		Relayed: links != nil, NodeArgs: nf.args, BootstrapExpect: nf.bootstrapExpect, Storage: o.storage})
	if err != nil {
		return exitError, fmt.Errorf("start nodes: %w", err)
	}
	defer cl.Close()

	hf, err := os.Create(filepath.Join(o.results, "history.jsonl"))
	if err != nil {
		return exitError, err
	}
	defer hf.Close()
	rec := history.NewRecorder(hf)
	var addrs []string
	for i := 1; i <= o.nodes; i++ {
		addrs = append(addrs, cl.URL(i))
	}
	w := workload.NewContended(workload.Config{
		Nodes: addrs, TLS: cl.ClientTLS(), Clients: o.clients, Claimants: o.claimants, Rate: o.rate, DivergentFraction: 0.05,
		ReadFraction: 0.2, RetryFraction: o.retryFraction, Timeout: 2 * time.Second, Seed: uint64(o.seed), Prefix: fmt.Sprintf("s%d", o.seed),
	}, rec)

	started := time.Now()
	runCtx, stopRun := context.WithTimeout(ctx, o.duration)
	defer stopRun()
	env := &nemesis.Env{Net: net, Nodes: cl, Rec: rec, Rand: rand.New(rand.NewSource(o.seed)), Trust: trust.env(),
		Log: func(format string, args ...any) { prog.Event("  nemesis: "+format, args...) }, Layout: o.wan.layout, Shaper: shaper,
		PowerLoss: o.powerLoss}
	bursts := 0
	env.OnRestart = func(ctx context.Context, i int) {
		bursts++
		go w.ReadBurst(ctx, 10_000+bursts, cl.URL(i), 2*o.hold)
	}
	var wg sync.WaitGroup
	var nemErr error
	wg.Add(2)
	go func() { defer wg.Done(); w.Run(runCtx) }()
	go func() {
		defer wg.Done()
		// A failed fault step ends the run, not the analysis: the nemesis
		// has healed everything, and the history so far is checked.
		if nemErr = nemesis.Run(runCtx, env, nems, o.interval, o.hold); nemErr != nil {
			stopRun()
		}
	}()
	shown := make(chan struct{})
	go func() { defer close(shown); showProgress(runCtx, prog, rec, o.duration) }()
	wg.Wait()
	stopRun()
	<-shown
	if ctx.Err() != nil {
		return exitError, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	harness := ""
	if nemErr != nil {
		harness = nemErr.Error()
		prog.Event("jepsen: HARNESS TROUBLE: %v", nemErr)
	}

	// Healed: wait for the cluster, then the final reads (W2) and digests.
	prog.Event("jepsen: healed; final reads of %d keys", len(w.Keys()))
	healCtx, stopHeal := context.WithTimeout(ctx, 90*time.Second)
	defer stopHeal()
	unread := 0
	if o.finalRead {
		unread = w.FinalReads(healCtx, o.clients+1000)
	}
	// The digests get a bound of their own: slow final reads (a delayed
	// network) must not leave them none.
	digestCtx, stopDigests := context.WithTimeout(ctx, 60*time.Second)
	defer stopDigests()
	digests := collectDigests(digestCtx, addrs, cl.ClientTLS())
	panics, err := cl.Panics()
	if err != nil {
		return exitError, err
	}
	ops, effects, faults := rec.Snapshot()
	if err := rec.Err(); err != nil {
		return exitError, err
	}
	copt := checker.Options{Timeout: time.Minute, RequireOK: []history.OpType{history.OpClaim, history.OpComplete, history.OpRead}}
	if o.wan.layout != nil {
		urls := map[string]string{}
		for i := 1; i <= o.nodes; i++ {
			urls[cl.URL(i)] = nodes.Name(i)
		}
		copt.NodeOf = nodeOf(urls)
		copt.RegionOf = func(u string) string {
			if name := urls[u]; name != "" {
				return o.wan.layout.RegionOf(nodes.Index(name))
			}
			return ""
		}
	}
	if links != nil {
		notes = append(notes, "link-delay layer: "+links.Summary())
	}
	res, lin := checker.Check(ops, effects, faults, digests, panics, copt)
	if unread > 0 {
		res.Valid = false
		res.Violations = append(res.Violations, checker.Violation{Checker: "final-reads",
			Detail: fmt.Sprintf("%d keys could not be read after healing", unread)})
	}
	runInfo := report.Run{Seed: o.seed, Command: o.reproduce(), Nodes: o.nodes, Nemeses: o.nemeses,
		Workloads: workloads(o), Duration: o.duration, Started: started, Harness: harness, Network: network, Notes: notes}
	if err := report.Write(o.results, runInfo, ops, effects, faults, res, lin); err != nil {
		return exitError, fmt.Errorf("report: %w", err)
	}
	fmt.Fprintln(stdout, report.Summary(runInfo, res))
	return verdict(o, res, nemErr, stdout)
}

// verdict is the run's exit code. What the checkers found comes first: a
// violation is exitInvalid (and a caught seeded bug exitValid) whatever
// else happened; a run with no finding whose harness failed is exitError,
// never a pass.
func verdict(o options, res checker.Result, harnessErr error, stdout io.Writer) (int, error) {
	var code int
	switch {
	case o.bug == "" && res.Valid:
		code = exitValid
	case o.bug == "":
		return exitInvalid, nil
	case caughtBySafetyChecker(res):
		fmt.Fprintf(stdout, "positive control %q: CAUGHT (the suite found the seeded bug)\n", o.bug)
		return exitValid, nil
	default:
		fmt.Fprintf(stdout, "positive control %q: MISSED (the suite did not find the seeded bug)\n", o.bug)
		code = exitInvalid
	}
	if harnessErr != nil {
		return exitError, fmt.Errorf("the harness failed, so the run proves less than it should: %w", harnessErr)
	}
	return code, nil
}

// showProgress shows a one-line status every second until ctx ends (prog
// thins it to one line every few seconds when it is not a terminal).
func showProgress(ctx context.Context, prog *progress.Writer, rec *history.Recorder, total time.Duration) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ops, effects, faults := rec.Snapshot()
			by := map[history.Outcome]int{}
			for _, op := range ops {
				if op.Return != 0 {
					by[op.Outcome]++
				}
			}
			active := "none"
			if n := len(faults); n > 0 && faults[n-1].End == 0 {
				active = faults[n-1].Nemesis + " " + strings.Join(faults[n-1].Targets, ",")
			}
			prog.Status("  %s/%s ops=%d ok=%d fail=%d info=%d effects=%d faults=%d active=%s",
				rec.Now().Round(time.Second), total, len(ops), by[history.OutcomeOK], by[history.OutcomeFail],
				by[history.OutcomeInfo], len(effects), len(faults), active)
		}
	}
}

// collectDigests waits until every node reports the same applied index,
// then returns each node's state machine digest (bounded by ctx; what it
// has when ctx ends is returned for the checker to judge).
func collectDigests(ctx context.Context, addrs []string, tlsConf *tls.Config) map[string]string {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf}}
	var last map[string]string
	for ctx.Err() == nil {
		digests, indexes := map[string]string{}, map[uint64]bool{}
		for _, a := range addrs {
			resp, err := hc.Get(a + "/debug/digest")
			if err != nil {
				continue
			}
			var d struct {
				NodeID  string `json:"node_id"`
				Digest  string `json:"digest"`
				Applied uint64 `json:"applied_index"`
			}
			err = json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if err == nil {
				// With the index, a replica that had not caught up when
				// the time ran out reads as such, not as a divergence.
				digests[d.NodeID] = fmt.Sprintf("%s@%d", d.Digest, d.Applied)
				indexes[d.Applied] = true
			}
		}
		last = digests
		if len(digests) == len(addrs) && len(indexes) == 1 {
			return digests
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return last
}

// workloads names the workloads a run used: W3 rides on the restart-read
// nemesis.
func workloads(o options) []string {
	out := []string{"w1-contended-claims"}
	if o.finalRead {
		out = append(out, "w2-final-reads")
	}
	for _, n := range o.nemeses {
		if strings.Contains(n, "restart-read") {
			return append(out, "w3-restart-reads")
		}
	}
	return out
}

// caughtBySafetyChecker reports whether a guarantee checker (not a
// "proves too little" one) found a violation: only that catches a bug.
func caughtBySafetyChecker(res checker.Result) bool {
	for _, v := range res.Violations {
		if slices.Contains(checker.SafetyCheckers, v.Checker) {
			return true
		}
	}
	return false
}
