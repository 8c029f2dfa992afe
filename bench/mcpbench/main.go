// Command mcpbench measures what the MCP gate (cmd/intent-mcp) adds to a
// tool call, on a running intentd cluster (make bench-mcp starts one:
// bench/scripts/bench-mcp.sh). With a real go-sdk client it calls the test
// upstream's bench tool (testkit/mcpupstream: a
// destructive tool that answers at once and writes nothing), closed loop,
// for each number of concurrent callers:
//
//	direct stdio   the upstream launched by the client, over stdio
//	gate stdio     intent-mcp launched by the client over stdio, the upstream launched by the gate
//	direct http    the upstream serving streamable HTTP
//	gate http      intent-mcp serving streamable HTTP (--listen) in front of that upstream
//	ledger         the ledger's own claim, then complete, through the Go SDK
//
// Every call carries a fresh explicit key (_meta["dev.intentd/idempotencyKey"]),
// so every gated call is a claim, the upstream call and a complete. The
// callers of a cell share one MCP session, as a host's parallel tool calls
// do. It prints a Markdown table per cell kind and the verdict against the
// gate's target: the gate's added p50 (gate − direct) at most 2× the
// ledger's claim p50 measured in the same run.
//
//	mcpbench --gate-bin bin/intent-mcp --upstream-bin /tmp/testupstream --callers 1,16 --duration 10s
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/internal/progress"
)

// benchTool is the upstream's tool every cell calls.
const benchTool = "bench"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	ledger           []string
	gateBin, upBin   string
	callers          []int
	transports       []string
	duration, warmup time.Duration
	rounds           int
	runDir           string
	profileDir       string
	nodePIDs         []int
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("mcpbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ledger := fs.String("ledger", "http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103", "comma-separated intentd node addresses")
	callers := fs.String("callers", "1,16", "comma-separated numbers of concurrent callers")
	transports := fs.String("transports", "stdio,http", "stdio, http or both")
	pids := fs.String("node-pids", "", "comma-separated pids of the cluster's nodes, for their CPU per call (optional)")
	fs.StringVar(&c.gateBin, "gate-bin", "bin/intent-mcp", "the intent-mcp binary")
	fs.StringVar(&c.upBin, "upstream-bin", "", "the test upstream binary (testkit/mcpupstream; required)")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured time per cell")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured time before each cell")
	fs.IntVar(&c.rounds, "rounds", 1, "rounds; the order of the cells is rotated each round")
	fs.StringVar(&c.runDir, "run-dir", "", "where logs and effects files go (default: a new temporary directory)")
	fs.StringVar(&c.profileDir, "profile-dir", "", "take a CPU profile of the gate (intent-mcp --pprof) in each gate cell of round 1, into this directory")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.ledger = splitList(*ledger)
	c.transports = splitList(*transports)
	for _, s := range splitList(*callers) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return c, fmt.Errorf("--callers: bad number %q", s)
		}
		c.callers = append(c.callers, n)
	}
	for _, s := range splitList(*pids) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return c, fmt.Errorf("--node-pids: bad pid %q", s)
		}
		c.nodePIDs = append(c.nodePIDs, n)
	}
	for _, t := range c.transports {
		if t != "stdio" && t != "http" {
			return c, fmt.Errorf("--transports: %q is neither stdio nor http", t)
		}
	}
	switch {
	case len(c.ledger) == 0, len(c.callers) == 0, len(c.transports) == 0:
		return c, errors.New("--ledger, --callers and --transports must not be empty")
	case c.upBin == "" || c.gateBin == "":
		return c, errors.New("--upstream-bin and --gate-bin are required")
	case c.duration <= 0 || c.warmup < 0 || c.rounds < 1:
		return c, errors.New("--duration must be positive, --warmup not negative, --rounds at least 1")
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "mcpbench:", err)
		return 2
	}
	b, err := newBench(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "mcpbench:", err)
		return 1
	}
	defer b.close()
	res, err := b.all(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "mcpbench:", err)
		return 1
	}
	writeTables(stdout, cfg, res)
	return 0
}

// bench holds what lives across cells: the HTTP upstream, the HTTP gate,
// the ledger client.
type bench struct {
	cfg      config
	prog     *progress.Writer
	hc       *http.Client
	ledger   *client.Client
	upURL    string // the HTTP upstream's endpoint
	gateURL  string // the HTTP gate's endpoint
	gatePPro string // the HTTP gate's pprof address
	gatePID  int    // the HTTP gate's process
	procs    []*exec.Cmd
	runID    string
}

// pooled is an HTTP client that keeps enough idle connections for every
// caller (net/http's default keeps 2 per host).
func pooled() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 256
	return &http.Client{Transport: t}
}

func newBench(ctx context.Context, cfg config, stderr io.Writer) (*bench, error) {
	b := &bench{cfg: cfg, prog: progress.New(stderr), hc: pooled(), runID: strconv.FormatInt(time.Now().UnixNano(), 36)}
	if b.cfg.runDir == "" {
		d, err := os.MkdirTemp("", "mcpbench-")
		if err != nil {
			return nil, err
		}
		b.cfg.runDir = d
	}
	var err error
	hc := pooled()
	hc.Timeout = 30 * time.Second
	if b.ledger, err = client.New(cfg.ledger, client.WithHTTPClient(hc)); err != nil {
		return nil, err
	}
	if !slices.Contains(cfg.transports, "http") {
		return b, nil
	}
	addrFile := filepath.Join(b.cfg.runDir, "upstream.addr")
	if err := b.start("upstream-http", cfg.upBin, "--effects", filepath.Join(b.cfg.runDir, "upstream-http.effects"),
		"--http", "127.0.0.1:0", "--addr-file", addrFile); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 30*time.Second, "the HTTP upstream's address", func() bool {
		a, err := os.ReadFile(addrFile)
		b.upURL = "http://" + string(a) + "/mcp"
		return err == nil
	}); err != nil {
		b.close()
		return nil, err
	}
	addr, pprofAddr := freeAddr(), freeAddr()
	b.gateURL, b.gatePPro = "http://"+addr+"/mcp", pprofAddr
	gateArgs := append(b.gateArgs(pprofAddr), "--listen", addr, "--insecure-no-caller-auth", "--upstream", "up="+b.upURL)
	if err := b.start("gate-http", cfg.gateBin, gateArgs...); err != nil {
		b.close()
		return nil, err
	}
	b.gatePID = b.procs[len(b.procs)-1].Process.Pid
	if err := waitFor(ctx, 60*time.Second, "the HTTP gate to be ready", func() bool {
		resp, err := b.hc.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// gateArgs are the flags of every gate: the gate's defaults but a quieter
// log.
func (b *bench) gateArgs(pprofAddr string) []string {
	args := []string{"--ledger", strings.Join(b.cfg.ledger, ","), "--log-level", "warn"}
	if b.cfg.profileDir != "" {
		args = append(args, "--pprof", pprofAddr)
	}
	return args
}

// start starts a long-lived process, its output in the run directory.
func (b *bench) start(name, bin string, args ...string) error {
	log, err := os.Create(filepath.Join(b.cfg.runDir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	b.procs = append(b.procs, cmd)
	return nil
}

func (b *bench) close() {
	for _, p := range b.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range b.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	b.procs = nil
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:0"
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitFor(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// cell is one measurement: a path, a transport and a number of callers.
type cell struct {
	path      string // direct, gate or ledger
	transport string // stdio or http; "" for the ledger
	callers   int
}

func (c cell) String() string {
	if c.path == "ledger" {
		return fmt.Sprintf("%d callers, ledger claim + complete", c.callers)
	}
	return fmt.Sprintf("%d callers, %s over %s", c.callers, c.path, c.transport)
}

// result is one cell's measurement.
type result struct {
	cell
	round          int
	rate           float64 // calls (or claim + complete ops) per second
	p50, p99       time.Duration
	claimP50       time.Duration // ledger only: the claim alone
	claimP99       time.Duration
	calls          int
	errors         int64
	firstErr       string
	gateCPU, nodes float64 // CPU ms per call: the gate process (gate cells), the nodes (when --node-pids)
	loadCPU        float64 // CPU ms per call of this driver
}

// all runs every cell for every round.
func (b *bench) all(ctx context.Context) ([]result, error) {
	var cells []cell
	for _, n := range b.cfg.callers {
		for _, t := range b.cfg.transports {
			cells = append(cells, cell{"direct", t, n}, cell{"gate", t, n})
		}
		cells = append(cells, cell{"ledger", "", n})
	}
	var out []result
	for r := 1; r <= b.cfg.rounds; r++ {
		order := append(slices.Clone(cells[(r-1)%len(cells):]), cells[:(r-1)%len(cells)]...)
		for i, c := range order {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			profile := b.cfg.profileDir != "" && r == 1 && c.path == "gate"
			b.prog.Event("mcpbench: round %d/%d, cell %d/%d: %s ...", r, b.cfg.rounds, i+1, len(order), c)
			res, err := b.measure(ctx, c, r, profile)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c, err)
			}
			b.prog.Event("mcpbench:   %.0f calls/s, p50 %.2f ms, p99 %.2f ms, %d errors%s", res.rate, ms(res.p50), ms(res.p99), res.errors,
				map[bool]string{true: " (first: " + res.firstErr + ")", false: ""}[res.errors > 0])
			out = append(out, res)
		}
	}
	return out, nil
}

// op is one timed call; claim is the claim's own latency (ledger only).
type op func(ctx context.Context, key string) (claim time.Duration, err error)

// measure runs one cell: connect, one unmeasured call, then callers
// closed-loop callers for warmup + duration.
func (b *bench) measure(ctx context.Context, c cell, round int, profile bool) (result, error) {
	res := result{cell: c, round: round}
	var call op
	var gatePID int
	pprofAddr := ""
	switch {
	case c.path == "ledger":
		call = b.ledgerOp
	default:
		cs, pid, pp, err := b.connect(ctx, c)
		if err != nil {
			return res, err
		}
		defer cs.Close()
		gatePID, pprofAddr = pid, pp
		call = func(ctx context.Context, key string) (time.Duration, error) {
			// A call that never returns would stall its caller for the rest
			// of the cell and leave it measuring nothing: bound each one,
			// and count a call without an answer as an error that says so.
			cctx, cancel := context.WithTimeout(ctx, callBound)
			defer cancel()
			r, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: benchTool,
				Arguments: map[string]any{"order": key, "amount": 1299, "currency": "usd"},
				Meta:      map[string]any{"dev.intentd/idempotencyKey": key}})
			switch {
			case err != nil && ctx.Err() == nil && cctx.Err() != nil:
				return 0, fmt.Errorf("no answer within %v (call %s)", callBound, key)
			case err != nil:
				return 0, err
			case r.IsError:
				return 0, fmt.Errorf("isError result: %s", textOf(r))
			case r.Meta["dev.intentd/replayed"] == true:
				return 0, errors.New("a fresh key was replayed")
			}
			return 0, nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err := call(cctx, fmt.Sprintf("mcpbench-%s-first-%s-%s-%d-%d", b.runID, c.path, c.transport, c.callers, round))
	cancel()
	if err != nil {
		return res, fmt.Errorf("the first call: %w", err)
	}

	var profDone chan error
	if profile && pprofAddr != "" {
		profDone = make(chan error, 1)
		go func() { profDone <- b.profile(ctx, c, pprofAddr) }()
	}
	self0 := cpuTicks(os.Getpid())
	gate0 := cpuTicks(gatePID)
	nodes0 := cpuTicks(b.cfg.nodePIDs...)

	lctx, lcancel := context.WithTimeout(ctx, b.cfg.warmup+b.cfg.duration)
	defer lcancel()
	start := time.Now()
	measureFrom := start.Add(b.cfg.warmup)
	var (
		mu            sync.Mutex
		lat, claimLat []time.Duration
		errs, done    atomic.Int64
		firstErr      atomic.Value
		wg            sync.WaitGroup
	)
	stopProg := make(chan struct{})
	progDone := make(chan struct{})
	go func() {
		defer close(progDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProg:
				b.prog.Clear()
				return
			case <-t.C:
				b.prog.Status("  %s: %s of %s, %d calls, %d errors", c, time.Since(start).Round(time.Second), b.cfg.warmup+b.cfg.duration, done.Load(), errs.Load())
			}
		}
	}()
	for i := 0; i < c.callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var local, localClaim []time.Duration
			for j := 0; lctx.Err() == nil; j++ {
				key := fmt.Sprintf("mcpbench-%s-%s-%s-%d-%d-%d-%d", b.runID, c.path, c.transport, c.callers, round, i, j)
				t0 := time.Now()
				claim, err := call(lctx, key)
				d := time.Since(t0)
				if lctx.Err() != nil {
					break // the cell ended mid-call: not counted
				}
				done.Add(1)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				if !t0.Before(measureFrom) {
					local = append(local, d)
					if claim > 0 {
						localClaim = append(localClaim, claim)
					}
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			claimLat = append(claimLat, localClaim...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stopProg)
	<-progDone
	if profDone != nil {
		if err := <-profDone; err != nil {
			b.prog.Event("mcpbench: the profile of %s could not be taken: %v", c, err)
		}
	}
	slices.Sort(lat)
	slices.Sort(claimLat)
	res.calls = len(lat)
	res.rate = float64(len(lat)) / b.cfg.duration.Seconds()
	res.p50, res.p99 = pct(lat, 0.50), pct(lat, 0.99)
	res.claimP50, res.claimP99 = pct(claimLat, 0.50), pct(claimLat, 0.99)
	res.errors = errs.Load()
	if v, ok := firstErr.Load().(string); ok {
		res.firstErr = v
	}
	// CPU per call over the whole cell (warm-up included), at the measured
	// rate: an estimate, the same for every cell.
	if all := res.rate * (b.cfg.warmup + b.cfg.duration).Seconds(); all > 0 {
		per := func(ticks int64) float64 { return float64(ticks) * 10 / all } // 100 ticks per second: 10 ms a tick
		res.loadCPU = per(cpuTicks(os.Getpid()) - self0)
		if gatePID != 0 {
			res.gateCPU = per(cpuTicks(gatePID) - gate0)
		}
		if len(b.cfg.nodePIDs) > 0 {
			res.nodes = per(cpuTicks(b.cfg.nodePIDs...) - nodes0)
		}
	}
	return res, nil
}

// callBound bounds one MCP call of a cell; the bench tool answers at
// once, so a call past it got no answer at all.
const callBound = 5 * time.Second

// connect opens the cell's MCP session; for a gate cell it returns the
// gate's pid and pprof address too.
func (b *bench) connect(ctx context.Context, c cell) (*mcp.ClientSession, int, string, error) {
	cl := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil)
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var t mcp.Transport
	pid, pprofAddr := 0, ""
	var cmd *exec.Cmd
	switch {
	case c.transport == "http" && c.path == "direct":
		t = &mcp.StreamableClientTransport{Endpoint: b.upURL, HTTPClient: b.hc}
	case c.transport == "http":
		t = &mcp.StreamableClientTransport{Endpoint: b.gateURL, HTTPClient: b.hc}
		pid, pprofAddr = b.gatePID, b.gatePPro
	case c.path == "direct":
		cmd = exec.Command(b.cfg.upBin, "--effects", filepath.Join(b.cfg.runDir, "upstream-stdio.effects"))
	default:
		pprofAddr = freeAddr()
		args := append(b.gateArgs(pprofAddr), "--", b.cfg.upBin, "--effects", filepath.Join(b.cfg.runDir, "upstream-stdio.effects"))
		cmd = exec.Command(b.cfg.gateBin, args...)
	}
	if cmd != nil {
		log, err := os.OpenFile(filepath.Join(b.cfg.runDir, "stdio-"+c.path+".log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, 0, "", err
		}
		defer log.Close() // the child holds its own descriptor
		cmd.Stderr = log
		t = &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}
	}
	cs, err := cl.Connect(cctx, t, nil)
	if err != nil {
		return nil, 0, "", fmt.Errorf("connect: %w", err)
	}
	if cmd != nil && c.path == "gate" {
		pid = cmd.Process.Pid
	}
	if pid == 0 {
		pprofAddr = ""
	}
	return cs, pid, pprofAddr, nil
}

// ledgerOp is the ledger's own round trip, as intent-bench --via sdk does
// it: Claim, then Complete executed; the claim's latency is returned.
func (b *bench) ledgerOp(ctx context.Context, key string) (time.Duration, error) {
	payload, _ := json.Marshal(map[string]any{"order": key, "amount": 1299, "currency": "usd"})
	owner := "mcpbench/" + key
	t0 := time.Now()
	g, err := b.ledger.Claim(ctx, client.ClaimRequest{Key: key, Tool: "mcpbench.ledger", Owner: owner, Payload: payload})
	claim := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if g.Status != client.StatusGranted {
		return 0, fmt.Errorf("claim of a fresh key answered %s", g.Status)
	}
	_, err = b.ledger.Complete(ctx, client.CompleteRequest{Key: key, Owner: owner, FencingToken: g.FencingToken,
		Outcome: client.OutcomeExecuted, Result: json.RawMessage(`{"id":"ch_1","status":"succeeded"}`)})
	return claim, err
}

// profile takes a CPU profile of the gate over the measured part of the
// cell.
func (b *bench) profile(ctx context.Context, c cell, addr string) error {
	select {
	case <-time.After(b.cfg.warmup):
	case <-ctx.Done():
		return ctx.Err()
	}
	secs := max(int(b.cfg.duration.Seconds())-1, 1)
	resp, err := b.hc.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof: HTTP %d", resp.StatusCode)
	}
	if err := os.MkdirAll(b.cfg.profileDir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(b.cfg.profileDir, fmt.Sprintf("gate-%s-%d-cpu.pprof", c.transport, c.callers)))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cpuTicks is the user + system clock ticks the processes used so far (0
// for pids that cannot be read).
func cpuTicks(pids ...int) int64 {
	var sum int64
	for _, pid := range pids {
		if pid == 0 {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		_, rest, ok := strings.Cut(string(b), ") ")
		if !ok {
			continue
		}
		f := strings.Fields(rest) // f[0] is field 3 (state): utime is field 14, stime 15
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + s
	}
	return sum
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func textOf(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// writeTables prints the measurements and the verdict as Markdown.
func writeTables(w io.Writer, cfg config, res []result) {
	type id struct {
		path, transport string
		callers         int
	}
	by := map[id][]result{}
	for _, r := range res {
		k := id{r.path, r.transport, r.callers}
		by[k] = append(by[k], r)
	}
	join := func(rs []result, f func(result) string) string {
		parts := make([]string, len(rs))
		for i, r := range rs {
			parts[i] = f(r)
		}
		return strings.Join(parts, " / ")
	}
	avg := func(rs []result, f func(result) float64) float64 {
		s := 0.0
		for _, r := range rs {
			s += f(r)
		}
		return s / float64(len(rs))
	}
	fmt.Fprintf(w, "mcpbench: %d round(s), %s + %s per cell, callers %v, transports %v; every call a fresh explicit key\n\n",
		cfg.rounds, cfg.warmup, cfg.duration, cfg.callers, cfg.transports)
	fmt.Fprintln(w, "| callers | path | calls/s (each round) | p50 ms | p99 ms | errors | CPU ms per call: gate / nodes / client |")
	fmt.Fprintln(w, "| ---: | --- | --- | --- | --- | ---: | --- |")
	cpu := func(rs []result) string {
		return fmt.Sprintf("%.3f / %.3f / %.3f", avg(rs, func(r result) float64 { return r.gateCPU }),
			avg(rs, func(r result) float64 { return r.nodes }), avg(rs, func(r result) float64 { return r.loadCPU }))
	}
	errs := func(rs []result) int64 {
		var n int64
		for _, r := range rs {
			n += r.errors
		}
		return n
	}
	labels := map[string]string{"direct": "upstream direct", "gate": "through intent-mcp"}
	for _, n := range cfg.callers {
		for _, t := range cfg.transports {
			for _, p := range []string{"direct", "gate"} {
				rs := by[id{p, t, n}]
				fmt.Fprintf(w, "| %d | %s, %s | %s | %s | %s | %d | %s |\n", n, labels[p], t,
					join(rs, func(r result) string { return fmt.Sprintf("%.0f", r.rate) }),
					join(rs, func(r result) string { return fmt.Sprintf("%.2f", ms(r.p50)) }),
					join(rs, func(r result) string { return fmt.Sprintf("%.2f", ms(r.p99)) }), errs(rs), cpu(rs))
			}
		}
		rs := by[id{"ledger", "", n}]
		fmt.Fprintf(w, "| %d | ledger claim (Go SDK) | | %s | %s | | |\n", n,
			join(rs, func(r result) string { return fmt.Sprintf("%.2f", ms(r.claimP50)) }),
			join(rs, func(r result) string { return fmt.Sprintf("%.2f", ms(r.claimP99)) }))
		fmt.Fprintf(w, "| %d | ledger claim + complete (Go SDK) | %s | %s | %s | %d | %s |\n", n,
			join(rs, func(r result) string { return fmt.Sprintf("%.0f", r.rate) }),
			join(rs, func(r result) string { return fmt.Sprintf("%.2f", ms(r.p50)) }),
			join(rs, func(r result) string { return fmt.Sprintf("%.2f", ms(r.p99)) }), errs(rs), cpu(rs))
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "| callers | transport | gate's added p50 (gate − direct) | added p99 | 2 × ledger claim p50 | ledger claim + complete p50 | target: added p50 ≤ 2 × claim p50 |")
	fmt.Fprintln(w, "| ---: | --- | --- | --- | --- | --- | --- |")
	for _, n := range cfg.callers {
		led := by[id{"ledger", "", n}]
		for _, t := range cfg.transports {
			direct, gate := by[id{"direct", t, n}], by[id{"gate", t, n}]
			met := true
			var added, added99, twice, cc []string
			for i := range gate {
				if i >= len(direct) || i >= len(led) {
					break
				}
				limit := 2 * ms(led[i].claimP50)
				twice = append(twice, fmt.Sprintf("%.2f", limit))
				cc = append(cc, fmt.Sprintf("%.2f", ms(led[i].p50)))
				if gate[i].calls == 0 || direct[i].calls == 0 || led[i].calls == 0 {
					// A cell that measured nothing has no p50 to subtract:
					// a difference with it would be the gate's whole p50.
					met = false
					added, added99 = append(added, "n/a"), append(added99, "n/a")
					continue
				}
				a := ms(gate[i].p50 - direct[i].p50)
				if a > limit || gate[i].errors > 0 {
					met = false
				}
				added = append(added, fmt.Sprintf("%.2f", a))
				added99 = append(added99, fmt.Sprintf("%.2f", ms(gate[i].p99-direct[i].p99)))
			}
			verdict := "**met**"
			if !met || len(added) == 0 {
				verdict = "**not met**"
			}
			fmt.Fprintf(w, "| %d | %s | %s ms | %s ms | %s ms | %s ms | %s |\n", n, t, strings.Join(added, " / "),
				strings.Join(added99, " / "), strings.Join(twice, " / "), strings.Join(cc, " / "), verdict)
		}
	}
}
