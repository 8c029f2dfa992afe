package idemproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
)

// These tests run the proxy in process over an in-memory ledger node (the
// real HTTP API and state machine, with a clock the test moves) and a
// test upstream: every rule of docs/proxy.md once. The same rules against
// real processes and a 3-node cluster are in cmd/intent-proxy.

const testLease = 2 * time.Second

func testRoutes() []Route {
	return []Route{
		{Name: "charges", Method: "POST", Path: "/v1/charges", Tool: "charge", Lease: Duration(testLease)},
		{Name: "retry", Method: "POST", Path: "/v1/retry", Tool: "retry", On5xx: On5xxRetry},
		{Name: "doubt", Method: "POST", Path: "/v1/doubt", Tool: "doubt", On5xx: On5xxInDoubt, Lease: Duration(testLease)},
		{Name: "wait", Method: "POST", Path: "/v1/wait", Tool: "wait", WaitInFlight: true},
		{Name: "optional", Path: "/v1/optional", Key: KeyOptional, Tool: "optional"},
		{Name: "free", Path: "/v1/free", Key: KeyPass},
		{Name: "approve", Method: "POST", Path: "/v1/approve", Tool: "approve", Policy: "needs-approval"},
		{Name: "tenant", Method: "POST", Path: "/v1/tenant", Tool: "tenant", ScopeHeaders: []string{"Authorization"}},
	}
}

// anonKey is the ledger key of an Idempotency-Key on a route scoped by
// the default scope headers, for a client that sends no credentials.
func anonKey(scope, key string) string {
	return LedgerKey(scope, ScopeDigest(http.Header{}, DefaultScopeHeaders), key)
}

func TestFirstRequestRunsOnceAndRetriesReplay(t *testing.T) {
	hs := newHarness(t, testRoutes())
	first := hs.send("POST", "/v1/charges?x=1", "k-1", `{"amount":1299,"currency":"usd"}`, "X-Intent-Fencing-Token", "x",
		HeaderFencingToken, "999", HeaderExecutionToken, "forged")
	if first.code != http.StatusCreated || first.header.Get(HeaderReplayed) != "" || first.header.Get(HeaderStripeReplayed) != "" {
		t.Fatalf("first: %v", first)
	}
	up := hs.up.header(`"k-1"`)
	if tok, err := strconv.Atoi(up.Get(HeaderFencingToken)); err != nil || tok == 999 || tok == 0 {
		t.Errorf("upstream got fencing token %q", up.Get(HeaderFencingToken))
	}
	if !strings.HasPrefix(up.Get(HeaderExecutionToken), "gex_") || len(up.Values(HeaderExecutionToken)) != 1 {
		t.Errorf("upstream got execution token %q", up.Values(HeaderExecutionToken))
	}
	if up.Get(HeaderIdempotencyKey) != `"k-1"` || up.Get("X-Forwarded-For") == "" {
		t.Errorf("upstream headers %v", up)
	}
	in := hs.intent(anonKey("charge", "k-1"))
	if (in.State != client.StateExecuted && in.State != client.StateCommitted) || in.Tool != "charge" {
		t.Errorf("intent %s %s", in.State, in.Tool)
	}
	// The payload the ledger holds is the request, readable.
	var payload map[string]any
	_ = json.Unmarshal(in.Payload, &payload)
	if payload["method"] != "POST" || payload["path"] != "/v1/charges" || payload["query"] != "x=1" {
		t.Errorf("payload %s", in.Payload)
	}

	// Retries (keys reordered, bare key spelling) replay byte for byte.
	for i, key := range []string{`"k-1"`, `k-1`} {
		again := hs.send("POST", "/v1/charges?x=1", "", `{"currency":"usd", "amount":1299}`, HeaderIdempotencyKey, key)
		if again.code != first.code || string(again.body) != string(first.body) {
			t.Fatalf("retry %d: %v, want %v", i, again, first)
		}
		for _, h := range []string{"Content-Type", "X-Upstream-N", "Date", "Content-Length"} {
			if again.header.Get(h) != first.header.Get(h) {
				t.Errorf("retry %d: header %s %q, want %q", i, h, again.header.Get(h), first.header.Get(h))
			}
		}
		if again.header.Get(HeaderReplayed) != "true" || again.header.Get(HeaderStripeReplayed) != "true" {
			t.Errorf("retry %d: not marked replayed: %v", i, again.header)
		}
	}
	if n := hs.up.count(`"k-1"`); n != 1 {
		t.Errorf("upstream ran k-1 %d times", n)
	}
}

func TestKeyRules(t *testing.T) {
	hs := newHarness(t, testRoutes())
	claims := func() int { return hs.mem.Requests("claim") }

	r := hs.send("POST", "/v1/charges", "", `{}`)
	if p := r.problem(t); r.code != 400 || p.Code != CodeMissingKey || p.Status != 400 || p.Type != problemTypeBase+"missing-key" {
		t.Errorf("no key: %v", r)
	}
	r = hs.send("POST", "/v1/charges", "", `{}`, HeaderIdempotencyKey, `""`)
	if p := r.problem(t); p.Code != CodeMissingKey {
		t.Errorf("empty key: %v", r)
	}
	for _, bad := range []string{`"unterminated`, strings.Repeat("k", 256), `"a","b"`, "\"caf\u00e9\""} {
		r = hs.send("POST", "/v1/charges", "", `{}`, HeaderIdempotencyKey, bad)
		if p := r.problem(t); r.code != 400 || p.Code != CodeInvalidKey {
			t.Errorf("key %q: %v", bad, r)
		}
	}
	// The header name is case-insensitive (a raw lower-case line).
	r = hs.send("POST", "/v1/charges", "", `{}`, "idempotency-key", `"lower"`)
	if r.code != http.StatusCreated || hs.up.count(`"lower"`) != 1 {
		t.Errorf("lower-case header name: %v", r)
	}
	// Optional routes pass requests without a key through; with one they
	// are claimed.
	before := claims()
	for i := 0; i < 2; i++ {
		if r = hs.send("POST", "/v1/optional", "", `{}`); r.code != http.StatusCreated {
			t.Errorf("optional without key: %v", r)
		}
	}
	if hs.up.count("") != 2 || claims() != before {
		t.Errorf("optional without key: %d executions, %d claims", hs.up.count(""), claims()-before)
	}
	hs.send("POST", "/v1/optional", "opt", `{}`)
	if r = hs.send("POST", "/v1/optional", "opt", `{}`); r.header.Get(HeaderReplayed) != "true" || hs.up.count(`"opt"`) != 1 {
		t.Errorf("optional with key: %v", r)
	}
	// Safe methods, pass routes and unmatched paths are never claimed,
	// even with a key.
	before = claims()
	for _, c := range []struct{ method, path string }{{"GET", "/v1/charges"}, {"HEAD", "/v1/charges"}, {"OPTIONS", "/v1/charges"},
		{"POST", "/v1/free"}, {"POST", "/v1/free"}, {"POST", "/nowhere"}} {
		r = hs.send(c.method, c.path, "safe", "")
		if r.code >= 300 || r.header.Get(HeaderReplayed) != "" {
			t.Errorf("%s %s: %v", c.method, c.path, r)
		}
	}
	if claims() != before || hs.up.count(`"safe"`) != 6 {
		t.Errorf("pass-through: %d claims, %d executions", claims()-before, hs.up.count(`"safe"`))
	}
}

func TestFingerprintMismatch(t *testing.T) {
	hs := newHarness(t, testRoutes())
	first := hs.send("POST", "/v1/charges", "fp", `{"amount":1}`)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/charges", `{"amount":2}`},
		{"POST", "/v1/charges?x=1", `{"amount":1}`},
	} {
		r := hs.send(c.method, c.path, "fp", c.body)
		p := r.problem(t)
		if r.code != 422 || p.Code != CodeFingerprintMismatch || p.Fingerprint == "" || p.RequestFingerprint == "" ||
			p.Fingerprint == p.RequestFingerprint || p.LedgerKey != anonKey("charge", "fp") {
			t.Errorf("%s %s %s: %v", c.method, c.path, c.body, r)
		}
		// Another request under the key learns nothing of the first's
		// body or answer.
		if strings.Contains(string(r.body), `"payload"`) || strings.Contains(string(r.body), `"result"`) || strings.Contains(string(r.body), `amount`) {
			t.Errorf("the mismatch answer shows the first request: %s", r.body)
		}
	}
	// The original request still replays.
	if r := hs.send("POST", "/v1/charges", "fp", `{"amount":1}`); string(r.body) != string(first.body) || r.header.Get(HeaderReplayed) != "true" {
		t.Errorf("original after mismatches: %v", r)
	}
	if n := hs.up.count(`"fp"`); n != 1 {
		t.Errorf("%d executions", n)
	}
}

func TestUpstreamStatuses(t *testing.T) {
	hs := newHarness(t, testRoutes())
	for _, c := range []struct {
		path, mode string
		runs       int // executions after three requests
		replayed   bool
	}{
		{"/v1/charges", "status=404", 1, true}, // 4xx: recorded and replayed
		{"/v1/charges", "status=500", 1, true}, // on_5xx record (the default)
		{"/v1/retry", "status=503", 3, false},  // on_5xx retry: failed, the next runs again
		{"/v1/retry", "status=409", 1, true},   // 4xx on a retry route: still recorded
		{"/v1/doubt", "status=502", 1, false},  // on_5xx in_doubt: held, then in doubt
	} {
		key := c.path + c.mode
		code, _ := strconv.Atoi(strings.TrimPrefix(c.mode, "status="))
		first := hs.send("POST", c.path, key, `{}`, "X-Upstream", c.mode)
		if first.code != code {
			t.Fatalf("%s %s: %v", c.path, c.mode, first)
		}
		for i := 0; i < 2; i++ {
			r := hs.send("POST", c.path, key, `{}`, "X-Upstream", c.mode)
			switch {
			case c.replayed && (r.code != code || string(r.body) != string(first.body) || r.header.Get(HeaderReplayed) != "true"):
				t.Errorf("%s %s retry: %v, want the replay of %v", c.path, c.mode, r, first)
			case c.path == "/v1/retry" && !c.replayed && (r.code != code || r.header.Get(HeaderReplayed) != ""):
				t.Errorf("%s %s retry: %v, want a new execution", c.path, c.mode, r)
			case c.path == "/v1/doubt" && (r.code != 409 || r.problem(t).Code != CodeInFlight):
				t.Errorf("%s %s retry: %v, want in-flight", c.path, c.mode, r)
			}
		}
		if n := hs.up.count(strconv.Quote(key)); n != c.runs {
			t.Errorf("%s %s: %d executions, want %d", c.path, c.mode, n, c.runs)
		}
	}
	// The unrecorded 5xx turns in doubt once its lease passes.
	hs.mem.Ledger.Advance(testLease + time.Second)
	r := hs.send("POST", "/v1/doubt", "/v1/doubtstatus=502", `{}`)
	if p := r.problem(t); r.code != 409 || p.Code != CodeInDoubt || p.Intent == nil || p.Intent.State != client.StateInDoubt {
		t.Errorf("after the lease: %v", r)
	}
}

func TestInFlightThenReplay(t *testing.T) {
	hs := newHarness(t, testRoutes())
	firstDone := make(chan reply, 1)
	go func() { firstDone <- hs.send("POST", "/v1/charges", "slow", `{}`, "X-Upstream", "block") }()
	<-hs.up.arrived
	r := hs.send("POST", "/v1/charges", "slow", `{}`)
	p := r.problem(t)
	if r.code != 409 || p.Code != CodeInFlight || r.header.Get("Retry-After") == "" || !p.Retryable || p.Intent == nil {
		t.Fatalf("concurrent: %v", r)
	}
	if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); ra < 1 || ra > int(testLease/time.Second) {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	close(hs.up.release)
	first := <-firstDone
	if r := hs.send("POST", "/v1/charges", "slow", `{}`); r.code != first.code || string(r.body) != string(first.body) || r.header.Get(HeaderReplayed) != "true" {
		t.Errorf("after the first: %v", r)
	}
	if hs.up.count(`"slow"`) != 1 {
		t.Errorf("%d executions", hs.up.count(`"slow"`))
	}
}

func TestWaitInFlightReplaysTheFirstAnswer(t *testing.T) {
	hs := newHarness(t, testRoutes())
	firstDone := make(chan reply, 1)
	go func() { firstDone <- hs.send("POST", "/v1/wait", "w", `{}`, "X-Upstream", "block") }()
	<-hs.up.arrived
	const waiters = 4
	var wg sync.WaitGroup
	replies := make(chan reply, waiters)
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); replies <- hs.send("POST", "/v1/wait", "w", `{}`) }()
	}
	// Every waiter has claimed (and found the key in flight) before the
	// first answers.
	waitFor(t, "the waiters' claims", func() bool { return hs.mem.Requests("claim") >= 1+waiters })
	close(hs.up.release)
	first := <-firstDone
	wg.Wait()
	close(replies)
	for r := range replies {
		if r.code != first.code || string(r.body) != string(first.body) || r.header.Get(HeaderReplayed) != "true" {
			t.Errorf("waiter: %v, want the replay of %v", r, first)
		}
	}
	if hs.up.count(`"w"`) != 1 {
		t.Errorf("%d executions", hs.up.count(`"w"`))
	}
}

// TestRouteUpstreamTimeout: a route's upstream_timeout bounds its upstream
// exchanges in place of the proxy's: a hanging upstream answers 504 (the
// key goes in doubt) under the route's bound while the proxy's is 10
// minutes; a route without one takes the proxy's.
func TestRouteUpstreamTimeout(t *testing.T) {
	for _, tc := range []struct {
		route, proxy, want time.Duration
	}{
		{0, 30 * time.Second, 30 * time.Second},
		{200 * time.Millisecond, 30 * time.Second, 200 * time.Millisecond},
		{2 * time.Hour, 30 * time.Second, 2 * time.Hour},
	} {
		r := Route{UpstreamTimeout: Duration(tc.route)}
		if got := r.upstreamTimeout(tc.proxy); got != tc.want {
			t.Errorf("route %v, proxy %v: bound %v, want %v", tc.route, tc.proxy, got, tc.want)
		}
	}

	routes := append(testRoutes(), Route{Name: "quick", Method: "POST", Path: "/v1/quick", Tool: "quick", UpstreamTimeout: Duration(200 * time.Millisecond)})
	hs := newHarness(t, routes, func(c *Config) { c.UpstreamTimeout = 10 * time.Minute })
	// Under the proxy's bound alone this would wait 10 minutes: the
	// client's 30 s (a hang guard) would end it first.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := hs.trySend(ctx, "POST", "/v1/quick", "q1", `{}`, "X-Upstream", "hang")
	if err != nil {
		t.Fatalf("hanging upstream on the quick route: %v", err)
	}
	if p := r.problem(t); r.code != http.StatusGatewayTimeout || p.Code != CodeUpstreamNoAnswer {
		t.Fatalf("hanging upstream on the quick route: %v", r)
	}
}

func TestNoAnswerLeavesTheKeyInDoubt(t *testing.T) {
	for _, mode := range []string{"hang", "reset", "partial"} {
		t.Run(mode, func(t *testing.T) {
			hs := newHarness(t, testRoutes(), func(c *Config) { c.UpstreamTimeout = 300 * time.Millisecond })
			// A request first, so the reset below comes on a reused
			// connection: the Transport must not send it again.
			hs.send("POST", "/v1/charges", "warm", `{}`)
			r, err := hs.trySend(context.Background(), "POST", "/v1/charges", "lost", `{}`, "X-Upstream", mode)
			switch mode {
			case "partial":
				// Headers went out; the body broke off: the client's answer
				// is cut short, never taken for a whole one.
				if err == nil {
					t.Fatalf("partial answer delivered as whole: %v", r)
				}
			default:
				p := r.problem(t)
				want := http.StatusBadGateway
				if mode == "hang" {
					want = http.StatusGatewayTimeout
				}
				if err != nil || r.code != want || p.Code != CodeUpstreamNoAnswer || p.Retryable {
					t.Fatalf("%v %v", r, err)
				}
			}
			ledgerKey := anonKey("charge", "lost")
			for i := 0; i < 2; i++ {
				r := hs.send("POST", "/v1/charges", "lost", `{}`)
				if p := r.problem(t); r.code != 409 || p.Code != CodeInFlight {
					t.Errorf("retry within the lease: %v", r)
				}
			}
			if in := hs.intent(ledgerKey); in.State != client.StateDeclared {
				t.Errorf("state %s", in.State)
			}
			hs.mem.Ledger.Advance(testLease + time.Second)
			for i := 0; i < 3; i++ {
				r := hs.send("POST", "/v1/charges", "lost", `{}`)
				if p := r.problem(t); r.code != 409 || p.Code != CodeInDoubt || p.Retryable || p.LedgerKey != ledgerKey {
					t.Errorf("retry after the lease: %v", r)
				}
			}
			if n := hs.up.count(`"lost"`); n != 1 {
				t.Errorf("upstream ran the request %d times", n)
			}
			// Resolved with a response in the proxy's format, it replays.
			rec, _ := EncodeRecord(200, http.Header{"Content-Type": {"text/plain"}}, []byte("resolved"), 8, DefaultMaxResult)
			if _, err := hs.ledger.Resolve(context.Background(), client.ResolveRequest{Key: ledgerKey, Outcome: client.OutcomeExecuted,
				Result: rec, Actor: "ops", Reason: "seen upstream"}); err != nil {
				t.Fatal(err)
			}
			if r := hs.send("POST", "/v1/charges", "lost", `{}`); r.code != 200 || string(r.body) != "resolved" || r.header.Get(HeaderReplayed) != "true" {
				t.Errorf("after resolve: %v", r)
			}
		})
	}
}

func TestResolvedWithoutARecord(t *testing.T) {
	hs := newHarness(t, testRoutes(), func(c *Config) { c.UpstreamTimeout = 200 * time.Millisecond })
	hs.send("POST", "/v1/charges", "bare", `{}`, "X-Upstream", "hang")
	hs.mem.Ledger.Advance(testLease + time.Second)
	if _, err := hs.ledger.Resolve(context.Background(), client.ResolveRequest{Key: anonKey("charge", "bare"),
		Outcome: client.OutcomeExecuted, Result: json.RawMessage(`{"charge":"ch_1"}`), Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	r := hs.send("POST", "/v1/charges", "bare", `{}`)
	if p := r.problem(t); r.code != 502 || p.Code != CodeNoRecordedResponse || p.Intent == nil || p.Intent.State != client.StateExecuted ||
		strings.Contains(string(r.body), "ch_1") {
		t.Errorf("%v", r)
	}
}

func TestUpstreamRefusedIsRecordedFailed(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	hs := newHarness(t, testRoutes(), func(c *Config) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if refuse.Load() {
				return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
			}
			return dial(ctx, network, addr)
		}
		c.Transport = tr
	})
	r := hs.send("POST", "/v1/charges", "refused", `{}`)
	if p := r.problem(t); r.code != 502 || p.Code != CodeUpstreamUnreachable || !p.Retryable || r.header.Get("Retry-After") != "1" {
		t.Fatalf("%v", r)
	}
	if in := hs.intent(anonKey("charge", "refused")); in.State != client.StateFailed {
		t.Errorf("state %s, want failed", in.State)
	}
	refuse.Store(false)
	if r = hs.send("POST", "/v1/charges", "refused", `{}`); r.code != http.StatusCreated || hs.up.count(`"refused"`) != 1 {
		t.Errorf("the retry did not run: %v", r)
	}
}

func TestBodyLimits(t *testing.T) {
	hs := newHarness(t, testRoutes(), func(c *Config) { c.MaxBody = 1024; c.MaxResult = 2048 })
	r := hs.send("POST", "/v1/charges", "big", `"`+strings.Repeat("x", 1024)+`"`)
	if p := r.problem(t); r.code != 413 || p.Code != CodeBodyTooLarge || hs.mem.Requests("claim") != 0 || hs.up.count(`"big"`) != 0 {
		t.Errorf("over --max-body: %v (%d claims)", r, hs.mem.Requests("claim"))
	}
	// A response over the result cap: streamed whole, replayed without
	// its body and marked.
	first := hs.send("POST", "/v1/charges", "large-answer", `{}`, "X-Upstream", "big=5000")
	if first.code != 200 || len(first.body) != 5000 {
		t.Fatalf("first: %d, %d bytes", first.code, len(first.body))
	}
	again := hs.send("POST", "/v1/charges", "large-answer", `{}`)
	if again.code != 200 || len(again.body) != 0 || again.header.Get(HeaderBodyOmitted) != "true" ||
		again.header.Get(HeaderReplayed) != "true" || again.header.Get("Content-Type") != "text/plain" {
		t.Errorf("replay: %v", again)
	}
	if hs.up.count(`"large-answer"`) != 1 {
		t.Error("ran twice")
	}
}

func TestStreamsWhileRecording(t *testing.T) {
	hs := newHarness(t, testRoutes())
	release := make(chan struct{})
	hs.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("first\n"))
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-hs.up.quit:
			return
		}
		_, _ = w.Write([]byte("second\n"))
	})
	req, _ := http.NewRequest("POST", hs.srv.URL+"/v1/charges", strings.NewReader("{}"))
	req.Header.Set(HeaderIdempotencyKey, `"stream"`)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if s := readLine(t, br); s != "first\n" { // arrives while the upstream still works
		t.Fatalf("first chunk %q", s)
	}
	close(release)
	if s := readLine(t, br); s != "second\n" {
		t.Fatalf("second chunk %q", s)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 { // the end of the answer
		t.Fatalf("after the last chunk: %q, %v", rest, err)
	}
	// Whoever has read the whole answer, to its end, finds it recorded.
	if r := hs.send("POST", "/v1/charges", "stream", "{}"); string(r.body) != "first\nsecond\n" || r.header.Get(HeaderReplayed) != "true" {
		t.Errorf("replay: %v", r)
	}
}

// TestCommitOnlyWhenAsked: an executed intent stays executed (replayable
// all the same) unless Config.Commit asks for the acknowledgement.
func TestCommitOnlyWhenAsked(t *testing.T) {
	for _, commit := range []bool{false, true} {
		hs := newHarness(t, testRoutes(), func(c *Config) { c.Commit = commit })
		// Served synchronously: when ServeHTTP returns, the commit (if
		// any) is started, and Wait waits for it.
		req := httptest.NewRequest("POST", "/v1/charges", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderIdempotencyKey, `"c-1"`)
		w := httptest.NewRecorder()
		hs.h.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			t.Fatalf("commit=%v: %d %s", commit, w.Code, w.Body)
		}
		if err := hs.h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := client.StateExecuted
		if commit {
			want = client.StateCommitted
		}
		if in := hs.intent(anonKey("charge", "c-1")); in.State != want {
			t.Errorf("commit=%v: intent %s, want %s", commit, in.State, want)
		}
		if r := hs.send("POST", "/v1/charges", "c-1", `{"amount":1}`); r.header.Get(HeaderReplayed) != "true" {
			t.Errorf("commit=%v: retry not replayed: %v", commit, r)
		}
	}
}

// hookLedger calls onComplete before each Report.
type hookLedger struct {
	LedgerClient
	onComplete func()
}

func (l *hookLedger) Report(ctx context.Context, req client.CompleteRequest) (*client.IntentResponse, error) {
	l.onComplete()
	return l.LedgerClient.Report(ctx, req)
}

// countingWriter is a ResponseWriter that counts the body bytes written
// to it.
type countingWriter struct {
	header http.Header
	code   int
	n      atomic.Int64
}

func (c *countingWriter) Header() http.Header         { return c.header }
func (c *countingWriter) WriteHeader(code int)        { c.code = code }
func (c *countingWriter) Flush()                      {}
func (c *countingWriter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// TestAnswerEndWaitsForTheRecord checks the guarantee that whoever saw a
// whole answer finds it recorded: when the record is written, the client
// has not been given the whole body yet, whether the answer fits in one
// read or takes several.
func TestAnswerEndWaitsForTheRecord(t *testing.T) {
	var cw *countingWriter
	var atComplete atomic.Int64
	hs := newHarness(t, testRoutes(), func(c *Config) {
		c.Ledger = &hookLedger{LedgerClient: c.Ledger, onComplete: func() { atComplete.Store(cw.n.Load()) }}
	})
	for _, size := range []int{1, 100, 200_000} {
		hs.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.WriteHeader(http.StatusOK)
			for left := size; left > 0; left -= 10_000 {
				_, _ = w.Write([]byte(strings.Repeat("x", min(left, 10_000))))
				_ = http.NewResponseController(w).Flush()
			}
		})
		cw = &countingWriter{header: http.Header{}}
		atComplete.Store(-1)
		req, _ := http.NewRequest("POST", "/v1/charges", strings.NewReader("{}"))
		req.Header.Set(HeaderIdempotencyKey, strconv.Quote("end-"+strconv.Itoa(size)))
		req.Header.Set("Content-Type", "application/json")
		hs.h.ServeHTTP(cw, req)
		if got := cw.n.Load(); cw.code != http.StatusOK || got != int64(size) {
			t.Fatalf("size %d: the client got %d and %d bytes", size, cw.code, got)
		}
		if at := atComplete.Load(); at < 0 || at >= int64(size) {
			t.Errorf("size %d: %d bytes were written to the client when the answer was recorded (want fewer than all)", size, at)
		}
	}
}

func TestLedgerAnswerLost(t *testing.T) {
	hs := newHarness(t, testRoutes(), func(c *Config) { c.LedgerTimeout = 300 * time.Millisecond })
	hs.dropClaims.Store(1000) // every claim is applied, its answer lost
	r := hs.send("POST", "/v1/charges", "lost-answer", `{}`)
	p := r.problem(t)
	if r.code != 503 || p.Code != CodeOutcomeUnknown || !p.Retryable || r.header.Get("Retry-After") == "" {
		t.Fatalf("%v", r)
	}
	if hs.up.count(`"lost-answer"`) != 0 {
		t.Fatal("ran without a grant it saw")
	}
	// The ledger answers again: the proxy releases the grant it never
	// used in the background, and the client's retry runs it, once.
	hs.dropClaims.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if in := hs.intent(anonKey("charge", "lost-answer")); in.State != client.StateFailed {
		t.Errorf("the unused grant: %s, want failed", in.State)
	}
	if r := hs.send("POST", "/v1/charges", "lost-answer", `{}`); r.code != http.StatusCreated || hs.up.count(`"lost-answer"`) != 1 {
		t.Errorf("retry: %v", r)
	}

	// A ledger that cannot be reached at all: 503, nothing written.
	hs2 := newHarness(t, testRoutes(), func(c *Config) { c.LedgerTimeout = 300 * time.Millisecond })
	hs2.mem.Close()
	r = hs2.send("POST", "/v1/charges", "down", `{}`)
	if p := r.problem(t); r.code != 503 || (p.Code != CodeLedgerUnavailable && p.Code != CodeOutcomeUnknown) || !p.Retryable {
		t.Errorf("ledger down: %v", r)
	}
	if hs2.up.count(`"down"`) != 0 {
		t.Error("ran without the ledger")
	}
}

func TestPendingApproval(t *testing.T) {
	hs := newHarness(t, testRoutes())
	ctx := context.Background()
	if _, err := hs.ledger.PutPolicy(ctx, client.Policy{Name: "needs-approval", Tools: []string{"approve"}, RequireApproval: true, AllowSelfApproval: true}, 0); err != nil {
		t.Fatal(err)
	}
	r := hs.send("POST", "/v1/approve", "refund-1", `{"amount":5}`)
	var ans pendingAnswer
	_ = json.Unmarshal(r.body, &ans)
	key := anonKey("approve", "refund-1")
	if r.code != 202 || ans.Status != client.StatusPendingApproval || ans.LedgerKey != key || ans.IntentURL != r.header.Get("Location") ||
		!strings.HasPrefix(ans.IntentURL, hs.mem.URL+"/v1/intents/") || ans.Approve != ans.IntentURL+"/approve" || hs.up.count(`"refund-1"`) != 0 {
		t.Fatalf("%v", r)
	}
	if r := hs.send("POST", "/v1/approve", "refund-1", `{"amount":5}`); r.code != 202 {
		t.Errorf("before approval: %v", r)
	}
	if _, err := hs.ledger.Approve(ctx, client.DecisionRequest{Key: key, Actor: "alice", Fingerprint: ans.Intent.Fingerprint}); err != nil {
		t.Fatal(err)
	}
	if r := hs.send("POST", "/v1/approve", "refund-1", `{"amount":5}`); r.code != http.StatusCreated || hs.up.count(`"refund-1"`) != 1 {
		t.Errorf("after approval: %v", r)
	}
}

func TestScopeHeadersSeparateClients(t *testing.T) {
	hs := newHarness(t, testRoutes())
	a := hs.send("POST", "/v1/tenant", "same", `{}`, "Authorization", "Bearer a")
	b := hs.send("POST", "/v1/tenant", "same", `{}`, "Authorization", "Bearer b")
	if a.header.Get(HeaderReplayed) != "" || b.header.Get(HeaderReplayed) != "" || hs.up.count(`"same"`) != 2 {
		t.Errorf("two clients with one key: %v / %v", a, b)
	}
	if r := hs.send("POST", "/v1/tenant", "same", `{}`, "Authorization", "Bearer a"); string(r.body) != string(a.body) {
		t.Errorf("client a's retry: %v", r)
	}
}

func TestClaimProblem(t *testing.T) {
	in := &client.Intent{Key: "k", State: client.StateDeclared, Owner: "o"}
	for _, tc := range []struct {
		err    error
		code   Code
		status int
		retry  bool
	}{
		{&client.Problem{Status: 409, Code: "in_flight", Intent: in, RetryAfter: 3 * time.Second}, CodeInFlight, 409, true},
		{&client.Problem{Status: 409, Code: "in_doubt", Intent: in}, CodeInDoubt, 409, false},
		{&client.Problem{Status: 422, Code: "divergent", Intent: in}, CodeFingerprintMismatch, 422, false},
		{&client.Problem{Status: 403, Code: "rejected", Intent: in}, CodeRejected, 403, false},
		{&client.Problem{Status: 403, Code: "blocked"}, CodeBlocked, 403, false},
		{&client.Problem{Status: 401, Code: "unauthenticated"}, CodeLedgerRefused, 502, false},
		{&client.Problem{Status: 413, Code: "too_large"}, CodeLedgerRefused, 502, false},
		{&client.UnsettledError{Key: "k", Last: client.ErrOutcomeUnknown, MaybeGranted: true}, CodeOutcomeUnknown, 503, true},
		{&client.UnsettledError{Key: "k", Last: client.ErrNoLeader}, CodeLedgerUnavailable, 503, true},
		{errors.New("other"), CodeLedgerRefused, 502, false},
	} {
		p, _ := ClaimProblem(tc.err, "idem:x:k")
		if p.Code != tc.code || p.Status != tc.status || p.Retryable != tc.retry || p.LedgerKey != "idem:x:k" {
			t.Errorf("%v: %+v", tc.err, p)
		}
	}
}
