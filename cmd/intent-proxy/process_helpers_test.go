package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/frontend/idemproxy"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// proxyProc is one intent-proxy process; start may be called again after
// it ended (a restart on the same address).
type proxyProc struct {
	*nodetest.Process
	addr string
}

func startProxy(t *testing.T, name, bin string, args ...string) *proxyProc {
	t.Helper()
	addr := nodetest.FreePort(t)
	p := &proxyProc{Process: nodetest.StartProcess(t, "proxy "+name, bin, append([]string{"--listen", addr}, args...)...), addr: addr}
	p.waitServing(t)
	return p
}

// start starts the proxy again and waits until it serves.
func (p *proxyProc) start(t *testing.T) {
	t.Helper()
	p.Start(t)
	p.waitServing(t)
}

func (p *proxyProc) waitServing(t *testing.T) {
	t.Helper()
	nodetest.WaitFor(t, 30*time.Second, p.Name+" to serve", func() bool {
		resp, err := http.Get("http://" + p.addr + "/-/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (p *proxyProc) url() string { return "http://" + p.addr }

// upstream is the API behind the proxies, in the test process: it counts
// executions per Idempotency-Key and does what a request's X-Upstream
// header says: status=NNN, big=N (N bytes of text), hang (never answers),
// reset (resets the connection after reading the request), block (announces
// the arrival on arrivals(key) and answers once gate(key) is closed, or has
// its connection cut if the test closes the connections first).
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	counts  map[string]int
	gates   map[string]chan struct{}
	arrived map[string]chan struct{}
	quit    chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{counts: map[string]int{}, gates: map[string]chan struct{}{}, arrived: map[string]chan struct{}{}, quit: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		close(u.quit)
		u.CloseClientConnections()
		u.Close()
	})
	return u
}

// gate returns the channel that releases blocked requests of key (the
// header's value, quotes and all).
func (u *upstream) gate(key string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	g, ok := u.gates[key]
	if !ok {
		g = make(chan struct{})
		u.gates[key] = g
	}
	return g
}

// arrivals returns the channel that announces each blocked request of key.
func (u *upstream) arrivals(key string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	a, ok := u.arrived[key]
	if !ok {
		a = make(chan struct{}, 64)
		u.arrived[key] = a
	}
	return a
}

func (u *upstream) count(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[key]
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	u.mu.Lock()
	u.counts[key]++
	n := u.counts[key]
	u.mu.Unlock()
	mode := r.Header.Get("X-Upstream")
	status := http.StatusCreated
	switch {
	case strings.HasPrefix(mode, "status="):
		status, _ = strconv.Atoi(strings.TrimPrefix(mode, "status="))
	case strings.HasPrefix(mode, "big="):
		size, _ := strconv.Atoi(strings.TrimPrefix(mode, "big="))
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(bytes.Repeat([]byte("b"), size))
		return
	case mode == "hang":
		select {
		case <-u.quit:
		case <-r.Context().Done():
		}
		return
	case mode == "reset":
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			conn.Close()
		}
		return
	case mode == "block":
		u.arrivals(key) <- struct{}{}
		select {
		case <-u.gate(key):
		case <-r.Context().Done():
			return
		case <-u.quit:
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Upstream-N", strconv.Itoa(n))
	w.Header().Set("X-Fencing-Token-Seen", r.Header.Get(idemproxy.HeaderFencingToken))
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"key":%q,"n":%d,"body":%q}`+"\n", key, n, body)
}

// reply is an answer of a proxy, body read.
type reply struct {
	code   int
	header http.Header
	body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %v %.300s", r.code, r.header, r.body) }

// problemCode is the code of a problem answer ("" for anything else).
func (r reply) problemCode() idemproxy.Code {
	if r.header.Get("Content-Type") != "application/problem+json" {
		return ""
	}
	var p idemproxy.Problem
	_ = json.Unmarshal(r.body, &p)
	return p.Code
}

func (r reply) replayed() bool {
	return r.header.Get(idemproxy.HeaderReplayed) == "true" && r.header.Get(idemproxy.HeaderStripeReplayed) == "true"
}

var httpClient = &http.Client{Timeout: 2 * time.Minute}

// send makes one request; key "" sends no Idempotency-Key; hdr holds more
// header pairs.
func send(base, method, path, key, body string, hdr ...string) (reply, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(idemproxy.HeaderIdempotencyKey, strconv.Quote(key))
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := httpClient.Do(req)
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

// mustSend is send that fails the test on a transport error.
func mustSend(t *testing.T, base, method, path, key, body string, hdr ...string) reply {
	t.Helper()
	r, err := send(base, method, path, key, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	return r
}

// sameAnswer reports whether a replay is the first answer byte for byte:
// status, the end-to-end headers the upstream sent, body.
func sameAnswer(first, again reply) bool {
	if first.code != again.code || !bytes.Equal(first.body, again.body) {
		return false
	}
	for _, h := range []string{"Content-Type", "Content-Length", "Date", "X-Upstream-N", "X-Fencing-Token-Seen"} {
		if first.header.Get(h) != again.header.Get(h) {
			return false
		}
	}
	return true
}
