// Command intent-bench drives an intentd cluster with a closed-loop load:
// each client claims a unique key and completes it, back to back, for a
// fixed time at each concurrency level, and prints ops/s and latency
// percentiles as a markdown table. Every run is bounded in time.
//
//	intent-bench --addr http://127.0.0.1:8101,http://127.0.0.1:8102 --clients 1,16,64,256 --duration 10s
//
// With --via idem it drives any HTTP endpoint the way agents drive an API
// behind intent-proxy instead: each op is a POST of a small JSON body to
// --url with a fresh Idempotency-Key, and a 2xx answer is a success. With
// --serve-upstream ADDR it is the other end: a trivial upstream API that
// answers every request 201 with a small JSON body, until it is stopped
// (make bench-proxy runs both, bench/scripts/bench-proxy.sh).
//
//	intent-bench --serve-upstream 127.0.0.1:8490
//	intent-bench --via idem --url http://127.0.0.1:8480/v1/charges --clients 1,64 --duration 10s
//
// With --storm 50,200,1000 it measures a retry storm on one held key
// beside a steady workload of unrelated claims (storm.go; make
// bench-storm).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/internal/progress"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	addrs        []string
	clients      []int
	duration     time.Duration
	warmup       time.Duration
	payloadBytes int
	mode         string // unique or contended
	claimants    int    // per key in contended mode
	complete     bool
	target       string // leader or all
	via          string // http (hand-written requests), sdk (the Go SDK) or idem (POSTs with an Idempotency-Key to url)
	url          string // the endpoint of --via idem
	apiKey       string
	serve        string // --serve-upstream: serve the trivial upstream here instead of driving load
	storm        []int  // --storm: retrier levels of the storm mode (storm.go)
	stormHold    time.Duration
	stormKinds   []string // --storm-kinds: naive, polite, divergent
	steadyRate   int
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("intent-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addrs := fs.String("addr", "http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103", "comma-separated node HTTP addresses")
	clients := fs.String("clients", "1,16,64,256", "comma-separated concurrency levels")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "measured time per level")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured time before each level")
	fs.IntVar(&c.payloadBytes, "payload-bytes", 100, "payload size")
	fs.StringVar(&c.mode, "mode", "unique", "unique (one claimant per key) or contended (--claimants per key)")
	fs.IntVar(&c.claimants, "claimants", 10, "claimants racing for each key in contended mode")
	fs.BoolVar(&c.complete, "complete", true, "complete each granted claim (claim + complete is one op)")
	fs.StringVar(&c.target, "target", "leader", "send to the leader (as the SDK does) or spread over all nodes (followers forward)")
	fs.StringVar(&c.via, "via", "http", "http: hand-written requests (the server's cost alone); sdk: the Go SDK's Claim and Complete (what an agent pays); "+
		"idem: a POST of a small JSON body with a fresh Idempotency-Key to --url (an API, or intent-proxy in front of one)")
	fs.StringVar(&c.url, "url", "", "--via idem: the URL every op POSTs to, e.g. http://127.0.0.1:8480/v1/charges")
	fs.StringVar(&c.apiKey, "api-key", os.Getenv("INTENTD_API_KEY"), "API key for a cluster with auth on (also INTENTD_API_KEY)")
	fs.StringVar(&c.serve, "serve-upstream", "", "serve a trivial upstream API on this address (201 and a small JSON body to every request) until stopped, instead of driving load")
	storm := fs.String("storm", "", "storm mode: comma-separated retrier counts (e.g. 50,200,1000) hammering one held key, naive and polite, beside --steady-rate unrelated claims/s (storm.go)")
	fs.DurationVar(&c.stormHold, "storm-hold", 10*time.Second, "storm mode: how long each level holds its key")
	fs.IntVar(&c.steadyRate, "steady-rate", 200, "storm mode: unrelated claims per second")
	kinds := fs.String("storm-kinds", "naive,polite", "storm mode: the retriers of each level: naive (same payload, again at once), "+
		"polite (same payload, after retry_after_ms), divergent (each its own payload, again at once)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *storm != "" {
		for _, s := range strings.Split(*storm, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				return c, fmt.Errorf("--storm: bad level %q", s)
			}
			c.storm = append(c.storm, n)
		}
		for _, k := range strings.Split(*kinds, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains([]string{"naive", "polite", "divergent"}, k) {
				return c, fmt.Errorf("--storm-kinds: unknown kind %q (naive, polite, divergent)", k)
			}
			c.stormKinds = append(c.stormKinds, k)
		}
		if c.stormHold <= 0 || c.steadyRate < 1 {
			return c, errors.New("bad flags: --storm needs a positive --storm-hold and --steady-rate")
		}
	}
	if c.serve != "" {
		return c, nil
	}
	for _, a := range strings.Split(*addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			if !strings.Contains(a, "://") {
				a = "http://" + a
			}
			c.addrs = append(c.addrs, strings.TrimRight(a, "/"))
		}
	}
	for _, s := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return c, fmt.Errorf("--clients: bad level %q", s)
		}
		c.clients = append(c.clients, n)
	}
	if len(c.addrs) == 0 || c.duration <= 0 || (c.mode != "unique" && c.mode != "contended") ||
		(c.target != "leader" && c.target != "all") || c.claimants < 1 || (c.via != "http" && c.via != "sdk" && c.via != "idem") {
		return c, errors.New("bad flags: need --addr, a positive --duration, --mode unique|contended, --target leader|all, --via http|sdk|idem")
	}
	if c.via == "idem" {
		u, err := url.Parse(c.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || c.mode != "unique" {
			return c, errors.New("bad flags: --via idem needs --url http(s)://host[:port]/path and --mode unique")
		}
	} else if c.url != "" {
		return c, errors.New("bad flags: --url is for --via idem")
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "intent-bench:", err)
		return 2
	}
	if cfg.serve != "" {
		if err := serveUpstream(ctx, cfg.serve, stdout); err != nil {
			fmt.Fprintln(stderr, "intent-bench:", err)
			return 1
		}
		return 0
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}
	targets := cfg.addrs
	switch {
	case cfg.via == "idem":
		targets = []string{cfg.url}
	case cfg.target == "leader":
		leader, err := findLeader(ctx, hc, cfg.addrs)
		if err != nil {
			fmt.Fprintln(stderr, "intent-bench:", err)
			return 1
		}
		targets = []string{leader}
	}
	if len(cfg.storm) > 0 {
		if err := runStorm(ctx, cfg, hc, targets[0], stdout); err != nil {
			fmt.Fprintln(stderr, "intent-bench:", err)
			return 1
		}
		return 0
	}
	do := func(ctx context.Context, target, key, owner, payload string) error {
		return op(ctx, hc, cfg.apiKey, target, key, owner, payload, cfg.complete)
	}
	switch cfg.via {
	case "idem":
		do = func(ctx context.Context, target, key, _, payload string) error {
			return idemOp(ctx, hc, target, key, payload)
		}
	case "sdk":
		sdk, err := client.New(cfg.addrs, client.WithAPIKey(cfg.apiKey))
		if err != nil {
			fmt.Fprintln(stderr, "intent-bench:", err)
			return 2
		}
		do = func(ctx context.Context, _, key, owner, payload string) error {
			return sdkOp(ctx, sdk, key, owner, payload, cfg.complete)
		}
	}
	fmt.Fprintf(stdout, "intent-bench: mode=%s complete=%v payload=%dB duration=%s warmup=%s target=%s via=%s %v\n\n",
		cfg.mode, cfg.complete, cfg.payloadBytes, cfg.duration, cfg.warmup, cfg.target, cfg.via, targets)
	fmt.Fprintln(stdout, "| clients | ops/s | p50 ms | p99 ms | p99.9 ms | ops | errors | unknown |")
	fmt.Fprintln(stdout, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	prog := progress.New(stderr)
	for _, n := range cfg.clients {
		if ctx.Err() != nil {
			break
		}
		r := level(ctx, do, cfg, targets, n, fmt.Sprintf("%s-%d", runID, n), prog)
		fmt.Fprintf(stdout, "| %d | %.0f | %.2f | %.2f | %.2f | %d | %d | %d |\n", n, r.opsPerSec, ms(r.p50), ms(r.p99), ms(r.p999),
			r.ops, r.errors, r.unknown)
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func findLeader(ctx context.Context, hc *http.Client, addrs []string) (string, error) {
	for _, a := range addrs {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a+"/v1/cluster", nil)
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		var st struct {
			LeaderHTTP string `json:"leader_http"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err == nil && st.LeaderHTTP != "" {
			return "http://" + st.LeaderHTTP, nil
		}
	}
	return "", fmt.Errorf("no node in %v knows a leader", addrs)
}

type levelResult struct {
	opsPerSec      float64
	p50, p99, p999 time.Duration
	ops            int
	errors         int64
	unknown        int64
}

// level runs n closed-loop clients for warmup+duration and measures the
// ops that started after the warm-up.
func level(ctx context.Context, do func(ctx context.Context, target, key, owner, payload string) error, cfg config,
	targets []string, n int, prefix string, prog *progress.Writer) levelResult {
	ctx, cancel := context.WithTimeout(ctx, cfg.warmup+cfg.duration)
	defer cancel()
	start := time.Now()
	measureFrom := start.Add(cfg.warmup)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errs      atomic.Int64
		unknown   atomic.Int64
		done      atomic.Int64
		wg        sync.WaitGroup
	)
	payload := strings.Repeat("x", max(cfg.payloadBytes-12, 1))
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				prog.Clear()
				return
			case <-t.C:
				prog.Status("  clients=%d elapsed=%s ops=%d errors=%d", n, time.Since(start).Round(time.Second), done.Load(), errs.Load())
			}
		}
	}()
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var local []time.Duration
			rng := rand.New(rand.NewPCG(uint64(c), uint64(n)))
			for i := 0; ctx.Err() == nil; i++ {
				var key string
				if cfg.mode == "unique" {
					key = fmt.Sprintf("bench:%s:%d:%d", prefix, c, i)
				} else {
					// Clients in a group of --claimants walk the same keys
					// and race for each one.
					key = fmt.Sprintf("bench:%s:g%d:%d", prefix, c/cfg.claimants, i)
				}
				target := targets[rng.IntN(len(targets))]
				owner := fmt.Sprintf("bench-%d-%d", c, i)
				t0 := time.Now()
				err := do(ctx, target, key, owner, payload)
				lat := time.Since(t0)
				if ctx.Err() != nil {
					break // the level ended mid-operation: not counted
				}
				switch {
				case errors.Is(err, errUnknown):
					unknown.Add(1)
				case err != nil:
					errs.Add(1)
				}
				done.Add(1)
				if err == nil && !t0.Before(measureFrom) {
					local = append(local, lat)
				}
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	close(stopProgress)
	<-progressDone
	slices.Sort(latencies)
	r := levelResult{ops: len(latencies), errors: errs.Load(), unknown: unknown.Load()}
	r.opsPerSec = float64(len(latencies)) / cfg.duration.Seconds()
	r.p50, r.p99, r.p999 = pct(latencies, 0.50), pct(latencies, 0.99), pct(latencies, 0.999)
	return r
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

var errUnknown = errors.New("outcome unknown")

// op claims key and, when granted and asked to, completes it. Contended
// losers (in_flight, duplicate) are successful ops: the ledger answered.
func op(ctx context.Context, hc *http.Client, apiKey, target, key, owner, payload string, complete bool) error {
	body, _ := json.Marshal(map[string]any{"key": key, "tool": "bench.tool", "owner": owner, "payload": map[string]string{"d": payload}})
	code, resp, err := postJSON(ctx, hc, apiKey, target+"/v1/intents", body)
	if err != nil {
		return err
	}
	switch code {
	case http.StatusCreated:
	case http.StatusOK, http.StatusConflict:
		return nil
	default:
		return fmt.Errorf("claim: HTTP %d", code)
	}
	if !complete {
		return nil
	}
	var grant struct {
		FencingToken uint64 `json:"fencing_token"`
	}
	if err := json.Unmarshal(resp, &grant); err != nil {
		return fmt.Errorf("claim answer: %w", err)
	}
	body, _ = json.Marshal(map[string]any{"owner": owner, "fencing_token": grant.FencingToken, "outcome": "executed", "result": map[string]bool{"ok": true}})
	code, _, err = postJSON(ctx, hc, apiKey, target+"/v1/intents/"+key+"/complete", body)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("complete: HTTP %d", code)
	}
	return nil
}

func postJSON(ctx context.Context, hc *http.Client, apiKey, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errUnknown, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errUnknown, err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		return 0, nil, errUnknown
	}
	return resp.StatusCode, b, nil
}

// sdkOp is op through the Go SDK: Claim, then Complete when granted; the
// SDK finds the leader and retries what the cluster could not answer.
func sdkOp(ctx context.Context, c *client.Client, key, owner, payload string, complete bool) error {
	body, _ := json.Marshal(map[string]string{"d": payload})
	g, err := c.Claim(ctx, client.ClaimRequest{Key: key, Tool: "bench.tool", Owner: owner, Payload: body})
	switch {
	case errors.Is(err, client.ErrOutcomeUnknown):
		return fmt.Errorf("%w: %w", errUnknown, err)
	case errors.Is(err, client.ErrInFlight):
		return nil // a contended loser: the ledger answered
	case err != nil:
		return err
	}
	if !complete || g.Status != client.StatusGranted {
		return nil
	}
	_, err = c.Complete(ctx, client.CompleteRequest{Key: key, Owner: owner, FencingToken: g.FencingToken,
		Outcome: client.OutcomeExecuted, Result: json.RawMessage(`{"ok":true}`)})
	if errors.Is(err, client.ErrOutcomeUnknown) {
		return fmt.Errorf("%w: %w", errUnknown, err)
	}
	return err
}

// idemOp is one proxy-shaped request: a POST of a small JSON body to target
// with key as its Idempotency-Key (an RFC 8941 string). A 2xx answer is a
// success; a replayed one means two ops shared a key, an error; a 502,
// 503 or 504 or a broken exchange leaves the outcome unknown.
func idemOp(ctx context.Context, hc *http.Client, target, key, payload string) error {
	body, _ := json.Marshal(map[string]any{"amount": 1299, "currency": "usd", "d": payload})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnknown, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("%w: %w", errUnknown, err)
	}
	switch {
	case resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		return fmt.Errorf("%w: HTTP %d", errUnknown, resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	case resp.Header.Get("Idempotency-Replayed") != "":
		return errors.New("a fresh key got a replayed answer")
	}
	return nil
}

// serveUpstream serves the trivial upstream API on addr until ctx ends:
// every request is read and answered 201 with a small JSON body, as a
// payment API creating a charge would.
func serveUpstream(ctx context.Context, addr string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--serve-upstream: %w", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: upstreamHandler()}
	fmt.Fprintf(stdout, "intent-bench: upstream listening on http://%s\n", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("--serve-upstream: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("--serve-upstream: shutdown: %w", err)
	}
	return nil
}

// upstreamHandler is the trivial upstream: it reads the request and
// answers 201 with a small JSON body naming a new charge.
func upstreamHandler() http.Handler {
	var n atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"ch_%d","object":"charge","status":"succeeded"}`+"\n", n.Add(1))
	})
}
