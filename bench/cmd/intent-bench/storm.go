package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The storm mode (--storm 50,200,1000): one key held for --storm-hold by a
// holder that never reports, hammered by N retriers of other owners with
// the same payload, beside a steady open-loop workload of unrelated claims
// (each completed) at --steady-rate per second. Each level runs once per
// --storm-kinds: naive retriers claim again as soon as they are refused,
// polite ones wait the answer's retry_after_ms first, divergent ones claim
// again at once with a payload of their own (refused as divergent, 422).
// A level with no storm first gives the
// baseline. For each it reports the Raft entries per second the storm
// added (the leader's commit index before and after, less two entries per
// steady op), the leader's CPU (process_cpu_seconds_total from its
// /metrics) and the steady claims' p50 and p99. Every level is bounded by
// --storm-hold.

// stormResult is one level's figures.
type stormResult struct {
	retriers      int
	kind          string
	refused       int64
	entriesPerSec float64 // all entries
	stormPerSec   float64 // entries less the steady workload's
	cpu           float64 // leader CPU seconds per second
	steadyOps     int
	p50, p99      time.Duration
	errors        int64
}

func runStorm(ctx context.Context, cfg config, hc *http.Client, leader string, stdout io.Writer) error {
	fmt.Fprintf(stdout, "intent-bench storm: hold=%s steady=%d/s leader=%s\n\n", cfg.stormHold, cfg.steadyRate, leader)
	fmt.Fprintln(stdout, "| retriers | kind | refused claims/s | Raft entries/s (all) | entries/s from the storm | leader CPU (cores) | steady claims | steady p50 ms | steady p99 ms | errors |")
	fmt.Fprintln(stdout, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	levels := append([]int{0}, cfg.storm...)
	for _, n := range levels {
		kinds := cfg.stormKinds
		if n == 0 {
			kinds = []string{"none"}
		}
		for _, kind := range kinds {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r, err := stormLevel(ctx, cfg, hc, leader, fmt.Sprintf("%s-%d-%s", runID, n, kind), n, kind)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "| %d | %s | %.0f | %.0f | %.1f | %.2f | %d | %.2f | %.2f | %d |\n", r.retriers, r.kind,
				float64(r.refused)/cfg.stormHold.Seconds(), r.entriesPerSec, r.stormPerSec, r.cpu, r.steadyOps, ms(r.p50), ms(r.p99), r.errors)
		}
	}
	return nil
}

func stormLevel(ctx context.Context, cfg config, hc *http.Client, leader, prefix string, n int, kind string) (stormResult, error) {
	r := stormResult{retriers: n, kind: kind}
	key := "storm:" + prefix
	payload := map[string]string{"d": "storm"}
	// The holder: a lease past the level's end, never reported.
	body, _ := json.Marshal(map[string]any{"key": key, "tool": "bench.tool", "owner": "holder", "payload": payload,
		"lease_ms": (cfg.stormHold + 20*time.Second).Milliseconds()})
	if code, resp, err := postJSON(ctx, hc, cfg.apiKey, leader+"/v1/intents", body); err != nil || code != http.StatusCreated {
		return r, fmt.Errorf("storm: holding %s: HTTP %d %s %v", key, code, resp, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.stormHold)
	defer cancel()
	commit0, err := commitIndex(ctx, hc, cfg.apiKey, leader)
	if err != nil {
		return r, err
	}
	cpu0, err := leaderCPU(ctx, hc, leader)
	if err != nil {
		return r, err
	}
	start := time.Now()
	var (
		wg      sync.WaitGroup
		refused atomic.Int64
		errs    atomic.Int64
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, want := any(payload), http.StatusConflict
			if kind == "divergent" {
				mine, want = map[string]any{"d": "storm", "retrier": i}, http.StatusUnprocessableEntity
			}
			body, _ := json.Marshal(map[string]any{"key": key, "tool": "bench.tool", "owner": fmt.Sprintf("retrier-%d", i), "payload": mine})
			for ctx.Err() == nil {
				code, resp, err := postJSON(ctx, hc, cfg.apiKey, leader+"/v1/intents", body)
				if ctx.Err() != nil {
					return
				}
				if err != nil || code != want {
					errs.Add(1)
					continue
				}
				refused.Add(1)
				if kind == "polite" {
					var p struct {
						RetryAfterMS int64 `json:"retry_after_ms"`
					}
					_ = json.Unmarshal(resp, &p)
					select {
					case <-ctx.Done():
					case <-time.After(time.Duration(max(p.RetryAfterMS, 1)) * time.Millisecond):
					}
				}
			}
		}()
	}
	// The steady workload: open loop, one claim (and its completion) per
	// tick; the claim's latency is what is measured.
	var (
		mu        sync.Mutex
		latencies []time.Duration
		steady    atomic.Int64
	)
	tick := time.NewTicker(time.Second / time.Duration(cfg.steadyRate))
	seq := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		seq++
		wg.Add(1)
		go func(seq int) {
			defer wg.Done()
			k := fmt.Sprintf("steady:%s:%d", prefix, seq)
			owner := "steady-" + strconv.Itoa(seq)
			body, _ := json.Marshal(map[string]any{"key": k, "tool": "bench.tool", "owner": owner, "payload": map[string]int{"n": seq}})
			t0 := time.Now()
			code, resp, err := postJSON(ctx, hc, cfg.apiKey, leader+"/v1/intents", body)
			lat := time.Since(t0)
			if ctx.Err() != nil {
				return
			}
			if err != nil || code != http.StatusCreated {
				errs.Add(1)
				return
			}
			mu.Lock()
			latencies = append(latencies, lat)
			mu.Unlock()
			var g struct {
				FencingToken uint64 `json:"fencing_token"`
			}
			_ = json.Unmarshal(resp, &g)
			body, _ = json.Marshal(map[string]any{"owner": owner, "fencing_token": g.FencingToken, "outcome": "executed"})
			if code, _, err := postJSON(ctx, hc, cfg.apiKey, leader+"/v1/intents/"+k+"/complete", body); err == nil && code == http.StatusOK {
				steady.Add(1)
			}
		}(seq)
	}
	tick.Stop()
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	// Measured after the level: a fresh context, its own bound.
	after, cancelAfter := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelAfter()
	commit1, err := commitIndex(after, hc, cfg.apiKey, leader)
	if err != nil {
		return r, err
	}
	cpu1, err := leaderCPU(after, hc, leader)
	if err != nil {
		return r, err
	}
	slices.Sort(latencies)
	entries := float64(commit1 - commit0)
	r.refused, r.errors = refused.Load(), errs.Load()
	r.entriesPerSec = entries / elapsed
	// Each steady op is a claim and a completion: two entries.
	r.stormPerSec = max(entries-float64(2*steady.Load()), 0) / elapsed
	r.cpu = (cpu1 - cpu0) / elapsed
	r.steadyOps = len(latencies)
	r.p50, r.p99 = pct(latencies, 0.50), pct(latencies, 0.99)
	return r, nil
}

// commitIndex reads the leader's commit index from GET /v1/cluster.
func commitIndex(ctx context.Context, hc *http.Client, apiKey, leader string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, leader+"/v1/cluster", nil)
	if err != nil {
		return 0, err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("storm: reading the commit index: %w", err)
	}
	defer resp.Body.Close()
	var st struct {
		CommitIndex uint64 `json:"commit_index"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("storm: reading the commit index: %w", err)
	}
	return st.CommitIndex, nil
}

// leaderCPU reads process_cpu_seconds_total from the leader's /metrics.
func leaderCPU(ctx context.Context, hc *http.Client, leader string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, leader+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("storm: reading the leader's CPU: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("storm: no process_cpu_seconds_total in %s/metrics", leader)
}
