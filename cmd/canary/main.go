// Command canary is the canary gate of intentd: it starts a 3-node ledger
// cluster on loopback, runs fault-injected agent episodes against it for
// each seed (twice, to check that replays are byte-identical) and exits 0
// only when no at-most-once (I1), at-least-once (I2), orphan-intent (I4)
// or divergent-retry violation occurred and every replay matched.
//
//	canary [--episodes 200] [--classes all] [--seeds 1,2,3] [--concurrency 32]
//	       [--broken fresh-key|no-ledger] [--tool process|in-process]
//	       [--via sdk|http-proxy|mcp] [--addr URL,...] [--json FILE]
//
// The agent reaches the tool service over HTTP through a fault-injecting
// proxy; the tool service runs as a child process by default (a crash is a
// real SIGKILL of a tool process) or in-process with --tool in-process.
// With --via http-proxy the tool is a plain HTTP API that never calls the
// SDK, intent-proxy stands in front of it, and the agent sends the
// episode's key as an Idempotency-Key header. With --via mcp the tool is
// a plain MCP server, the MCP gate (mcpgate) stands in front of it, and
// the agent is an MCP client that sends the key in
// _meta["dev.intentd/idempotencyKey"].
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/intentledger/intentd/canary"
	"github.com/intentledger/intentd/internal/progress"
	"github.com/intentledger/intentd/testkit/localcluster"
)

// report is the JSON written by --json.
type report struct {
	Passed      bool         `json:"passed"`
	Broken      string       `json:"broken,omitempty"`
	Via         string       `json:"via"`
	Episodes    int          `json:"episodes_per_class"`
	Seeds       []seedReport `json:"seeds"`
	DurationSec float64      `json:"duration_seconds"`
}

type seedReport struct {
	Seed          uint64               `json:"seed"`
	Digest        string               `json:"digest"`
	ReplayDigest  string               `json:"replay_digest"`
	ReplayMatches bool                 `json:"replay_matches"`
	Classes       []*canary.ClassStats `json:"classes"`
	Violations    []canary.Violation   `json:"violations,omitempty"`
}

func main() {
	if os.Getenv(canary.ToolProcessEnv) == "1" {
		// Started by a run as its tool service process.
		os.Exit(canary.ToolProcessMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command; it returns the exit code: 0 pass, 1 gate failed,
// 2 bad usage or the run could not be carried out.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("canary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	episodes := fs.Int("episodes", 200, "episodes per class and seed")
	classes := fs.String("classes", "all", "comma-separated classes: lost-ack,duplicate,reorder,crash,divergent (or 1..5)")
	seeds := fs.String("seeds", "1,2,3", "comma-separated seeds")
	concurrency := fs.Int("concurrency", 32, "episodes run at once")
	broken := fs.String("broken", "", "break the protocol on purpose: fresh-key or no-ledger")
	jsonFile := fs.String("json", "", "write a JSON report to this file")
	tool := fs.String("tool", "process", "where the tool service runs: process (a child process; each crash kills a real process with SIGKILL) or in-process")
	via := fs.String("via", "sdk", "what guards the tool: sdk (the tool service calls client.Do), http-proxy (a plain HTTP tool behind intent-proxy; the agent sends an Idempotency-Key) or mcp (a plain MCP tool behind the MCP gate; the agent, an MCP client, sends the key in _meta)")
	addr := fs.String("addr", "", "comma-separated HTTP addresses of an existing cluster (default: start a 3-node cluster on loopback)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := canary.Config{Episodes: *episodes, Concurrency: *concurrency}
	var err error
	switch *tool {
	case "process":
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "canary: cannot find its own executable for --tool process: %v\n", err)
			return 2
		}
		cfg.ToolCommand = []string{self}
	case "in-process":
	default:
		fmt.Fprintf(stderr, "canary: --tool %q: want process or in-process\n", *tool)
		return 2
	}
	if cfg.Broken, err = canary.ParseBroken(*broken); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if cfg.Via, err = canary.ParseVia(*via); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *classes != "all" && *classes != "" {
		for _, s := range strings.Split(*classes, ",") {
			c, err := canary.ParseClass(s)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 2
			}
			cfg.Classes = append(cfg.Classes, c)
		}
	} else {
		cfg.Classes = canary.AllClasses
	}
	var seedList []uint64
	for _, s := range strings.Split(*seeds, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "canary: bad seed %q\n", s)
			return 2
		}
		seedList = append(seedList, v)
	}
	if *episodes <= 0 {
		fmt.Fprintln(stderr, "canary: --episodes must be positive")
		return 2
	}

	start := time.Now()
	where := "existing cluster " + *addr
	if *addr != "" {
		for _, a := range strings.Split(*addr, ",") {
			if a = strings.TrimSpace(a); a != "" {
				if !strings.Contains(a, "://") {
					a = "http://" + a
				}
				cfg.Addrs = append(cfg.Addrs, a)
			}
		}
	} else {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		cl, err := localcluster.Start(sctx, 3, "")
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		defer cl.Close()
		cfg.Addrs = cl.URLs()
		where = fmt.Sprintf("3-node cluster up in %v", time.Since(start).Round(time.Millisecond))
	}
	guard := "guarded by client.Do"
	switch cfg.Via {
	case canary.ViaHTTPProxy:
		guard = "a plain HTTP API behind intent-proxy"
	case canary.ViaMCP:
		guard = "a plain MCP server behind the MCP gate"
	}
	fmt.Fprintf(stdout, "canary: %s; tool service %s, %s; %d episodes x %d classes x %d seeds, each run twice, concurrency %d\n",
		where, *tool, guard, *episodes, len(cfg.Classes), len(seedList), *concurrency)

	rep := report{Passed: true, Broken: string(cfg.Broken), Via: string(cfg.Via), Episodes: *episodes}
	totalRuns := 2 * len(seedList)
	runNo := 0
	prog := progress.New(stderr)
	for _, seed := range seedList {
		var results [2]*canary.Result
		for i := range results {
			runNo++
			c := cfg
			c.Seed, c.RunID = seed, fmt.Sprintf("%d-%d", seed, i)
			c.Progress = showProgress(prog, runNo, totalRuns, seed, i)
			res, err := canary.Run(ctx, c)
			prog.Clear()
			if err != nil {
				prog.Event("canary: seed %d: %v", seed, err)
				return 2
			}
			results[i] = res
		}
		a, b := results[0], results[1]
		sr := seedReport{Seed: seed, Digest: a.Digest, ReplayDigest: b.Digest, ReplayMatches: a.Digest == b.Digest,
			Classes: a.Classes, Violations: append(a.Violations, b.Violations...)}
		rep.Seeds = append(rep.Seeds, sr)
		if !sr.ReplayMatches || !a.Passed() || !b.Passed() {
			rep.Passed = false
		}
		printSeed(stdout, a, b)
	}
	rep.DurationSec = time.Since(start).Seconds()
	if *jsonFile != "" {
		data, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonFile, append(data, '\n'), 0o644); err != nil {
			fmt.Fprintf(stderr, "canary: %v\n", err)
			return 2
		}
	}
	verdict := "PASS"
	if !rep.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "canary: %s in %v\n", verdict, time.Since(start).Round(time.Millisecond))
	if !rep.Passed {
		return 1
	}
	return 0
}

// showProgress returns a Progress callback: a bar that prog redraws on a
// terminal (and thins to a plain line every few seconds in a log); the
// finished bar is always written as a line of its own.
func showProgress(prog *progress.Writer, runNo, runs int, seed uint64, replay int) func(done, total int) {
	const width = 30
	return func(done, total int) {
		fill := done * width / max(total, 1)
		line := fmt.Sprintf("[%s%s] run %d/%d seed %d pass %d: %d/%d episodes",
			strings.Repeat("#", fill), strings.Repeat(".", width-fill), runNo, runs, seed, replay+1, done, total)
		if done == total {
			prog.Event("%s", line)
		} else {
			prog.Status("%s", line)
		}
	}
}

// printSeed prints the table of a seed's first run, the replay check and
// the violations of both runs with their event order.
func printSeed(w io.Writer, a, b *canary.Result) {
	fmt.Fprintf(w, "seed %d  digest %s  replay %s", a.Seed, a.Digest[:16], b.Digest[:16])
	if a.Digest == b.Digest {
		fmt.Fprintln(w, "  (match)")
	} else {
		fmt.Fprintln(w, "  (REPLAY MISMATCH)")
		shown := 0
		for i := range max(len(a.Log), len(b.Log)) {
			var la, lb string
			if i < len(a.Log) {
				la = a.Log[i]
			}
			if i < len(b.Log) {
				lb = b.Log[i]
			}
			if la != lb && shown < 5 {
				shown++
				fmt.Fprintf(w, "  line %d differs:\n    run 1: %s\n    run 2: %s\n", i+1, la, lb)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "class\tepisodes\tdeliveries\tacks lost\tduplicates\tcrashes\tdivergent refused\tin_doubt\tviolations\t")
	for _, s := range a.Classes {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", s.Class, s.Episodes, s.Deliveries, s.AcksLost,
			s.Duplicates, s.Crashes, s.DivergentRefused, s.InDoubt, s.Violations)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "violations: I1=%d I2=%d I4=%d divergent-executed=%d\n", a.I1, a.I2, a.I4, a.DivergentExecuted)
	const show = 3
	for i, v := range append(append([]canary.Violation(nil), a.Violations...), b.Violations...) {
		if i == show {
			fmt.Fprintf(w, "... and %d more violations\n", len(a.Violations)+len(b.Violations)-show)
			break
		}
		fmt.Fprintf(w, "VIOLATION %s seed=%d class=%s episode=%d: %s\n", v.Property, v.Seed, v.Class, v.Episode, v.Detail)
		for _, e := range v.Events {
			fmt.Fprintf(w, "    %s\n", e)
		}
		extra := ""
		if a.Broken != canary.NotBroken {
			extra = " --broken " + string(a.Broken)
		}
		if a.Via != canary.ViaSDK {
			extra += " --via " + string(a.Via)
		}
		fmt.Fprintf(w, "  reproduce: go run ./cmd/canary --seeds %d --classes %s --episodes %d%s\n", v.Seed, v.Class, v.Episode+1, extra)
	}
}
