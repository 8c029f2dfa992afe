// Package canary is the canary gate of intentd: it stands between an agent
// loop and a tool service, injects faults deterministically from a seed and
// checks the ledger's invariants on every episode.
//
// An episode is one logical effect (its key derived from the seed, the
// failure class and the episode number) that a simulated agent delivers to
// a tool service through a fault-injecting layer. The tool service guards
// the effect with the real ledger cluster through client.Do and appends it
// to a ground-truth effect log. After the episode the runner checks:
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
// ids), so the same seed gives a byte-identical log and verdict, compared
// by SHA-256 digest.
package canary

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/intentledger/intentd/client"
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
	// Lease is the grant's lease (default 300 ms): how soon a crashed
	// tool's key turns in_doubt.
	Lease time.Duration
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

// effect is one real side effect in the ground-truth log.
type effect struct {
	delivery string
	amount   int
}

// runner holds what a run's episodes share.
type runner struct {
	cfg Config
	cl  *client.Client
	mu  sync.Mutex
	// effects is the ground truth: every real effect, by logical effect.
	effects map[string][]effect
}

// Run runs cfg.Episodes episodes of each class against the ledger at
// cfg.Addrs and returns the counts, violations and digest. The error is
// for a run that could not be carried out, not for a broken property.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if len(cfg.Classes) == 0 {
		cfg.Classes = AllClasses
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 300 * time.Millisecond
	}
	cl, err := client.New(cfg.Addrs,
		client.WithBackoff(5*time.Millisecond, 50*time.Millisecond),
		client.WithMaxWait(30*time.Second), client.WithAutoCommit(false))
	if err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, cl: cl, effects: map[string][]effect{}}

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
				outs[ci*cfg.Episodes+j.episode] = r.episode(ctx, j.class, j.episode)
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

	res := &Result{Seed: cfg.Seed, Broken: cfg.Broken}
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

// call is one delivery of the agent's tool call.
type call struct {
	label    string // the logical effect, for the ground truth only
	delivery string // "a0", "a1", "a0.dup1" ...
	key      string
	amount   int
	crash    bool // the tool crashes during this delivery
	// crashAfter says the crash comes after the effect, not before.
	crashAfter bool
}

// trace records the events of one episode in the order they happen.
type trace struct {
	mu     sync.Mutex
	events []string
}

func (t *trace) add(format string, args ...any) {
	t.mu.Lock()
	t.events = append(t.events, fmt.Sprintf(format, args...))
	t.mu.Unlock()
}

func (t *trace) list() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.events...)
}

// episode runs one episode: the agent loop delivers the call through the
// fault layer until it has an answer, then the properties are checked.
func (r *runner) episode(ctx context.Context, class Class, n int) *episode {
	seed := r.cfg.Seed
	plan := NewPlan(seed, class, n)
	label := fmt.Sprintf("s%d/%s/e%04d", seed, class, n)
	key := client.KeyOf("canary", r.cfg.RunID, fmt.Sprint(seed), class.String(), fmt.Sprint(n))
	ep := &episode{class: class, plan: plan, agent: "gave_up"}
	tr := &trace{}
	var outcomes []string
	var omu sync.Mutex
	outcome := func(o string) {
		omu.Lock()
		outcomes = append(outcomes, o)
		omu.Unlock()
	}
	var bg sync.WaitGroup // deliveries the agent no longer waits for
	successKey := ""
	var planned []string // per-delivery planned faults, canonical
	tr.add("seed=%d class=%s episode=%d plan: %s", seed, class, n, plan)

	for a := 0; a < maxAttempts; a++ {
		c := call{label: label, delivery: fmt.Sprintf("a%d", a), key: key, amount: plan.Amount}
		if r.cfg.Broken == FreshKey && a > 0 {
			c.key = client.KeyOf(key, "retry", fmt.Sprint(a))
		}
		if class == Divergent && a > 0 {
			c.amount = plan.RetryAmount
		}
		ep.deliveries++
		tr.add("%s: agent sends amount=%d", c.delivery, c.amount)
		var o string
		switch {
		case class == Duplicate && a == 0:
			planned = append(planned, fmt.Sprintf("%s deliver +%d concurrent copies", c.delivery, plan.Dups))
			for d := 1; d <= plan.Dups; d++ {
				dup := c
				dup.delivery = fmt.Sprintf("%s.dup%d", c.delivery, d)
				ep.deliveries++
				bg.Add(1)
				go func() {
					defer bg.Done()
					outcome(r.serve(ctx, dup, tr))
				}()
			}
			o = r.serve(ctx, c, tr)
			outcome(o)
		case class == Reorder && a == 0:
			planned = append(planned, fmt.Sprintf("%s held %v, agent times out", c.delivery, plan.Delay))
			tr.add("%s: held for %v; agent times out", c.delivery, plan.Delay)
			bg.Add(1)
			go func() {
				defer bg.Done()
				t := time.NewTimer(plan.Delay)
				defer t.Stop()
				select {
				case <-t.C: // the seeded delay is the fault itself
				case <-ctx.Done():
				}
				outcome(r.serve(ctx, c, tr))
			}()
			continue
		case class == Crash && a == 0:
			planned = append(planned, fmt.Sprintf("%s tool crashes after_effect=%t", c.delivery, plan.CrashAfterEffect))
			c.crash, c.crashAfter = true, plan.CrashAfterEffect
			ep.crashes++
			o = r.serve(ctx, c, tr)
			outcome(o)
			tr.add("%s: connection reset; agent retries", c.delivery)
			continue
		default:
			planned = append(planned, fmt.Sprintf("%s deliver", c.delivery))
			o = r.serve(ctx, c, tr)
			outcome(o)
		}
		if a < plan.LostAcks {
			ep.acksLost++
			planned[len(planned)-1] += ", ack lost"
			tr.add("%s: ack lost (%s); agent retries", c.delivery, o)
			continue
		}
		tr.add("%s: agent receives %s", c.delivery, o)
		switch o {
		case "executed", "duplicate":
			ep.agent, successKey = "success", c.key
		case "in_doubt":
			ep.agent = "in_doubt"
		case "divergent":
			ep.agent = "divergent"
		default:
			continue // no definite answer: retry the same call
		}
		break
	}
	bg.Wait()
	for _, o := range outcomes {
		if o == "divergent" {
			ep.divergentRefused++
		}
	}
	tr.add("agent reports %s", ep.agent)

	// Ground truth and ledger.
	r.mu.Lock()
	effects := append([]effect(nil), r.effects[label]...)
	r.mu.Unlock()
	ledgerState := "-"
	if successKey != "" {
		ledgerState = r.ledgerState(ctx, successKey)
	} else {
		ledgerState = r.ledgerState(ctx, key)
	}
	tr.add("ledger shows %s; effect log has %d effect(s)", ledgerState, len(effects))

	violate := func(prop, detail string) {
		ep.violations = append(ep.violations, Violation{Seed: seed, Class: class.String(), Episode: n,
			Property: prop, Detail: detail, Events: tr.list()})
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
	sort.Strings(outcomes)
	verdict := "ok"
	if len(ep.violations) > 0 {
		var ps []string
		for _, v := range ep.violations {
			ps = append(ps, v.Property)
		}
		verdict = "VIOLATION " + strings.Join(ps, ",")
	}
	prefix := fmt.Sprintf("%s %s", class, fmt.Sprintf("e%04d", n))
	ep.log = append(ep.log, fmt.Sprintf("%s 0 plan %s", prefix, plan))
	for i, p := range planned {
		ep.log = append(ep.log, fmt.Sprintf("%s 1.%d %s", prefix, i, p))
	}
	ep.log = append(ep.log,
		fmt.Sprintf("%s 2 outcomes %s", prefix, strings.Join(outcomes, ",")),
		fmt.Sprintf("%s 3 effects=%d agent=%s ledger=%s verdict=%s", prefix, len(effects), ep.agent, ledgerState, verdict))
	return ep
}

// serve is the tool service answering one delivery: it guards the effect
// with the ledger (unless broken), performs it by appending it to the
// effect log, and returns what it would answer: executed, duplicate,
// divergent, in_doubt, crashed or an error code.
func (r *runner) serve(ctx context.Context, c call, tr *trace) string {
	perform := func() {
		r.mu.Lock()
		r.effects[c.label] = append(r.effects[c.label], effect{delivery: c.delivery, amount: c.amount})
		r.mu.Unlock()
		tr.add("%s: tool performs the effect (amount=%d)", c.delivery, c.amount)
	}
	if r.cfg.Broken == NoLedger {
		if c.crash && !c.crashAfter {
			tr.add("%s: tool crashes before the effect", c.delivery)
			return "crashed"
		}
		perform()
		if c.crash {
			tr.add("%s: tool crashes after the effect", c.delivery)
			return "crashed"
		}
		return "executed"
	}
	payload, _ := json.Marshal(map[string]int{"amount": c.amount})
	res, err := r.cl.Do(ctx, client.Effect{Key: c.key, Tool: toolName, Payload: json.RawMessage(payload), Lease: r.cfg.Lease},
		func(context.Context, *client.Grant) (any, error) {
			if c.crash && !c.crashAfter {
				tr.add("%s: tool crashes before the effect", c.delivery)
				return nil, fmt.Errorf("crashed: %w", client.ErrEffectUnknown)
			}
			perform()
			if c.crash {
				// The process dies here: nothing is reported, the lease
				// runs out and the key turns in_doubt.
				tr.add("%s: tool crashes after the effect", c.delivery)
				return nil, fmt.Errorf("crashed: %w", client.ErrEffectUnknown)
			}
			return map[string]string{"txn": c.label + "/" + c.delivery}, nil
		})
	var o string
	switch {
	case c.crash && err != nil && errors.Is(err, client.ErrEffectUnknown):
		o = "crashed"
	case err == nil && res != nil:
		o = string(res.Status)
	case errors.Is(err, client.ErrDivergent):
		o = "divergent"
	case errors.Is(err, client.ErrInDoubt):
		o = "in_doubt"
	case errors.Is(err, client.ErrInFlight):
		o = "in_flight"
	default:
		o = "error"
		tr.add("%s: error %v", c.delivery, err)
	}
	tr.add("%s: tool answers %s", c.delivery, o)
	return o
}

// ledgerState reads the key linearizably and folds the state to what the
// properties need: executed (executed or committed), in_doubt (in_doubt, or
// declared with its lease passed), absent, or the state's name.
func (r *runner) ledgerState(ctx context.Context, key string) string {
	in, err := r.cl.Get(ctx, key, client.GetOptions{})
	switch {
	case errors.Is(err, client.ErrNotFound):
		return "absent"
	case err != nil:
		return "unreadable"
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
