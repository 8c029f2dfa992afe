package workload

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

// Config shapes a run's client load.
type Config struct {
	// Nodes are the API base URLs (http://host:port or https://...)
	// clients spread over.
	Nodes []string
	// TLS is the clients' TLS configuration for https nodes (nil: the
	// system's roots).
	TLS *tls.Config
	// Clients is the number of concurrent client processes.
	Clients int
	// Claimants is how many clients race for each key (3..5 in W1).
	Claimants int
	// Rate bounds the total operations per second (0: unbounded).
	Rate float64
	// DivergentFraction of claims send another payload variant.
	DivergentFraction float64
	// ReadFraction of operations are linearizable reads of a recent key.
	ReadFraction float64
	// RetryFraction of iterations first claim one of the client's recent
	// keys again, with its payload, as a new owner: an agent that lost its
	// tool history retries a call that already ran (mostly a duplicate).
	RetryFraction float64
	// Timeout bounds each request (its outcome is unknown past it).
	Timeout time.Duration
	// Seed makes each client's choices (nodes, variants, reads) repeatable.
	Seed uint64
	// Prefix namespaces the keys of this run.
	Prefix string
	// LeaseMS is the claims' lease; longer than the run so leases never
	// expire mid-run.
	LeaseMS int64
}

// Contended is workload W1: groups of Claimants clients walk the same key
// sequence and race to claim each key; a winner performs the effect in the
// world log once and completes it. Unknown outcomes are retried with the
// same owner (safe: every command is idempotent).
type Contended struct {
	cfg  Config
	rec  *history.Recorder
	call *caller

	mu   sync.Mutex
	keys map[string]bool
}

// NewContended returns W1 over rec.
func NewContended(cfg Config, rec *history.Recorder) *Contended {
	if cfg.Claimants < 1 {
		cfg.Claimants = 3
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.LeaseMS <= 0 {
		cfg.LeaseMS = 3_600_000
	}
	return &Contended{cfg: cfg, rec: rec, call: newCaller(cfg.Timeout, cfg.TLS), keys: map[string]bool{}}
}

// Keys returns every key the workload touched.
func (w *Contended) Keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.keys))
	for k := range w.keys {
		out = append(out, k)
	}
	return out
}

// Run drives the clients until ctx ends.
func (w *Contended) Run(ctx context.Context) {
	var ticks <-chan time.Time
	if w.cfg.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / w.cfg.Rate))
		defer t.Stop()
		ticks = t.C
	}
	var wg sync.WaitGroup
	for p := 0; p < w.cfg.Clients; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			w.client(ctx, p, ticks)
		}(p)
	}
	wg.Wait()
}

// pace waits for the shared rate limiter; false when ctx ended.
func pace(ctx context.Context, ticks <-chan time.Time) bool {
	if ticks == nil {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-ticks:
		return true
	}
}

func (w *Contended) client(ctx context.Context, p int, ticks <-chan time.Time) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(p)+1))
	group := p / w.cfg.Claimants
	var recent []string
	variants := map[string]string{} // of the keys in recent
	for i := 0; ctx.Err() == nil; i++ {
		if len(recent) > 0 && rng.Float64() < w.cfg.ReadFraction {
			if !pace(ctx, ticks) {
				return
			}
			w.read(ctx, p, recent[rng.IntN(len(recent))], w.cfg.Nodes[rng.IntN(len(w.cfg.Nodes))])
		}
		if len(recent) > 0 && w.cfg.RetryFraction > 0 && rng.Float64() < w.cfg.RetryFraction {
			old := recent[rng.IntN(len(recent))]
			w.claimAndExecute(ctx, p, rng, old, fmt.Sprintf("c%d/%d/retry", p, i), variants[old], ticks)
		}
		key := fmt.Sprintf("%s:g%d:%d", w.cfg.Prefix, group, i)
		w.mu.Lock()
		w.keys[key] = true
		w.mu.Unlock()
		variant := "a"
		if rng.Float64() < w.cfg.DivergentFraction {
			variant = "b"
		}
		w.claimAndExecute(ctx, p, rng, key, fmt.Sprintf("c%d/%d", p, i), variant, ticks)
		recent = append(recent, key)
		variants[key] = variant
		if len(recent) > 16 {
			delete(variants, recent[0])
			recent = recent[1:]
		}
	}
}

// claimAndExecute claims key as owner, retrying unknown and failed
// outcomes with the same owner; when granted it performs the effect once
// and completes it.
func (w *Contended) claimAndExecute(ctx context.Context, p int, rng *rand.Rand, key, owner, variant string, ticks <-chan time.Time) {
	body := map[string]any{"key": key, "tool": "jepsen.effect", "owner": owner, "lease_ms": w.cfg.LeaseMS,
		"payload": map[string]any{"key": key, "variant": variant}}
	for attempt := 0; attempt < 20; attempt++ {
		if !pace(ctx, ticks) {
			return
		}
		node := w.cfg.Nodes[rng.IntN(len(w.cfg.Nodes))]
		id := w.rec.Invoke(history.Op{Process: p, Node: node, Type: history.OpClaim, Key: key, Owner: owner, Payload: variant})
		a := w.call.do(ctx, http.MethodPost, node+"/v1/intents", body)
		w.rec.Complete(id, a.fill)
		if a.outcome != history.OutcomeOK {
			backoff(ctx, attempt)
			continue
		}
		if a.status != "granted" {
			return // duplicate, in_flight, divergent, in_doubt: definite, nothing to run
		}
		w.rec.Effect(history.Effect{Key: key, Owner: owner, FencingToken: a.fence, Process: p})
		w.complete(ctx, p, rng, key, owner, a.fence, ticks)
		return
	}
}

func (w *Contended) complete(ctx context.Context, p int, rng *rand.Rand, key, owner string, fence uint64, ticks <-chan time.Time) {
	body := map[string]any{"owner": owner, "fencing_token": fence, "outcome": "executed",
		"result": map[string]any{"effect": key}}
	for attempt := 0; attempt < 20; attempt++ {
		if !pace(ctx, ticks) {
			return
		}
		node := w.cfg.Nodes[rng.IntN(len(w.cfg.Nodes))]
		id := w.rec.Invoke(history.Op{Process: p, Node: node, Type: history.OpComplete, Key: key, Owner: owner, FencingToken: fence})
		a := w.call.do(ctx, http.MethodPost, node+"/v1/intents/"+url.PathEscape(key)+"/complete", body)
		w.rec.Complete(id, a.fill)
		if a.outcome == history.OutcomeOK {
			return
		}
		backoff(ctx, attempt)
	}
}

// read records one linearizable read of key through node.
func (w *Contended) read(ctx context.Context, p int, key, node string) history.Outcome {
	id := w.rec.Invoke(history.Op{Process: p, Node: node, Type: history.OpRead, Key: key})
	a := w.call.do(ctx, http.MethodGet, node+"/v1/intents/"+url.PathEscape(key), nil)
	w.rec.Complete(id, a.fill)
	return a.outcome
}

// ReadBurst reads recent keys through node for d, as fast as answers come
// (workload W3: immediate reads through a node that is restarting).
// Reads the node cannot serve yet are recorded as failures.
func (w *Contended) ReadBurst(ctx context.Context, p int, node string, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	keys := w.Keys()
	if len(keys) == 0 {
		return
	}
	rng := rand.New(rand.NewPCG(w.cfg.Seed, uint64(p)))
	for ctx.Err() == nil {
		if w.read(ctx, p, keys[rng.IntN(len(keys))], node) != history.OutcomeOK {
			backoff(ctx, 0)
		}
	}
}

// finalReaders is how many keys FinalReads reads at once: over a delayed
// (WAN) network each linearizable read costs round trips, and one at a
// time would not get through a few thousand keys in the heal budget.
const finalReaders = 16

// finalAttempts bounds the reads of one key in FinalReads.
const finalAttempts = 50

// FinalReads reads every key the run touched (workload W2) through the
// nodes in turn, retrying until each read is definite or ctx ends;
// finalReaders keys at a time. Process numbers start at firstProcess (and
// use finalReaders·finalAttempts of them) so they never collide with run
// clients, and no two concurrent reads share one.
func (w *Contended) FinalReads(ctx context.Context, firstProcess int) (unread int) {
	keys := w.Keys()
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := 0
	for r := range finalReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(keys) {
					return
				}
				ok := false
				for attempt := 0; attempt < finalAttempts && ctx.Err() == nil; attempt++ {
					node := w.cfg.Nodes[(i+attempt)%len(w.cfg.Nodes)]
					if w.read(ctx, firstProcess+r*finalAttempts+attempt, keys[i], node) == history.OutcomeOK {
						ok = true
						break
					}
					backoff(ctx, attempt)
				}
				if !ok {
					mu.Lock()
					unread++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return unread
}

// backoff waits a little longer after each failed attempt (bounded).
func backoff(ctx context.Context, attempt int) {
	d := time.Duration(min(attempt+1, 10)) * 50 * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
