package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/peerauth"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// followerReplicator is a node that is not the leader: writes and
// linearizable reads fail with a NotLeaderError naming the leader; stale
// reads serve its own (empty) replica.
type followerReplicator struct {
	local *ledgertest.Memory

	mu                   sync.Mutex
	leaderID, leaderHTTP string
}

func (f *followerReplicator) setLeader(id, httpAddr string) {
	f.mu.Lock()
	f.leaderID, f.leaderHTTP = id, httpAddr
	f.mu.Unlock()
}

func (f *followerReplicator) notLeader() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &ledger.NotLeaderError{LeaderID: f.leaderID, LeaderHTTP: f.leaderHTTP}
}

func (f *followerReplicator) Propose(context.Context, fsm.Command) (*fsm.Result, error) {
	return nil, f.notLeader()
}

func (f *followerReplicator) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	if c == ledger.Stale {
		return f.local.Read(ctx, c, fn)
	}
	return f.notLeader()
}

// WaitApplied waits on the follower's own replica.
func (f *followerReplicator) WaitApplied(ctx context.Context, index uint64) error {
	return f.local.WaitApplied(ctx, index)
}

// SubscribeChanges reports the changes of the follower's own replica.
func (f *followerReplicator) SubscribeChanges(sink ledger.ChangeSink) func() {
	return f.local.SubscribeChanges(sink)
}

func newFollower(t *testing.T, id string, leader *testEnv) (*testEnv, *followerReplicator) {
	t.Helper()
	mem := ledgertest.NewMemory(epoch)
	rep := &followerReplicator{local: mem}
	if leader != nil {
		rep.setLeader("n1", leader.hostPort())
	}
	return newEnvOver(t, mem, rep, withNodeID(id)), rep
}

func TestFollowerForwardsWritesAndLinearizableReads(t *testing.T) {
	leader := newEnv(t)
	follower, _ := newFollower(t, "n2", leader)

	g := answer(t, follower.do(t, http.MethodPost, "/v1/intents", newClaim("a/b", "agent-1")), http.StatusCreated)
	if g.Intent.Key != "a/b" || g.ExecutionToken == "" {
		t.Fatalf("forwarded claim = %+v", g)
	}
	if by := <-leader.forwardedBy; by != "n2" {
		t.Errorf("leader saw %s %q, want n2", HeaderForwardedBy, by)
	}
	if proposed(leader.mem) != 1 || proposed(follower.mem) != 0 {
		t.Errorf("proposals: leader %d follower %d, want 1 and 0", proposed(leader.mem), proposed(follower.mem))
	}

	// Refusals come back verbatim, headers included.
	r := follower.do(t, http.MethodPost, "/v1/intents", newClaim("a/b", "agent-2"))
	problemOf(t, r, http.StatusConflict, "in_flight")
	if r.header.Get("Retry-After") != "1" {
		t.Errorf("forwarded Retry-After = %q, want 1", r.header.Get("Retry-After"))
	}

	c := answer(t, follower.do(t, http.MethodPost, keyPath("a/b", "complete"), map[string]any{
		"owner": "agent-1", "fencing_token": g.FencingToken, "outcome": "executed"}), http.StatusOK)
	if c.Intent.State != "executed" {
		t.Errorf("forwarded complete = %+v", c.Intent)
	}

	// A linearizable read is forwarded; a stale read serves the follower's
	// own replica, which in this test never catches up.
	got := intentAnswer(t, follower.do(t, http.MethodGet, keyPath("a/b"), nil))
	if got.Key != "a/b" || got.State != "executed" {
		t.Errorf("forwarded get = %+v", got)
	}
	problemOf(t, follower.do(t, http.MethodGet, keyPath("a/b")+"?consistency=stale", nil), http.StatusNotFound, "not_found")
	r = follower.do(t, http.MethodGet, "/v1/intents?prefix=a", nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"key":"a/b"`) {
		t.Errorf("forwarded list = %s", r)
	}

	// Bad input is refused by the follower itself.
	problemOf(t, follower.do(t, http.MethodPost, "/v1/intents", `{"key":`), http.StatusBadRequest, CodeBadRequest)

	m := string(follower.do(t, http.MethodGet, "/metrics", nil).body)
	if !strings.Contains(m, "intentd_http_forwarded_total 5") {
		t.Errorf("follower metrics lack 5 forwards:\n%s", m)
	}
}

func TestForwardLoopGuard(t *testing.T) {
	a, repA := newFollower(t, "a", nil)
	b, _ := newFollower(t, "b", a)
	repA.setLeader("b", b.hostPort())

	r := a.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o"))
	problemOf(t, r, http.StatusServiceUnavailable, CodeNotLeader)
	if r.header.Get("Retry-After") == "" {
		t.Error("not_leader without Retry-After")
	}
	if by := <-b.forwardedBy; by != "a" {
		t.Errorf("b saw %s %q, want a", HeaderForwardedBy, by)
	}
	if len(a.forwardedBy) != 0 {
		t.Error("b forwarded the request back to a")
	}

	// A request that says it was forwarded is never forwarded again, even
	// when no node signed it (its header is not trusted for anything else).
	problemOf(t, b.do(t, http.MethodGet, keyPath("k"), nil, HeaderForwardedBy, "x"), http.StatusServiceUnavailable, CodeNotLeader)
	if len(a.forwardedBy) != 0 {
		t.Error("b forwarded a request that claimed to be forwarded already")
	}
}

// Nodes that cannot sign (no shared secret: development) still never
// forward a request back and forth.
func TestForwardLoopGuardWithoutPeerAuth(t *testing.T) {
	unsigned := func(c *Config) { c.PeerAuth = peerauth.New(c.NodeID, nil, nil) }
	mem := ledgertest.NewMemory(epoch)
	repA := &followerReplicator{local: mem}
	a := newEnvOver(t, mem, repA, withNodeID("a"), unsigned)
	memB := ledgertest.NewMemory(epoch)
	repB := &followerReplicator{local: memB}
	b := newEnvOver(t, memB, repB, withNodeID("b"), unsigned)
	repA.setLeader("b", b.hostPort())
	repB.setLeader("a", a.hostPort())
	problemOf(t, a.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o")), http.StatusServiceUnavailable, CodeNotLeader)
	if by := <-b.forwardedBy; by != "a" {
		t.Errorf("b saw %s %q, want a", HeaderForwardedBy, by)
	}
	if len(a.forwardedBy) != 0 {
		t.Error("b forwarded the request back to a")
	}
}

// Forwarding headers count only when a node of the cluster signed them: a
// client that sends X-Intentd-Forwarded-By to skip the per-key limit, or
// X-Forwarded-For to pass for another client, gets neither.
func TestClientForwardHeadersAreNotTrusted(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.RateLimits = &RateLimits{PerKey: 0.001, KeyBurst: 1, PerClient: 0.001, ClientBurst: 3}
	})
	forged := []string{HeaderForwardedBy, "n9", "X-Forwarded-For", "203.0.113.7"}
	problemOf(t, e.do(t, http.MethodGet, keyPath("k"), nil, forged...), http.StatusNotFound, "not_found")
	r := e.do(t, http.MethodGet, keyPath("k"), nil, forged...)
	problemOf(t, r, http.StatusTooManyRequests, "rate_limited")
	if !strings.Contains(string(r.body), "key") {
		t.Errorf("the forged header skipped the per-key limit: %s", r)
	}
	// The per-client bucket is the real address's, whatever X-Forwarded-For says.
	problemOf(t, e.do(t, http.MethodGet, keyPath("other"), nil, "X-Forwarded-For", "198.51.100.1"), http.StatusNotFound, "not_found")
	problemOf(t, e.do(t, http.MethodGet, keyPath("third"), nil, "X-Forwarded-For", "198.51.100.2"), http.StatusTooManyRequests, "rate_limited")
	m := string(e.do(t, http.MethodGet, "/metrics", nil).body)
	if !strings.Contains(m, "intentd_http_untrusted_forward_headers_total 2") {
		t.Errorf("untrusted forward headers not counted:\n%s", m)
	}

	// A signature from another cluster (another secret) is not trusted either.
	other := peerauth.New("n9", []byte("another cluster's secret, 32 b!!"), nil)
	req := httptestRequest(t, e, http.MethodGet, keyPath("k"))
	other.Sign(req)
	if e.api.peers.Verify(req) {
		t.Error("a request signed with another cluster's secret was trusted")
	}
	mine := peerauth.New("n2", testClusterSecret, nil)
	mine.Sign(req)
	if !e.api.peers.Verify(req) {
		t.Error("a request signed by a node of the cluster was not trusted")
	}
}

func httptestRequest(t *testing.T, e *testEnv, method, path string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestForwardWithoutLeader(t *testing.T) {
	f, rep := newFollower(t, "n2", nil)
	rep.setLeader("n1", "")
	r := f.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o"))
	problemOf(t, r, http.StatusServiceUnavailable, CodeNoLeader)
	if r.header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After = %q", r.header.Get("Retry-After"))
	}
}

func TestForwardTransportFailure(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	addr := dead.Listener.Addr().String()
	dead.Close()

	f, rep := newFollower(t, "n2", nil)
	rep.setLeader("n1", addr)
	problemOf(t, f.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o")), http.StatusServiceUnavailable, CodeOutcomeUnknown)
	problemOf(t, f.do(t, http.MethodGet, keyPath("k"), nil), http.StatusServiceUnavailable, CodeUnavailable)
}
