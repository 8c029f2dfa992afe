// Package canary is the canary gate of intentd: it stands between an agent
// loop and a tool service, injects faults deterministically from a seed and
// checks the ledger's invariants on every episode.
//
// A run starts three HTTP services on loopback: a provider (the downstream
// system whose effect log is the ground truth), a tool service that
// guards each charge with the real ledger cluster through client.Do and
// performs it at the provider, and a fault-injecting proxy between the
// agent and the tool service. The tool service runs in-process or, with
// Config.ToolCommand, as a separate process; then every crash delivery goes
// to a fresh tool process that kills itself with SIGKILL at the crash
// point.
//
// With Config.Via set to ViaHTTPProxy the tool service does not use the
// SDK: it is a plain HTTP API (NewPlainTool) and intent-proxy
// (idemproxy.Handler) stands between the fault proxy and it; the agent sends
// the episode's key as an Idempotency-Key header, and the same faults,
// checks and broken modes apply (no-ledger: the proxy's route passes
// requests through).
//
// With ViaMCP the tool is a plain MCP server (NewMCPTool) behind the MCP
// gate (mcpgate), served over streamable HTTP; the agent is a go-sdk
// client that sends each delivery as a new tools/call with the episode's
// key in _meta["dev.intentd/idempotencyKey"], the fault proxy applies the
// same faults to those calls, and the gate's answers (a replayed result,
// in_doubt and in_flight results, the divergent JSON-RPC error) map onto
// the same outcomes (no-ledger: the gate passes the tool's calls
// through).
//
// An episode is one logical effect (its key derived from the seed, the
// failure class and the episode number) that a simulated agent delivers
// over HTTP through the proxy until it gets an answer. The proxy draws the
// episode's fault schedule from (seed, class, episode) and applies it:
// lost ACKs, duplicate deliveries, held deliveries that let a retry
// overtake them, tool crashes before or after the effect. The agent itself
// changes an argument on retry in the divergent class. After the episode
// the runner checks:
//
//   - I1 at-most-once: at most one real effect per logical effect;
//   - I2 at-least-once: the effect ran, or the agent surfaced it as
//     in_doubt or divergent — never silently dropped;
//   - I4 no orphan intent: the agent reports success only for an effect the
//     ledger shows executed (checked with a linearizable read);
//   - divergent retries are refused and never executed.
//
// I3 determinism is checked across runs: each episode's fault schedule
// depends only on (seed, class, episode) through its own PCG generator, and
// the canonical event log leaves out everything that depends on goroutine
// scheduling (which of two racing deliveries won, timings, transaction
// ids, process ids), so the same seed gives a byte-identical log and
// verdict, compared by SHA-256 digest.
package canary

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/client"
	idem "github.com/intentledger/intentd/frontend/idemproxy"
)

// Class is a failure class the fault layer injects.
type Class int

// The failure classes.
const (
	// LostAck: the tool ran and recorded the effect but the response to the
	// agent is dropped (1 to 3 times); the agent retries.
	LostAck Class = iota + 1
	// Duplicate: the same call is delivered 2 or 3 times concurrently.
	Duplicate
	// Reorder: the original delivery is held for a seeded delay while the
	// agent times out and retries, so the retry arrives before the
	// original's effect is visible.
	Reorder
	// Crash: the tool crashes before or after the effect (seeded), without
	// reporting to the ledger; the key turns in_doubt when its lease passes.
	Crash
	// Divergent: the response is lost and the agent retries with a changed
	// argument; the ledger must refuse it and it must never run.
	Divergent
)

// AllClasses lists every failure class in order.
var AllClasses = []Class{LostAck, Duplicate, Reorder, Crash, Divergent}

var classNames = map[Class]string{
	LostAck: "lost-ack", Duplicate: "duplicate", Reorder: "reorder", Crash: "crash", Divergent: "divergent",
}

// String returns the class's name ("lost-ack" ...).
func (c Class) String() string {
	if n, ok := classNames[c]; ok {
		return n
	}
	return fmt.Sprintf("class-%d", int(c))
}

// ParseClass reads a class by name or number (1..5).
func ParseClass(s string) (Class, error) {
	s = strings.TrimSpace(s)
	for c, n := range classNames {
		if s == n || s == fmt.Sprint(int(c)) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("canary: unknown class %q (want one of lost-ack, duplicate, reorder, crash, divergent or 1..5)", s)
}

// Broken deliberately breaks the agent or the tool, to show that the gate
// catches it.
type Broken string

// The broken modes.
const (
	// NotBroken runs the correct protocol.
	NotBroken Broken = ""
	// FreshKey makes the agent mint a new key for every retry.
	FreshKey Broken = "fresh-key"
	// NoLedger makes the tool run the effect without the ledger.
	NoLedger Broken = "no-ledger"
)

// ParseBroken reads a broken mode ("" for none).
func ParseBroken(s string) (Broken, error) {
	switch b := Broken(s); b {
	case NotBroken, FreshKey, NoLedger:
		return b, nil
	}
	return "", fmt.Errorf("canary: unknown broken mode %q (want fresh-key or no-ledger)", s)
}

// Config selects what a run does.
type Config struct {
	// Addrs are the ledger's node URLs.
	Addrs []string
	// Seed drives every fault schedule of the run.
	Seed uint64
	// Classes are the failure classes to run (default: all).
	Classes []Class
	// Episodes is the number of episodes per class.
	Episodes int
	// Concurrency bounds how many episodes run at once (default 32).
	Concurrency int
	// Broken breaks the agent or the tool on purpose.
	Broken Broken
	// Via says what guards the tool: ViaSDK (default), ViaHTTPProxy or
	// ViaMCP.
	Via Via
	// Lease is the lease of a grant whose delivery the plan crashes
	// (default 1 s): how soon the dead tool's key turns in_doubt. Other
	// grants get 10 s, so a slow machine never turns a live holder's key
	// in_doubt (safe, but the replay would differ).
	Lease time.Duration
	// ToolCommand, if set, runs the tool service as a child process
	// started with this argv (plus its own flags; the program must call
	// ToolProcessMain when ToolProcessEnv is set in its environment), and
	// each crash delivery in a fresh process of its own that kills itself
	// with SIGKILL at the crash point. Unset, the tool service runs
	// in-process and a crash drops the connection without reporting.
	ToolCommand []string
	// RunID keeps the keys of different runs against the same cluster
	// apart; it is not part of the event log.
	RunID string
	// Progress, if set, is called after each episode with the number done
	// and the total.
	Progress func(done, total int)
}

// maxAttempts bounds the agent's deliveries of one call.
const maxAttempts = 5

// toolName is the tool every episode calls.
const toolName = "canary.charge"

// Plan is an episode's fault schedule, drawn from its own PCG generator.
type Plan struct {
	// LostAcks is how many responses in a row are dropped (LostAck: 1..3;
	// Divergent: 1).
	LostAcks int
	// Dups is how many extra concurrent copies of the first delivery are
	// made (Duplicate: 1..2).
	Dups int
	// Delay holds the original delivery (Reorder: 5..80 ms).
	Delay time.Duration
	// CrashAfterEffect says the tool crashes after the effect rather than
	// before it (Crash).
	CrashAfterEffect bool
	// Amount is the call's argument; RetryAmount the changed one a
	// divergent retry sends.
	Amount, RetryAmount int
}

// NewPlan draws the fault schedule of (seed, class, episode). It depends on
// nothing else.
func NewPlan(seed uint64, class Class, episode int) Plan {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", int(class), episode)
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	p := Plan{Amount: 1 + rng.IntN(1000)}
	switch class {
	case LostAck:
		p.LostAcks = 1 + rng.IntN(3)
	case Duplicate:
		p.Dups = 1 + rng.IntN(2)
	case Reorder:
		p.Delay = time.Duration(5+rng.IntN(76)) * time.Millisecond
	case Crash:
		p.CrashAfterEffect = rng.IntN(2) == 1
	case Divergent:
		p.LostAcks = 1
		p.RetryAmount = p.Amount + 1 + rng.IntN(100)
	}
	return p
}

func (p Plan) String() string {
	return fmt.Sprintf("lost_acks=%d dups=%d delay=%v crash_after_effect=%t amount=%d retry_amount=%d",
		p.LostAcks, p.Dups, p.Delay, p.CrashAfterEffect, p.Amount, p.RetryAmount)
}

// Violation is one broken property in one episode.
type Violation struct {
	Seed     uint64 `json:"seed"`
	Class    string `json:"class"`
	Episode  int    `json:"episode"`
	Property string `json:"property"` // I1, I2, I4 or divergent-executed
	Detail   string `json:"detail"`
	// Events is the order in which things happened in the episode, as
	// observed (timing-dependent, for the bug report).
	Events []string `json:"events"`
}

// ClassStats counts one class's episodes.
type ClassStats struct {
	Class            string `json:"class"`
	Episodes         int    `json:"episodes"`
	Deliveries       int    `json:"deliveries"`
	AcksLost         int    `json:"acks_lost"`
	Duplicates       int    `json:"duplicates"`
	Crashes          int    `json:"crashes"`
	DivergentRefused int    `json:"divergent_refused"`
	InDoubt          int    `json:"in_doubt"`
	Violations       int    `json:"violations"`
}

// Result is the outcome of one run (one seed).
type Result struct {
	Seed    uint64        `json:"seed"`
	Broken  Broken        `json:"broken,omitempty"`
	Via     Via           `json:"via"`
	Classes []*ClassStats `json:"classes"`
	// Digest is the SHA-256 of Log.
	Digest string `json:"digest"`
	// Log is the canonical event log: one line per episode fact, sorted by
	// (class, episode, line), independent of scheduling.
	Log        []string    `json:"-"`
	Violations []Violation `json:"violations,omitempty"`
	// Counts of violations by property.
	I1, I2, I4, DivergentExecuted int
}

// Passed reports whether the run broke no property.
func (r *Result) Passed() bool {
	return r.I1 == 0 && r.I2 == 0 && r.I4 == 0 && r.DivergentExecuted == 0
}

// runner holds what a run's episodes share.
type runner struct {
	cfg Config
	// cl reads the ledger for the checks.
	cl *client.Client
	// book collects what the proxy, the provider and the agent see.
	book *book
	// agent is the agent's HTTP client; proxy the fault proxy's URL.
	agent *http.Client
	proxy string
	// mcp is the agent's MCP client (ViaMCP).
	mcp *mcp.Client
}

// Run runs cfg.Episodes episodes of each class against the ledger at
// cfg.Addrs and returns the counts, violations and digest. It starts the
// provider, the tool service (in-process or as processes, see
// Config.ToolCommand) and the fault proxy on loopback, and stops them
// before it returns. The error is for a run that could not be carried out,
// not for a broken property.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if len(cfg.Classes) == 0 {
		cfg.Classes = AllClasses
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Second
	}
	if cfg.Via == "" {
		cfg.Via = ViaSDK
	}
	cl, err := newLedgerClient(cfg.Addrs)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var servers sync.WaitGroup
	defer servers.Wait()
	defer cancel() // runs before servers.Wait: the servers stop on it
	serve := func(h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("canary: listen: %w", err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
		servers.Add(2)
		go func() {
			defer servers.Done()
			_ = srv.Serve(ln)
		}()
		go func() {
			defer servers.Done()
			<-runCtx.Done()
			_ = srv.Close()
		}()
		return "http://" + ln.Addr().String(), nil
	}

	b := newBook()
	providerURL, err := serve(newProvider(b))
	if err != nil {
		return nil, err
	}
	px := &proxy{book: b, hc: newHTTPClient(cfg.Concurrency), ctx: runCtx, via: cfg.Via}
	defer px.wg.Wait() // after cancel: held deliveries end at once
	switch {
	case len(cfg.ToolCommand) > 0:
		// In http-proxy mode a tool process is intent-proxy and the plain
		// tool together (in mcp mode the MCP gate and the plain MCP
		// tool): the long-lived one with the grant lease, each crash
		// delivery's with the crash lease, and SIGKILL at the crash point
		// kills the proxy (the gate) holding the claim with the tool.
		start := func(ctx context.Context, lease time.Duration) (*toolProcess, error) {
			return startToolProcess(ctx, cfg.ToolCommand, toolProcessArgs{ledger: cfg.Addrs, provider: providerURL,
				crashLease: cfg.Lease, proxyLease: lease, noLedger: cfg.Broken == NoLedger, via: cfg.Via})
		}
		tp, err := start(runCtx, grantLease)
		if err != nil {
			return nil, err
		}
		defer tp.stop()
		px.tool = tp.url
		px.crashLane = func(ctx context.Context) (string, func(bool) string, error) {
			one, err := start(ctx, cfg.Lease)
			if err != nil {
				return "", nil, err
			}
			return one.url, func(dying bool) string {
				how := ""
				if dying { // else it answered: it is alive, and stops at once
					how = one.reap()
				}
				one.stop()
				return how
			}, nil
		}
	case cfg.Via == ViaHTTPProxy:
		// The plain tool, and intent-proxy in front of it twice: the lane
		// every delivery takes, and the crash lane with the crash lease,
		// where the tool drops the connection at the crash point.
		toolURL, err := serve(NewPlainTool(PlainToolConfig{Provider: providerURL, HTTP: newHTTPClient(cfg.Concurrency)}))
		if err != nil {
			return nil, err
		}
		ledger, err := newLedgerClient(cfg.Addrs)
		if err != nil {
			return nil, err
		}
		for _, lane := range []struct {
			lease time.Duration
			url   *string
		}{{grantLease, &px.tool}, {cfg.Lease, &px.crashTool}} {
			h, err := newProxyLane(ledger, toolURL, lane.lease, cfg.Broken == NoLedger)
			if err != nil {
				return nil, err
			}
			defer func() { // its background releases of claims whose answers were lost
				wctx, wcancel := context.WithTimeout(context.Background(), idem.DefaultReportTimeout)
				defer wcancel()
				_ = h.Wait(wctx)
			}()
			if *lane.url, err = serve(h); err != nil {
				return nil, err
			}
		}
	case cfg.Via == ViaMCP:
		// The MCP gate in front of the plain MCP tool: the lane every
		// delivery takes, and for each crash delivery a fresh lane with
		// the crash lease whose tool closes its server at the crash point
		// (one call dies, as a process would; a shared lane would take
		// every call on its upstream connection with it).
		ledger, err := newLedgerClient(cfg.Addrs)
		if err != nil {
			return nil, err
		}
		tool := PlainToolConfig{Provider: providerURL, HTTP: newHTTPClient(cfg.Concurrency)}
		broken := cfg.Broken == NoLedger
		lane, err := startMCPLane(runCtx, ledger, tool, grantLease, broken, nil)
		if err != nil {
			return nil, err
		}
		defer lane.close()
		if px.tool, err = serve(lane.Handler); err != nil {
			return nil, err
		}
		px.crashLane = func(ctx context.Context) (string, func(bool) string, error) {
			one, err := startMCPLane(ctx, ledger, tool, cfg.Lease, broken, nil)
			if err != nil {
				return "", nil, err
			}
			url, stop, err := serveOne(one.Handler)
			if err != nil {
				one.close()
				return "", nil, err
			}
			return url, func(bool) string {
				stop()
				return one.close()
			}, nil
		}
	default:
		tcfg := ToolConfig{Provider: providerURL, CrashLease: cfg.Lease, HTTP: newHTTPClient(cfg.Concurrency)}
		if cfg.Broken != NoLedger {
			if tcfg.Ledger, err = newLedgerClient(cfg.Addrs); err != nil {
				return nil, err
			}
		}
		if px.tool, err = serve(NewToolService(tcfg)); err != nil {
			return nil, err
		}
	}
	proxyURL, err := serve(px)
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, cl: cl, book: b, agent: newHTTPClient(cfg.Concurrency), proxy: proxyURL,
		mcp: mcp.NewClient(&mcp.Implementation{Name: "canary-agent", Version: "1"}, nil)}

	type job struct {
		class   Class
		episode int
	}
	total := len(cfg.Classes) * cfg.Episodes
	jobs := make(chan job)
	outs := make([]*episode, total)
	var wg sync.WaitGroup
	var pmu sync.Mutex
	done := 0
	for w := 0; w < min(cfg.Concurrency, max(total, 1)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				ci := slices.Index(cfg.Classes, j.class)
				outs[ci*cfg.Episodes+j.episode] = r.episode(runCtx, j.class, j.episode)
				if cfg.Progress != nil {
					pmu.Lock()
					done++
					cfg.Progress(done, total)
					pmu.Unlock()
				}
			}
		}()
	}
	for _, c := range cfg.Classes {
		for e := 0; e < cfg.Episodes; e++ {
			jobs <- job{c, e}
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	res := &Result{Seed: cfg.Seed, Broken: cfg.Broken, Via: cfg.Via}
	stats := map[Class]*ClassStats{}
	for _, c := range cfg.Classes {
		s := &ClassStats{Class: c.String()}
		stats[c] = s
		res.Classes = append(res.Classes, s)
	}
	for _, ep := range outs {
		s := stats[ep.class]
		s.Episodes++
		s.Deliveries += ep.deliveries
		s.AcksLost += ep.acksLost
		s.Duplicates += ep.plan.Dups
		s.Crashes += ep.crashes
		s.DivergentRefused += ep.divergentRefused
		if ep.agent == "in_doubt" {
			s.InDoubt++
		}
		s.Violations += len(ep.violations)
		res.Log = append(res.Log, ep.log...)
		for _, v := range ep.violations {
			switch v.Property {
			case "I1":
				res.I1++
			case "I2":
				res.I2++
			case "I4":
				res.I4++
			default:
				res.DivergentExecuted++
			}
			res.Violations = append(res.Violations, v)
		}
	}
	sum := sha256.Sum256([]byte(strings.Join(res.Log, "\n")))
	res.Digest = hex.EncodeToString(sum[:])
	return res, nil
}

// newHTTPClient is a loopback HTTP client that keeps enough idle
// connections for conns concurrent calls. Its timeout bounds a hung call;
// the faults themselves never wait on it.
func newHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4 * conns
	tr.MaxIdleConnsPerHost = 4 * conns
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// episode is what one episode did.
type episode struct {
	class            Class
	plan             Plan
	deliveries       int
	acksLost         int
	crashes          int
	divergentRefused int
	// agent is what the agent finally reported: success, in_doubt,
	// divergent or gave_up.
	agent      string
	log        []string
	violations []Violation
}

// episode runs one episode: the agent delivers the call through the fault
// proxy until it has an answer, then the properties are checked against
// the provider's ground truth and the ledger.
func (r *runner) episode(ctx context.Context, class Class, n int) *episode {
	seed := r.cfg.Seed
	plan := NewPlan(seed, class, n)
	label := episodeLabel(seed, class, n)
	rec := r.book.get(label)
	key := client.KeyOf("canary", r.cfg.RunID, fmt.Sprint(seed), class.String(), fmt.Sprint(n))
	ep := &episode{class: class, plan: plan, agent: "gave_up"}
	successKey := ""
	rec.add("seed=%d class=%s episode=%d plan: %s", seed, class, n, plan)
	var agent *mcpAgent
	if r.cfg.Via == ViaMCP {
		agent = &mcpAgent{client: r.mcp, endpoint: r.proxy + mcpPath, hc: r.agent}
		defer agent.close()
	}

	for a := 0; a < maxAttempts && ep.agent == "gave_up"; a++ {
		delivery := fmt.Sprintf("a%d", a)
		k, amount := key, plan.Amount
		if r.cfg.Broken == FreshKey && a > 0 {
			k = client.KeyOf(key, "retry", fmt.Sprint(a))
		}
		if class == Divergent && a > 0 {
			amount = plan.RetryAmount
		}
		rec.add("%s: agent sends key=%s amount=%d", delivery, k, amount)
		var o, detail string
		if agent != nil {
			o, detail = agent.call(ctx, label, delivery, ChargeRequest{Key: k, Amount: amount})
		} else {
			o, detail = r.deliver(ctx, label, delivery, ChargeRequest{Key: k, Amount: amount})
		}
		if o == "" {
			rec.add("%s: agent gets no answer (%s); it retries", delivery, detail)
			continue
		}
		rec.add("%s: agent receives %s", delivery, o)
		switch o {
		case "executed", "duplicate":
			ep.agent, successKey = "success", k
		case "in_doubt", "divergent":
			ep.agent = o
		}
		// anything else (in_flight, error, failed): retry the same call
	}
	rec.bg.Wait()
	planned, outcomes, effects := rec.snapshot()
	rec.mu.Lock()
	ep.deliveries, ep.acksLost, ep.crashes = rec.deliveries, rec.acksLost, rec.crashes
	rec.mu.Unlock()
	for _, o := range outcomes {
		if o == "divergent" {
			ep.divergentRefused++
		}
	}
	rec.add("agent reports %s", ep.agent)

	if successKey == "" {
		successKey = key
	}
	switch r.cfg.Via {
	case ViaHTTPProxy:
		successKey = proxyLedgerKey(successKey)
	case ViaMCP:
		successKey = mcpLedgerKey(successKey)
	}
	ledgerState := r.ledgerState(ctx, successKey)
	rec.add("ledger shows %s; the provider has %d effect(s)", ledgerState, len(effects))

	violate := func(prop, detail string) {
		ep.violations = append(ep.violations, Violation{Seed: seed, Class: class.String(), Episode: n,
			Property: prop, Detail: detail, Events: rec.eventList()})
	}
	if len(effects) > 1 {
		var ds []string
		for _, e := range effects {
			ds = append(ds, e.delivery)
		}
		sort.Strings(ds)
		violate("I1", fmt.Sprintf("%d real effects for one logical effect (deliveries %s)", len(effects), strings.Join(ds, ",")))
	}
	if len(effects) == 0 && ep.agent != "in_doubt" && ep.agent != "divergent" {
		violate("I2", fmt.Sprintf("no effect ran and the agent reported %s", ep.agent))
	}
	if ep.agent == "success" && ledgerState != "executed" {
		violate("I4", fmt.Sprintf("the agent reported success but the ledger shows %s", ledgerState))
	}
	if class == Divergent {
		for _, e := range effects {
			if e.amount == plan.RetryAmount {
				violate("divergent-executed", fmt.Sprintf("the divergent retry (amount %d) ran in %s", e.amount, e.delivery))
			}
		}
	}

	// The canonical log: only facts that do not depend on scheduling.
	verdict := "ok"
	if len(ep.violations) > 0 {
		var ps []string
		for _, v := range ep.violations {
			ps = append(ps, v.Property)
		}
		verdict = "VIOLATION " + strings.Join(ps, ",")
	}
	prefix := fmt.Sprintf("%s e%04d", class, n)
	ep.log = append(ep.log, fmt.Sprintf("%s 0 plan %s", prefix, plan))
	for i, p := range planned {
		ep.log = append(ep.log, fmt.Sprintf("%s 1.%d %s", prefix, i, p))
	}
	ep.log = append(ep.log,
		fmt.Sprintf("%s 2 outcomes %s", prefix, strings.Join(outcomes, ",")),
		fmt.Sprintf("%s 3 effects=%d agent=%s ledger=%s verdict=%s", prefix, len(effects), ep.agent, ledgerState, verdict))
	return ep
}

// deliver sends one delivery of the agent's call through the proxy and
// returns the tool's outcome, or "" and why when the agent got no answer
// (a dropped connection, a gateway error).
//
// Through intent-proxy (ViaHTTPProxy) the call is what an agent sends a
// plain API: the charge's arguments as the body and the episode's key as
// the Idempotency-Key header.
func (r *runner) deliver(ctx context.Context, label, delivery string, call ChargeRequest) (outcome, detail string) {
	body, _ := json.Marshal(call)
	if r.cfg.Via == ViaHTTPProxy {
		body, _ = json.Marshal(plainCharge{Amount: call.Amount})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.proxy+"/charge", bytes.NewReader(body))
	if err != nil {
		return "", err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderEpisode, label)
	req.Header.Set(HeaderDelivery, delivery)
	if r.cfg.Via == ViaHTTPProxy {
		req.Header.Set(idem.HeaderIdempotencyKey, idempotencyKey(call.Key))
	}
	deliverOnce(req)
	resp, err := r.agent.Do(req)
	if err != nil {
		return "", "connection closed"
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxToolBody))
	if resp.StatusCode == http.StatusGatewayTimeout || resp.StatusCode == http.StatusBadGateway && !json.Valid(raw) {
		return "", resp.Status
	}
	o, _ := answerOutcome(r.cfg.Via, resp.StatusCode, resp.Header, raw)
	switch {
	case err != nil || o == "":
		return "", "unreadable answer " + resp.Status
	case o == outcomeNoAnswer:
		return "", "intent-proxy: the tool gave no answer"
	}
	return o, ""
}

// ledgerReadWait bounds how long an episode's check waits for the ledger
// to answer its read: a leader election on a loaded machine makes reads
// fail for a moment, and a check read in that moment would make the run's
// verdict (and digest) depend on timing.
const ledgerReadWait = 30 * time.Second

// ledgerState reads the key linearizably and folds the state to what the
// properties need: executed (executed or committed), in_doubt (in_doubt, or
// declared with its lease passed), absent, or the state's name. A read that
// fails is tried again until ledgerReadWait passes; only then is the state
// "unreadable".
func (r *runner) ledgerState(ctx context.Context, key string) string {
	rctx, cancel := context.WithTimeout(ctx, ledgerReadWait)
	defer cancel()
	in, err := r.cl.Get(rctx, key, client.GetOptions{})
	for backoff := 50 * time.Millisecond; err != nil && !errors.Is(err, client.ErrNotFound); backoff = min(2*backoff, time.Second) {
		t := time.NewTimer(backoff)
		select {
		case <-rctx.Done():
			t.Stop()
			return "unreadable"
		case <-t.C:
		}
		in, err = r.cl.Get(rctx, key, client.GetOptions{})
	}
	if err != nil {
		return "absent"
	}
	switch in.State {
	case client.StateExecuted, client.StateCommitted:
		return "executed"
	case client.StateInDoubt:
		return "in_doubt"
	case client.StateDeclared:
		if !in.LeaseDeadline.IsZero() && time.Now().After(in.LeaseDeadline) {
			return "in_doubt"
		}
	}
	return string(in.State)
}
