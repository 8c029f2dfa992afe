package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// clusterCtx bounds a real-cluster test: a hang guard, not a performance
// threshold.
func clusterCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rotated returns urls starting at index i, so callers spread their first
// attempts over every node.
func rotated(urls []string, i int) []string {
	i %= len(urls)
	return append(append([]string(nil), urls[i:]...), urls[:i]...)
}

// contendedRun is callersPerKey concurrent Do calls on each of keys keys,
// every call from its own client (half of them without discovery, so
// followers forward their writes). Every winner's effect blocks on release
// until the test lets it go; started receives each effect's key as it
// begins.
type contendedRun struct {
	runs    *counter
	started chan string
	release chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	results map[string][]*client.EffectResult
	errs    []error
}

func startContended(ctx context.Context, t *testing.T, urls []string, keys, callersPerKey int) *contendedRun {
	r := &contendedRun{runs: newCounter(), started: make(chan string, keys*callersPerKey), release: make(chan struct{}),
		results: map[string][]*client.EffectResult{}}
	fn := func(ctx context.Context, g *client.Grant) (any, error) {
		n := r.runs.inc(g.Key)
		r.started <- g.Key
		select {
		case <-r.release:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return map[string]any{"charge_id": fmt.Sprintf("ch_%s_%d", g.Key, n), "fencing_token": g.FencingToken}, nil
	}
	i := 0
	for k := range keys {
		for range callersPerKey {
			c := newClient(t, rotated(urls, i), client.WithDiscovery(i%2 == 0))
			i++
			r.wg.Go(func() {
				res, err := c.Do(ctx, chargeEffect(fmt.Sprintf("order-%d", k)), fn)
				r.mu.Lock()
				defer r.mu.Unlock()
				if err != nil {
					r.errs = append(r.errs, err)
					return
				}
				r.results[res.Intent.Key] = append(r.results[res.Intent.Key], res)
			})
		}
	}
	return r
}

// waitStarted waits until n effects have begun.
func (r *contendedRun) waitStarted(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.started:
		case <-ctx.Done():
			t.Fatalf("waiting for %d effects to start: %v", n, ctx.Err())
		}
	}
}

// check asserts every key's effect ran exactly once, every call returned
// its result (executed once, duplicates otherwise) and the ledger holds it.
func (r *contendedRun) check(ctx context.Context, t *testing.T, c *client.Client, keys, callersPerKey int) {
	t.Helper()
	r.wg.Wait()
	for _, err := range r.errs {
		t.Errorf("Do: %v", err)
	}
	for k := range keys {
		key := chargeEffect(fmt.Sprintf("order-%d", k)).Key
		if n := r.runs.get(key); n != 1 {
			t.Errorf("%s: effect ran %d times, want once", key, n)
		}
		results := r.results[key]
		statuses := map[client.EffectStatus]int{}
		for _, res := range results {
			statuses[res.Status]++
			if string(res.Result) != string(results[0].Result) {
				t.Errorf("%s: results differ: %s vs %s", key, res.Result, results[0].Result)
			}
		}
		if len(results) != callersPerKey || statuses[client.EffectExecuted] != 1 {
			t.Errorf("%s: %d results, statuses %v", key, len(results), statuses)
		}
		in, err := c.Get(ctx, key, client.GetOptions{})
		if err != nil || (in.State != client.StateCommitted && in.State != client.StateExecuted) ||
			len(results) == 0 || string(in.Result) != string(results[0].Result) {
			t.Errorf("%s in the ledger: %+v, %v", key, in, err)
		}
	}
}

// startCluster starts a 3-node cluster for a test that runs in parallel
// with the other real-cluster tests (each cluster on its own ports and data
// directory); under -short (the unit tier) the test is skipped.
func startCluster(t *testing.T) *clienttest.Cluster {
	t.Helper()
	t.Parallel()
	return clienttest.StartCluster(t, 3)
}

func TestDoOnARealCluster(t *testing.T) {
	cl := startCluster(t)
	ctx := clusterCtx(t)
	const keys, callersPerKey = 5, 4
	r := startContended(ctx, t, cl.URLs(), keys, callersPerKey)
	// Every key's winner is running; the other callers are waiting on the
	// in-flight key.
	r.waitStarted(ctx, t, keys)
	close(r.release)
	c := newClient(t, cl.URLs())
	r.check(ctx, t, c, keys, callersPerKey)

	leader, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Discover(ctx); err != nil || got != leader.URL {
		t.Errorf("discovered leader %q (%v), want %s", got, err, leader.URL)
	}
}

// TestDoThroughALeaderCrash is the SDK's contract through a failover: Do
// calls whose effects run while the leader crashes, callers waiting on
// their keys, and more deliveries of the same calls during the election,
// all retrying with the same key, run each effect exactly once, record its
// result, and answer every caller with it; discovery moves off the dead
// leader. That a leader crash loses no acknowledged write is the cluster's
// own test (cluster and cmd/intentd), not this one's.
func TestDoThroughALeaderCrash(t *testing.T) {
	cl := startCluster(t)
	ctx := clusterCtx(t)
	const keys, callersPerKey = 5, 4
	r := startContended(ctx, t, cl.URLs(), keys, callersPerKey)
	r.waitStarted(ctx, t, keys)

	// Crash the leader while every key's effect runs and the other callers
	// poll; then let the effects finish: their reports, and the waiting
	// callers' claims, go through the election.
	leader, err := cl.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	close(r.release)

	// More deliveries of the same calls arrive during the failover.
	late := &contendedRun{runs: r.runs, results: map[string][]*client.EffectResult{}}
	for k := range keys {
		c := newClient(t, rotated(cl.URLs(), k))
		late.wg.Go(func() {
			res, err := c.Do(ctx, chargeEffect(fmt.Sprintf("order-%d", k)), func(ctx context.Context, g *client.Grant) (any, error) {
				r.runs.inc(g.Key)
				return nil, nil
			})
			late.mu.Lock()
			defer late.mu.Unlock()
			if err != nil {
				late.errs = append(late.errs, err)
			} else if res.Status != client.EffectDuplicate {
				late.errs = append(late.errs, fmt.Errorf("late delivery of %s: %s, want duplicate", res.Intent.Key, res.Status))
			}
		})
	}

	late.wg.Wait()
	for _, err := range late.errs {
		t.Error(err)
	}
	c := newClient(t, cl.URLs())
	r.check(ctx, t, c, keys, callersPerKey)
	if _, err := cl.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Discover(ctx); err != nil || got == leader.URL {
		t.Errorf("discovered leader %q (%v) after the crash of %s", got, err, leader.URL)
	}
}
