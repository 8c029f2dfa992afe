package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intentledger/intentd/clusterview"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/peerauth"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
	"github.com/intentledger/intentd/token"
)

// epoch is the in-memory ledger's starting clock.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

// fakeCluster is a settable ClusterInfo.
type fakeCluster struct {
	mu sync.Mutex
	st clusterview.Status
}

func (f *fakeCluster) Status() clusterview.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

func (f *fakeCluster) setReady(ready bool) {
	f.mu.Lock()
	f.st.Ready = ready
	f.mu.Unlock()
}

// flakyReads is the in-memory ledger with reads that fail while fail is
// set (proposals still work).
type flakyReads struct {
	*ledgertest.Memory
	fail atomic.Bool
}

func (f *flakyReads) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	if f.fail.Load() {
		return errors.New("reads are failing")
	}
	return f.Memory.Read(ctx, c, fn)
}

// testEnv is one API node over an in-memory ledger.
type testEnv struct {
	mem     *ledgertest.Memory
	cluster *fakeCluster
	reads   *flakyReads
	reg     *prometheus.Registry
	api     *Server
	srv     *httptest.Server
	// forwardedBy receives the HeaderForwardedBy of each request that
	// carried one.
	forwardedBy chan string
}

type envOption func(*Config)

func newEnv(t testing.TB, opts ...envOption) *testEnv {
	t.Helper()
	mem := ledgertest.NewMemory(epoch)
	fr := &flakyReads{Memory: mem}
	e := newEnvOver(t, mem, fr, opts...)
	e.reads = fr
	return e
}

// newEnvWith is newEnv with the env's ledger.Service set up by lcfg.
func newEnvWith(t testing.TB, lcfg ledger.Config, opts ...envOption) *testEnv {
	t.Helper()
	mem := ledgertest.NewMemory(epoch)
	fr := &flakyReads{Memory: mem}
	svc := ledgertest.NewService(t, fr, lcfg)
	e := newEnvOver(t, mem, fr, append(opts, func(c *Config) { c.Service = svc })...)
	e.reads = fr
	return e
}

// newEnvOver serves a Service over r; mem is the ledger behind it (for
// Proposed counts and the clock).
func newEnvOver(t testing.TB, mem *ledgertest.Memory, r ledger.Replicator, opts ...envOption) *testEnv {
	t.Helper()
	e := &testEnv{
		mem: mem,
		cluster: &fakeCluster{st: clusterview.Status{NodeID: "n1", State: "leader", LeaderID: "n1", Ready: true,
			Nodes: []clusterview.MemberStatus{{ID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8101", Suffrage: "voter", Gossip: "alive", Leader: true}}}},
		reg:         prometheus.NewRegistry(),
		forwardedBy: make(chan string, 100),
	}
	cfg := Config{
		Service: ledgertest.NewService(t, r, ledger.Config{}), Cluster: e.cluster, Registry: e.reg,
		NodeID: "n1", Now: mem.Now,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.PeerAuth == nil {
		// Every test node shares one cluster secret, as real nodes share
		// the gossip key.
		cfg.PeerAuth = peerauth.New(cfg.NodeID, testClusterSecret, nil)
	}
	// The cluster's first signing key, as the first grant would add it,
	// so tests count only their own writes.
	mem.Seed(&fsm.AddSigningKey{Key: fsm.SigningKey{ID: "test-key", Seed: bytes.Repeat([]byte{1}, 32)}})
	e.api = New(cfg)
	h := e.api.Handler()
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Values(HeaderForwardedBy); len(v) > 0 {
			select {
			case e.forwardedBy <- v[0]:
			default:
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// proposed counts the commands the server proposed.
func proposed(mem *ledgertest.Memory) int { return mem.Proposed() }

// reply is a buffered HTTP response.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

// do sends a request to base+path; path must already be escaped.
func do(t testing.TB, base, method, path string, body any, header ...string) reply {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("marshal body: %v", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, rd)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

func (e *testEnv) do(t testing.TB, method, path string, body any, header ...string) reply {
	t.Helper()
	return do(t, e.srv.URL, method, path, body, header...)
}

// keyPath is the escaped path of an intent (and an optional action).
func keyPath(key string, action ...string) string {
	p := "/v1/intents/" + url.PathEscape(key)
	for _, a := range action {
		p += "/" + a
	}
	return p
}

// claimJSON is a claim body.
type claimJSON struct {
	Key     string          `json:"key,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Owner   string          `json:"owner,omitempty"`
	Policy  string          `json:"policy,omitempty"`
	LeaseMS int64           `json:"lease_ms,omitempty"`
}

func newClaim(key, owner string) claimJSON {
	return claimJSON{Key: key, Tool: "payments.refund", Payload: json.RawMessage(`{"order":"ord_1","amount":100}`), Owner: owner}
}

// wireIntent is the intent view as a client decodes it.
type wireIntent struct {
	Key           string          `json:"key"`
	Namespace     string          `json:"namespace"`
	Tool          string          `json:"tool"`
	State         string          `json:"state"`
	Owner         string          `json:"owner"`
	FencingToken  uint64          `json:"fencing_token"`
	Generation    uint64          `json:"generation"`
	Fingerprint   string          `json:"fingerprint"`
	Payload       json.RawMessage `json:"payload"`
	Result        json.RawMessage `json:"result"`
	LeaseMS       int64           `json:"lease_ms"`
	LeaseDeadline string          `json:"lease_deadline"`
	CreatedAt     string          `json:"created_at"`
	UpdatedAt     string          `json:"updated_at"`
	Duplicates    uint64          `json:"duplicates"`
	Divergent     uint64          `json:"divergent"`
	Version       uint64          `json:"version"`

	Policy            string `json:"policy"`
	PolicyVersion     uint64 `json:"policy_version"`
	ApprovalsRequired int    `json:"approvals_required"`
	Approvals         []struct {
		Actor  string `json:"actor"`
		At     string `json:"at"`
		Reason string `json:"reason"`
	} `json:"approvals"`
	TokenUsed bool   `json:"token_used"`
	Principal string `json:"principal"`
}

type wireAnswer struct {
	Status         string      `json:"status"`
	FencingToken   uint64      `json:"fencing_token"`
	ExecutionToken string      `json:"execution_token"`
	Intent         *wireIntent `json:"intent"`
}

type wireProblem struct {
	Type               string      `json:"type"`
	Title              string      `json:"title"`
	Status             int         `json:"status"`
	Detail             string      `json:"detail"`
	Code               string      `json:"code"`
	Field              string      `json:"field"`
	Intent             *wireIntent `json:"intent"`
	Fingerprint        string      `json:"fingerprint"`
	RequestFingerprint string      `json:"request_fingerprint"`
	RetryAfterMS       int64       `json:"retry_after_ms"`
}

// answer decodes a success reply, failing unless its status is want.
func answer(t testing.TB, r reply, want int) wireAnswer {
	t.Helper()
	if r.status != want {
		t.Fatalf("status = %s, want %d", r, want)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var a wireAnswer
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return a
}

// intentAnswer decodes a GET of one intent: the intent itself, unwrapped.
func intentAnswer(t testing.TB, r reply) *wireIntent {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status = %s, want 200", r)
	}
	var in wireIntent
	if err := json.Unmarshal(r.body, &in); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	if in.Key == "" || in.State == "" {
		t.Fatalf("GET answered %s, want the bare intent", r.body)
	}
	return &in
}

// problemOf decodes a problem reply and checks the fields every problem
// has, failing unless its status and code are the wanted ones.
func problemOf(t testing.TB, r reply, wantStatus int, wantCode string) wireProblem {
	t.Helper()
	if r.status != wantStatus {
		t.Fatalf("status = %s, want %d %s", r, wantStatus, wantCode)
	}
	if ct := r.header.Get("Content-Type"); ct != ContentTypeProblem {
		t.Fatalf("Content-Type = %q, want %s (body %s)", ct, ContentTypeProblem, r.body)
	}
	var p wireProblem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode problem %s: %v", r.body, err)
	}
	if p.Code != wantCode || p.Status != wantStatus {
		t.Fatalf("problem = %s, want %d %s", r.body, wantStatus, wantCode)
	}
	if p.Type != ProblemTypeBase+wantCode {
		t.Errorf("type = %q, want %q", p.Type, ProblemTypeBase+wantCode)
	}
	if p.Title == "" {
		t.Errorf("problem %s has no title", r.body)
	}
	return p
}

// claimOK claims key for owner and returns the grant.
func (e *testEnv) claimOK(t testing.TB, key, owner string) wireAnswer {
	t.Helper()
	return answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim(key, owner)), http.StatusCreated)
}

// testClusterSecret is the shared secret of the test nodes' cluster.
var testClusterSecret = []byte("0123456789abcdef0123456789abcdef")

func withNodeID(id string) envOption { return func(c *Config) { c.NodeID = id } }

// hostPort is the host:port a test server listens on.
func (e *testEnv) hostPort() string { return e.srv.Listener.Addr().String() }

// verifyOffline checks an execution token against the node's JWKS, the way
// a tool does without asking the ledger, and returns its claims.
func (e *testEnv) verifyOffline(t testing.TB, tok string) token.Claims {
	t.Helper()
	r := e.do(t, http.MethodGet, "/v1/keys", nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/keys = %s", r)
	}
	lookup, err := token.LookupFromJWKS(r.body)
	if err != nil {
		t.Fatalf("JWKS %s: %v", r.body, err)
	}
	claims, err := token.Verify(tok, lookup, e.mem.Now())
	if err != nil {
		t.Fatalf("token %q does not verify offline: %v", tok, err)
	}
	return claims
}

// listWire is the body of GET /v1/intents.
type listWire struct {
	Intents []wireIntent `json:"intents"`
}
