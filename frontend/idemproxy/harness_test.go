package idemproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// testUpstream is an upstream API that counts the executions of each
// Idempotency-Key and does what the X-Upstream header of a request says:
//
//	status=NNN  answer NNN with {"key":...,"n":...} (the default is 201)
//	block       announce the arrival on arrived, wait for release, answer 201
//	hang        never answer (until the test ends)
//	reset       read the request, then reset the connection
//	partial     send headers and part of the body, then break off
//	big=N       answer 200 with N bytes
type testUpstream struct {
	*httptest.Server
	mu      sync.Mutex
	counts  map[string]int
	headers map[string]http.Header
	arrived chan string
	release chan struct{}
	quit    chan struct{}
}

func newTestUpstream(t *testing.T) *testUpstream {
	u := &testUpstream{counts: map[string]int{}, headers: map[string]http.Header{}, arrived: make(chan string, 64),
		release: make(chan struct{}), quit: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		close(u.quit)
		u.Server.CloseClientConnections()
		u.Server.Close()
	})
	return u
}

func (u *testUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	u.mu.Lock()
	u.counts[key]++
	n := u.counts[key]
	u.headers[key] = r.Header.Clone()
	u.mu.Unlock()
	mode := r.Header.Get("X-Upstream")
	status := http.StatusCreated
	switch {
	case strings.HasPrefix(mode, "status="):
		status, _ = strconv.Atoi(strings.TrimPrefix(mode, "status="))
	case mode == "block":
		u.arrived <- key
		select {
		case <-u.release:
		case <-u.quit:
			return
		}
	case mode == "hang":
		select {
		case <-u.quit:
		case <-r.Context().Done():
		}
		return
	case mode == "reset":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			conn.Close()
		}
		return
	case mode == "partial":
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("only part"))
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	case strings.HasPrefix(mode, "big="):
		size, _ := strconv.Atoi(strings.TrimPrefix(mode, "big="))
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(strings.Repeat("b", size)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Upstream-N", strconv.Itoa(n))
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"key":%q,"n":%d,"body":%q}`+"\n", key, n, body)
}

// count is how many times the upstream ran key.
func (u *testUpstream) count(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[key]
}

func (u *testUpstream) header(key string) http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.headers[key]
}

// harness is a proxy over an in-memory ledger node and a testUpstream.
type harness struct {
	t      *testing.T
	mem    *clienttest.Memory
	up     *testUpstream
	h      *Handler
	srv    *httptest.Server
	ledger *client.Client
	// dropClaims makes the ledger node apply that many claims and answer
	// them 503 outcome_unknown (the answer lost).
	dropClaims atomic.Int32
}

type harnessOption func(*Config)

func newHarness(t *testing.T, routes []Route, opts ...harnessOption) *harness {
	t.Helper()
	return newHarnessWith(t, routes, nil, nil, opts...)
}

// newHarnessWith is newHarness with more options for the ledger node
// (clienttest.WithAuth) and the proxy's ledger client (client.WithAPIKey).
func newHarnessWith(t *testing.T, routes []Route, memOpts []clienttest.MemoryOption, clientOpts []client.Option, opts ...harnessOption) *harness {
	t.Helper()
	hs := &harness{t: t, up: newTestUpstream(t)}
	hs.mem = clienttest.NewMemory(t, append(memOpts, clienttest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n := hs.dropClaims.Load(); clienttest.Op(r) == "claim" && n > 0 && hs.dropClaims.CompareAndSwap(n, n-1) {
				next.ServeHTTP(httptest.NewRecorder(), r)
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"title":"lost","status":503,"code":"outcome_unknown"}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))...)
	var err error
	hs.ledger, err = client.New([]string{hs.mem.URL}, append(clientOpts, client.WithBackoff(5*time.Millisecond, 50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range routes {
		if err := routes[i].Normalize(); err != nil {
			t.Fatal(err)
		}
	}
	router, err := NewRouter(routes)
	if err != nil {
		t.Fatal(err)
	}
	upURL, _ := url.Parse(hs.up.URL)
	level := slog.LevelError
	if os.Getenv("PROXY_TEST_LOGS") != "" {
		level = slog.LevelDebug
	}
	cfg := Config{
		Upstream: upURL, Ledger: hs.ledger, LedgerURL: hs.mem.URL, Router: router,
		UpstreamTimeout: 5 * time.Second, LedgerTimeout: 2 * time.Second, ReportTimeout: 5 * time.Second, MaxWait: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if hs.h, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	hs.srv = httptest.NewServer(hs.h)
	t.Cleanup(hs.srv.Close)
	return hs
}

// reply is an answer of the proxy, body read.
type reply struct {
	code   int
	header http.Header
	body   []byte
}

// problem decodes a problem answer.
func (r reply) problem(t *testing.T) Problem {
	t.Helper()
	var p Problem
	if r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("not a problem: %d %v %s", r.code, r.header, r.body)
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem %s: %v", r.body, err)
	}
	return p
}

func (r reply) String() string { return fmt.Sprintf("%d %v %s", r.code, r.header, r.body) }

// send makes one request through the proxy; key "" sends no
// Idempotency-Key, and hdr holds more header pairs.
func (hs *harness) send(method, path, key, body string, hdr ...string) reply {
	hs.t.Helper()
	r, err := hs.trySend(context.Background(), method, path, key, body, hdr...)
	if err != nil {
		hs.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func (hs *harness) trySend(ctx context.Context, method, path, key, body string, hdr ...string) (reply, error) {
	return sendTo(ctx, hs.srv.URL, method, path, key, body, hdr...)
}

func sendTo(ctx context.Context, base, method, path, key, body string, hdr ...string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(HeaderIdempotencyKey, strconv.Quote(key))
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{code: resp.StatusCode, header: resp.Header, body: b}, nil
}

// intent reads the ledger's record of a proxied key on the default scope.
func (hs *harness) intent(ledgerKey string) *client.Intent {
	hs.t.Helper()
	in, err := hs.ledger.Get(context.Background(), ledgerKey, client.GetOptions{})
	if err != nil {
		hs.t.Fatalf("get %s: %v", ledgerKey, err)
	}
	return in
}

// waitFor polls cond until it holds (a hang guard, not a timing claim).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readLine is a helper for streamed bodies.
func readLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	s, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return s
}
