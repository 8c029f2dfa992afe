package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type readyCluster struct{}

func (readyCluster) Status() cluster.Status {
	return cluster.Status{NodeID: "n1", State: "leader", LeaderID: "n1", Term: 3, CommitIndex: 9, AppliedIndex: 9, Ready: true,
		Nodes: []cluster.MemberStatus{{ID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8101", Suffrage: "voter", Gossip: "alive", Leader: true}}}
}

// node is an API server over an in-memory ledger.
type node struct {
	mem  *ledgertest.Memory
	svc  *ledger.Service
	srv  *httptest.Server
	hits atomic.Int64
}

func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{mem: ledgertest.NewMemory(epoch)}
	n.svc = ledgertest.NewService(t, n.mem, ledger.Config{})
	api := httpapi.New(httpapi.Config{
		Service: n.svc, Cluster: readyCluster{}, NodeID: "n1", Now: n.mem.Now,
	})
	h := api.Handler()
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// fixed is a server that always answers with one problem.
func fixed(t *testing.T, status int, code string, hits *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"type":"x","title":"t","status":%d,"code":%q,"detail":"d"}`, status, code)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, addrs []string, opts ...client.Option) *client.Client {
	t.Helper()
	opts = append([]client.Option{client.WithBackoff(time.Millisecond, 5*time.Millisecond)}, opts...)
	c, err := client.New(addrs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func claimReq(key, owner string) client.ClaimRequest {
	return client.ClaimRequest{Key: key, Tool: "payments.refund", Payload: json.RawMessage(`{"order":"ord_1","amount":100}`), Owner: owner}
}

// grantedNode is a node, a client of it without retries, and the grant
// of refund:ord_1 to agent-1.
func grantedNode(t *testing.T) (*node, *client.Client, *client.ClaimResponse) {
	t.Helper()
	n := newNode(t)
	c := newClient(t, []string{n.srv.URL}, client.WithRetries(0))
	g, err := c.Claim(context.Background(), claimReq("refund:ord_1", "agent-1"))
	if err != nil {
		t.Fatal(err)
	}
	return n, c, g
}

func TestHappyPath(t *testing.T) {
	n := newNode(t)
	c := newClient(t, []string{n.srv.URL})
	ctx := context.Background()

	g, err := c.Claim(ctx, claimReq("refund:ord_1", "agent-1"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Status != client.StatusGranted || !g.Created || g.FencingToken == 0 || g.ExecutionToken == "" || g.Owner != "agent-1" {
		t.Fatalf("claim = %+v", g)
	}
	if in := g.Intent; in.State != client.StateDeclared || in.LeaseDeadline != epoch.Add(30*time.Second) || !in.CreatedAt.Equal(epoch) {
		t.Errorf("intent = %+v", in)
	}
	again, err := c.Claim(ctx, claimReq("refund:ord_1", "agent-1"))
	if err != nil || again.Created || again.Status != client.StatusGranted || again.FencingToken != g.FencingToken {
		t.Fatalf("same owner again = %+v, %v", again, err)
	}

	r, err := c.Renew(ctx, client.RenewRequest{Key: "refund:ord_1", Owner: "agent-1", FencingToken: g.FencingToken, Lease: time.Minute})
	if err != nil || r.Intent.LeaseDeadline != epoch.Add(time.Minute) {
		t.Fatalf("renew = %+v, %v", r, err)
	}
	done, err := c.Complete(ctx, client.CompleteRequest{Key: "refund:ord_1", Owner: "agent-1", FencingToken: g.FencingToken,
		Outcome: client.OutcomeExecuted, Result: json.RawMessage(`{"refund_id":"re_1"}`)})
	if err != nil || done.Status != client.StatusOK || done.Intent.State != client.StateExecuted {
		t.Fatalf("complete = %+v, %v", done, err)
	}
	if _, err := c.Commit(ctx, client.CommitRequest{Key: "refund:ord_1", Owner: "agent-1"}); err != nil {
		t.Fatal(err)
	}

	dup, err := c.Claim(ctx, claimReq("refund:ord_1", ""))
	if err != nil || dup.Status != client.StatusDuplicate || string(dup.Intent.Result) != `{"refund_id":"re_1"}` || dup.Owner == "" {
		t.Fatalf("duplicate = %+v, %v", dup, err)
	}

	in, err := c.Get(ctx, "refund:ord_1", client.GetOptions{})
	if err != nil || in.State != client.StateCommitted || in.Duplicates != 1 {
		t.Fatalf("get = %+v, %v", in, err)
	}
	if in, err := c.Get(ctx, "refund:ord_1", client.GetOptions{Stale: true}); err != nil || in.Key != "refund:ord_1" {
		t.Fatalf("stale get = %+v, %v", in, err)
	}

	page, err := c.List(ctx, client.ListOptions{Prefix: "refund:", State: client.StateCommitted, Limit: 10})
	if err != nil || len(page.Intents) != 1 || page.NextCursor != "" {
		t.Fatalf("list = %+v, %v", page, err)
	}
	trail, err := c.Audit(ctx, "refund:ord_1")
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, ev := range trail.Events {
		ops = append(ops, ev.Op+"/"+ev.Status)
	}
	if got := strings.Join(ops, ","); got != "claim/granted,claim/granted,renew/ok,complete/ok,commit/ok,claim/duplicate" {
		t.Errorf("audit = %s", got)
	}
	st, err := c.Cluster(ctx)
	if err != nil || st.NodeID != "n1" || !st.Ready || len(st.Nodes) != 1 {
		t.Fatalf("cluster = %+v, %v", st, err)
	}
	h, err := c.Health(ctx, "")
	if err != nil || !h.Live || !h.Ready {
		t.Fatalf("health = %+v, %v", h, err)
	}
}

func TestEscapedKeys(t *testing.T) {
	n := newNode(t)
	c := newClient(t, []string{n.srv.URL})
	ctx := context.Background()
	for _, key := range []string{"a/b", "50%", "é x", "q?x=1", "a%2Fb"} {
		g, err := c.Claim(ctx, claimReq(key, "o"))
		if err != nil {
			t.Fatalf("claim %q: %v", key, err)
		}
		if _, err := c.Complete(ctx, client.CompleteRequest{Key: key, Owner: "o", FencingToken: g.FencingToken, Outcome: client.OutcomeFailed}); err != nil {
			t.Fatalf("complete %q: %v", key, err)
		}
		in, err := c.Get(ctx, key, client.GetOptions{})
		if err != nil || in.Key != key || in.State != client.StateFailed {
			t.Fatalf("get %q = %+v, %v", key, in, err)
		}
		if tr, err := c.Audit(ctx, key); err != nil || tr.Key != key {
			t.Fatalf("audit %q = %+v, %v", key, tr, err)
		}
	}
}

// sentinels are every sentinel error, to check a problem matches only its
// own.
var sentinels = map[string]error{
	"ErrInFlight": client.ErrInFlight, "ErrInDoubt": client.ErrInDoubt, "ErrDivergent": client.ErrDivergent,
	"ErrFenced": client.ErrFenced, "ErrRejected": client.ErrRejected, "ErrNotFound": client.ErrNotFound,
	"ErrInvalidState": client.ErrInvalidState, "ErrBadRequest": client.ErrBadRequest,
	"ErrOutcomeUnknown": client.ErrOutcomeUnknown, "ErrNoLeader": client.ErrNoLeader, "ErrUnavailable": client.ErrUnavailable,
	"ErrPendingApproval": client.ErrPendingApproval, "ErrEffectUnknown": client.ErrEffectUnknown,
	"ErrRateLimited": client.ErrRateLimited, "ErrBadSnapshot": client.ErrBadSnapshot, "ErrNotEmpty": client.ErrNotEmpty,
	"ErrNamespaceFull": client.ErrNamespaceFull, "ErrLedgerFull": client.ErrLedgerFull,
}

func requireOnly(t *testing.T, err error, want string) *client.Problem {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", want)
	}
	for name, s := range sentinels {
		if got := errors.Is(err, s); got != (name == want) {
			t.Errorf("errors.Is(%v, %s) = %v", err, name, got)
		}
	}
	var p *client.Problem
	if !errors.As(err, &p) {
		t.Fatalf("%v is not a *Problem", err)
	}
	return p
}

func TestRefusalsMatchSentinels(t *testing.T) {
	n := newNode(t)
	c := newClient(t, []string{n.srv.URL}, client.WithRetries(0))
	ctx := context.Background()
	g, err := c.Claim(ctx, claimReq("k", "agent-1"))
	if err != nil {
		t.Fatal(err)
	}

	_, err = c.Claim(ctx, claimReq("k", "agent-2"))
	p := requireOnly(t, err, "ErrInFlight")
	if p.Status != http.StatusConflict || p.RetryAfter != time.Second || p.Intent == nil || p.Intent.Owner != "agent-1" {
		t.Errorf("in_flight problem = %+v", p)
	}

	div := claimReq("k", "agent-1")
	div.Payload = json.RawMessage(`{"order":"ord_2"}`)
	_, err = c.Claim(ctx, div)
	p = requireOnly(t, err, "ErrDivergent")
	if p.Fingerprint != g.Intent.Fingerprint || p.RequestFingerprint == "" || p.RequestFingerprint == p.Fingerprint {
		t.Errorf("divergent problem = %+v", p)
	}

	_, err = c.Complete(ctx, client.CompleteRequest{Key: "k", Owner: "agent-1", FencingToken: g.FencingToken + 1, Outcome: client.OutcomeExecuted})
	requireOnly(t, err, "ErrFenced")
	_, err = c.Commit(ctx, client.CommitRequest{Key: "k", Owner: "agent-1"})
	requireOnly(t, err, "ErrInvalidState")
	_, err = c.Approve(ctx, client.DecisionRequest{Key: "k", Actor: "ops"})
	requireOnly(t, err, "ErrInvalidState")
	_, err = c.Get(ctx, "nope", client.GetOptions{})
	requireOnly(t, err, "ErrNotFound")
	_, err = c.Claim(ctx, client.ClaimRequest{Key: "x", Owner: "o"})
	if p := requireOnly(t, err, "ErrBadRequest"); p.Status != http.StatusBadRequest || p.Field != "tool" {
		t.Errorf("bad request problem = %+v", p)
	}
	_, err = c.Claim(ctx, client.ClaimRequest{Key: "x", Tool: "t", Owner: "o", Lease: time.Millisecond})
	if p := requireOnly(t, err, "ErrBadRequest"); p.Status != http.StatusUnprocessableEntity {
		t.Errorf("unprocessable problem = %+v", p)
	}

	n.mem.Advance(time.Minute)
	_, err = c.Claim(ctx, claimReq("k", "agent-2"))
	requireOnly(t, err, "ErrInDoubt")

	for _, tc := range []struct {
		err  error
		want string
	}{
		{ledger.ErrOutcomeUnknown, "ErrOutcomeUnknown"},
		{ledger.ErrNoLeader, "ErrNoLeader"},
		{ledger.ErrShuttingDown, "ErrUnavailable"},
	} {
		n.mem.FailNext(tc.err)
		_, err = c.Claim(ctx, claimReq("k2", "o"))
		if p := requireOnly(t, err, tc.want); p.Status != http.StatusServiceUnavailable || p.RetryAfter != time.Second {
			t.Errorf("%s problem = %+v", tc.want, p)
		}
	}

	var hits atomic.Int64
	rejected := fixed(t, http.StatusForbidden, "rejected", &hits)
	_, err = newClient(t, []string{rejected.URL}, client.WithDiscovery(false)).Claim(ctx, claimReq("k", "o"))
	requireOnly(t, err, "ErrRejected")
	if hits.Load() != 1 {
		t.Errorf("a 403 was sent %d times", hits.Load())
	}
}

func TestRetryRotatesPastUnavailableServer(t *testing.T) {
	var badHits atomic.Int64
	bad := fixed(t, http.StatusServiceUnavailable, "no_leader", &badHits)
	good := newNode(t)
	// Without discovery: the configured order, moving past a node that
	// cannot answer (TestDiscovery* cover the leader-first order).
	c := newClient(t, []string{bad.URL, good.srv.URL}, client.WithDiscovery(false))
	ctx := context.Background()

	g, err := c.Claim(ctx, claimReq("k", "o"))
	if err != nil || !g.Created {
		t.Fatalf("claim = %+v, %v", g, err)
	}
	if badHits.Load() != 1 || good.hits.Load() != 1 {
		t.Errorf("hits: bad %d good %d, want 1 and 1", badHits.Load(), good.hits.Load())
	}
	// The client now prefers the node that answered.
	if _, err := c.Get(ctx, "k", client.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if badHits.Load() != 1 {
		t.Errorf("bad server hit again: %d", badHits.Load())
	}
}

func TestRetryGivesUpAfterRetries(t *testing.T) {
	var hits atomic.Int64
	bad := fixed(t, http.StatusServiceUnavailable, "unavailable", &hits)
	c := newClient(t, []string{bad.URL}, client.WithRetries(2), client.WithDiscovery(false))
	_, err := c.Get(context.Background(), "k", client.GetOptions{})
	requireOnly(t, err, "ErrUnavailable")
	if hits.Load() != 3 {
		t.Errorf("hits = %d, want 3 (1 + 2 retries)", hits.Load())
	}
}

// A 429 is definite (nothing was written) and names a wait: the client
// waits and sends the same call to the same node again. The node is up,
// so 429s do not use up the retries meant for a cluster that cannot
// answer: the client waits them out for up to the max wait, then gives up
// with ErrRateLimited.
func TestRetryAfterRateLimit(t *testing.T) {
	good := newNode(t)
	var limited atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if limited.Add(1) <= 2 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"type":"x","title":"t","status":429,"code":"rate_limited","detail":"d","retry_after_ms":2}`)
			return
		}
		good.srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	other := newNode(t) // never needed: a rate-limited node is not skipped
	c := newClient(t, []string{srv.URL, other.srv.URL}, client.WithDiscovery(false), client.WithRetries(3))
	if g, err := c.Claim(context.Background(), claimReq("k", "o")); err != nil || !g.Created {
		t.Fatalf("claim = %+v, %v", g, err)
	}
	if limited.Load() != 3 || other.hits.Load() != 0 {
		t.Errorf("hits: limited node %d (want 3), other %d (want 0)", limited.Load(), other.hits.Load())
	}

	var hits atomic.Int64
	always := fixed(t, http.StatusTooManyRequests, "rate_limited", &hits)
	_, err := newClient(t, []string{always.URL}, client.WithDiscovery(false), client.WithRetries(2),
		client.WithMaxWait(300*time.Millisecond)).Claim(context.Background(), claimReq("k", "o"))
	requireOnly(t, err, "ErrRateLimited")
	if hits.Load() <= 3 {
		t.Errorf("a 429 was sent %d times: the client stopped after its 2 retries instead of waiting the limit out", hits.Load())
	}
}

func TestNoRetryOnConflict(t *testing.T) {
	n := newNode(t)
	c := newClient(t, []string{n.srv.URL, n.srv.URL})
	ctx := context.Background()
	if _, err := c.Claim(ctx, claimReq("k", "agent-1")); err != nil {
		t.Fatal(err)
	}
	before := n.hits.Load()
	_, err := c.Claim(ctx, claimReq("k", "agent-2"))
	if !errors.Is(err, client.ErrInFlight) {
		t.Fatalf("err = %v", err)
	}
	if got := n.hits.Load() - before; got != 1 {
		t.Errorf("a 409 was sent %d times", got)
	}
}

// lossyProxy applies the first write to the node behind it and then drops
// the connection: the answer is lost after the effect.
func lossyProxy(t *testing.T, next http.Handler) *httptest.Server {
	t.Helper()
	var dropped atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || dropped.Swap(true) {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(httptest.NewRecorder(), r)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLostAnswerIsRetriedToTheSameGrant(t *testing.T) {
	n := newNode(t)
	proxy := lossyProxy(t, n.srv.Config.Handler)
	c := newClient(t, []string{proxy.URL})
	g, err := c.Claim(context.Background(), claimReq("k", "o"))
	if err != nil {
		t.Fatal(err)
	}
	// The first (lost) attempt created the grant; the retry got it back.
	if g.Status != client.StatusGranted || g.Created || g.FencingToken == 0 {
		t.Errorf("claim = %+v", g)
	}
}

func TestNetworkErrors(t *testing.T) {
	n := newNode(t)
	proxy := lossyProxy(t, n.srv.Config.Handler)
	c := newClient(t, []string{proxy.URL}, client.WithRetries(0))
	_, err := c.Claim(context.Background(), claimReq("k", "o"))
	if !errors.Is(err, client.ErrOutcomeUnknown) || errors.Is(err, client.ErrUnavailable) {
		t.Errorf("lost answer to a write: %v, want ErrOutcomeUnknown", err)
	}

	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	c = newClient(t, []string{dead.URL}, client.WithRetries(1))
	_, err = c.Claim(context.Background(), claimReq("k", "o"))
	if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrOutcomeUnknown) {
		t.Errorf("write never sent: %v, want ErrUnavailable", err)
	}
	_, err = c.Get(context.Background(), "k", client.GetOptions{})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("read: %v, want ErrUnavailable", err)
	}
}

func TestOutcomeStaysUnknownAcrossRetries(t *testing.T) {
	// One attempt's outcome is unknown; later attempts find no leader. The
	// call's outcome is still unknown.
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := "no_leader"
		if hits.Add(1) == 1 {
			code = "outcome_unknown"
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"title":"t","status":503,"code":%q}`, code)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, []string{srv.URL}, client.WithRetries(2), client.WithDiscovery(false))
	_, err := c.Claim(context.Background(), claimReq("k", "o"))
	if !errors.Is(err, client.ErrOutcomeUnknown) || !errors.Is(err, client.ErrNoLeader) {
		t.Errorf("err = %v, want ErrOutcomeUnknown wrapping the last no_leader", err)
	}
}

func TestContextDeadlineRespected(t *testing.T) {
	release := make(chan struct{})
	var received atomic.Bool
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		received.Store(true)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) }) // runs first
	c := newClient(t, []string{hang.URL}, client.WithRetries(100))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Claim(ctx, claimReq("k", "o"))
	switch {
	case !errors.Is(err, context.DeadlineExceeded):
		t.Errorf("err = %v, want DeadlineExceeded", err)
	case received.Load() && !errors.Is(err, client.ErrOutcomeUnknown):
		t.Errorf("err = %v, want ErrOutcomeUnknown: the server received the write", err)
	case !received.Load() && !errors.Is(err, client.ErrOutcomeUnknown) && !errors.Is(err, client.ErrUnavailable):
		// On a loaded machine the deadline may pass before the request is
		// written: then nothing was sent and the call is unavailable.
		t.Errorf("err = %v, want ErrOutcomeUnknown or, if nothing was sent, ErrUnavailable", err)
	}

	// A server that keeps asking for a retry does not hold the caller past
	// its deadline either.
	var hits atomic.Int64
	busy := fixed(t, http.StatusServiceUnavailable, "no_leader", &hits)
	c = newClient(t, []string{busy.URL}, client.WithRetries(1<<20), client.WithBackoff(time.Millisecond, time.Hour))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	_, err = c.Get(ctx2, "k", client.GetOptions{})
	// On a loaded machine the deadline may fall inside the first round
	// trip, before any no_leader answer: then the call is unavailable.
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrNoLeader) && !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("err = %v, want DeadlineExceeded after no_leader (or unavailable)", err)
	}
}

func TestHealthNotReady(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/healthz" {
			fmt.Fprint(w, `{"status":"ok"}`)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"title":"The node is not ready","status":503,"code":"not_ready","detail":"no leader"}`)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, []string{"127.0.0.1:1"})
	h, err := c.Health(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil || !h.Live || h.Ready || h.Detail != "no leader" {
		t.Fatalf("health = %+v, %v", h, err)
	}
	if hits.Load() != 2 {
		t.Errorf("health made %d requests, want 2 (no retries)", hits.Load())
	}
}

func TestNewAddresses(t *testing.T) {
	c, err := client.New([]string{"127.0.0.1:8101, http://h:8102/", "https://x:1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Addrs(), " "); got != "http://127.0.0.1:8101 http://h:8102 https://x:1" {
		t.Errorf("addrs = %s", got)
	}
	for _, bad := range [][]string{nil, {""}, {"ftp://x:1"}, {"http://"}} {
		if _, err := client.New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

func TestProblemJSON(t *testing.T) {
	p := &client.Problem{Status: 409, Code: "in_flight", Title: "t", RetryAfter: 2 * time.Second}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"title":"t","status":409,"code":"in_flight","retry_after_ms":2000}` {
		t.Errorf("problem JSON = %s", data)
	}
}
