package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// postUntilDefinite and putUntilDefinite send a write until the answer
// is definite, and stop the test if none comes.
func postUntilDefinite(t *testing.T, addrs []string, path string, body any) nodetest.Answer {
	t.Helper()
	return mustDefinite(t, http.MethodPost, addrs, path, body)
}

func putUntilDefinite(t *testing.T, addrs []string, path string, body any) nodetest.Answer {
	t.Helper()
	return mustDefinite(t, http.MethodPut, addrs, path, body)
}

func mustDefinite(t *testing.T, method string, addrs []string, path string, body any) nodetest.Answer {
	t.Helper()
	a, ok := nodetest.UntilDefinite(method, addrs, 0, path, body)
	if !ok {
		t.Fatalf("%s %s: no definite answer", method, path)
	}
	return a
}

// TestGateSurvivesFailover: a policy, an approval and a spent execution
// token recorded under one leader are honoured by the next: the approved
// intent is granted without approving again, its token verifies once on
// the new leader's side, and a token verified before the failover is
// refused on another node after it.
func TestGateSurvivesFailover(t *testing.T) {
	tn := newTestNodes(t)
	tn.startN(3)
	leader := tn.leader()
	var others []string
	for _, m := range tn.mains {
		if m != leader {
			others = append(others, m.HTTPAddr())
		}
	}
	if a := putUntilDefinite(t, others, "/v1/policies/charges", map[string]any{
		"tools": []string{"test.*"}, "require_approval": true, "approvals_required": 2}); a.Code != http.StatusOK {
		t.Fatalf("put policy: %v", a)
	}
	claim := func(key string) nodetest.Answer {
		return postUntilDefinite(t, others, "/v1/intents", map[string]any{
			"key": key, "tool": "test.tool", "owner": "agent-1", "payload": map[string]any{"key": key}})
	}
	approve := func(key, actor string) nodetest.Answer {
		return postUntilDefinite(t, others, "/v1/intents/"+key+"/approve", map[string]any{"actor": actor})
	}

	// Before the failover: "approved" gets both approvals, "half" one;
	// "spent" is approved, granted and its token verified.
	for _, k := range []string{"approved", "half", "spent"} {
		if a := claim(k); a.Code != http.StatusAccepted {
			t.Fatalf("claim %s: %v", k, a)
		}
	}
	approve("approved", "alice")
	approve("approved", "bob")
	approve("half", "alice")
	approve("spent", "alice")
	approve("spent", "bob")
	g := claim("spent")
	if g.Code != http.StatusCreated {
		t.Fatalf("claim spent after approval: %v", g)
	}
	tok := g.Body["execution_token"].(string)
	if v := postUntilDefinite(t, others, "/v1/tokens/verify", map[string]any{"execution_token": tok}); v.Code != http.StatusOK {
		t.Fatalf("first verify: %v", v)
	}

	leader.Kill()
	delete(tn.mains, leader.cfg.ID)
	nodetest.WaitFor(t, 30*time.Second, "a new leader", func() bool { return tn.leader() != nil })
	tn.waitReady()

	// The approvals hold: granted at once; the half-approved one still
	// waits, and its first approver still counts once.
	ga := claim("approved")
	if ga.Code != http.StatusCreated {
		t.Fatalf("approved intent after failover: %v", ga)
	}
	if a := claim("half"); a.Code != http.StatusAccepted {
		t.Fatalf("half-approved intent after failover: %v", a)
	}
	if a := approve("half", "alice"); a.Code != http.StatusConflict || a.Body["code"] != "already_approved" {
		t.Fatalf("alice approving again after failover: %v", a)
	}
	if a := approve("half", "bob"); a.Code != http.StatusOK || nodetest.IntentOf(a.Body)["state"] != "approved" {
		t.Fatalf("second approval after failover: %v", a)
	}
	// The token spent before the failover is refused on every node.
	for _, addr := range others {
		if v := postUntilDefinite(t, []string{addr}, "/v1/tokens/verify", map[string]any{"execution_token": tok}); v.Code != http.StatusConflict || v.Body["code"] != "token_used" {
			t.Fatalf("verify on %s after failover: %v", addr, v)
		}
	}
	// The new grant's token (signed with the replicated key) verifies
	// once.
	tok2 := ga.Body["execution_token"].(string)
	if v := postUntilDefinite(t, others, "/v1/tokens/verify", map[string]any{"execution_token": tok2}); v.Code != http.StatusOK {
		t.Fatalf("verify a token granted after failover: %v", v)
	}
	if v := postUntilDefinite(t, others, "/v1/tokens/verify", map[string]any{"execution_token": tok2}); v.Code != http.StatusConflict {
		t.Fatalf("second verify of it: %v", v)
	}
}

// TestAuthRequiredByDefault: a node refuses to start without API keys
// unless told --auth=off, and with keys it refuses unauthenticated calls
// and serves authenticated ones.
func TestAuthRequiredByDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node: integration tier")
	}
	t.Parallel()
	start := func(apiKeys string) (*Node, error) {
		cfg := DefaultConfig()
		cfg.ID, cfg.DataDir = "solo", t.TempDir()
		cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
		cfg.BootstrapExpect = 1
		cfg.APIKeys = apiKeys
		cfg.Security.GossipKey = testGossipKey
		cfg.Logger = quietLogger()
		m := New(cfg)
		return m, m.Start(context.Background())
	}
	if m, err := start(""); err == nil || !strings.Contains(err.Error(), "no API keys") {
		m.Kill()
		t.Fatalf("start without keys: %v, want a refusal naming the fix", err)
	}
	key := "ik_test-key-with-enough-entropy-0123456789"
	m, err := start("agents:payments:agent:" + auth.HashKey(key))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Kill()
	body := map[string]any{"key": "k", "tool": "t", "owner": "o", "payload": map[string]any{}}
	if a, err := nodetest.Post(m.HTTPAddr(), "/v1/intents", body); err != nil || a.Code != http.StatusUnauthorized {
		t.Fatalf("claim without a key: %v %v", a, err)
	}
	nodetest.WaitFor(t, 30*time.Second, "an authenticated grant", func() bool {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, "http://"+m.HTTPAddr()+"/v1/intents", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode == http.StatusCreated && nodetest.IntentOf(out)["namespace"] == "payments"
	})
}

// TestGrantBindingHoldsThroughAFollower: with auth on, a follower forwards
// the caller's own key to the leader, so a second agent key of the
// namespace cannot complete the first key's grant through it (403
// not_grant_holder), while the first key completes it through the other
// follower.
func TestGrantBindingHoldsThroughAFollower(t *testing.T) {
	keyA, sumA, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyB, sumB, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secured := func(c *Config) {
		c.Auth = AuthRequired
		c.APIKeys = "agents-a:payments:agent:" + sumA + ",agents-b:payments:agent:" + sumB
		c.Security.GossipKey = testGossipKey
	}
	tn := newTestNodes(t)
	tn.startThree(secured)
	tn.waitReady()
	var followers []string
	for _, m := range tn.mains {
		if !m.Cluster().IsLeader() {
			followers = append(followers, m.HTTPAddr())
		}
	}
	if len(followers) != 2 {
		t.Fatalf("want 2 followers, have %d", len(followers))
	}
	// definite sends until the answer is not a 503 (a leader change).
	definite := func(key, addr, path string, body any) nodetest.Answer {
		t.Helper()
		var a nodetest.Answer
		nodetest.WaitFor(t, 30*time.Second, "a definite answer to "+path, func() bool {
			var err error
			a, err = nodetest.SendAs(key, http.MethodPost, addr, path, body)
			return err == nil && a.Code != http.StatusServiceUnavailable
		})
		return a
	}
	g := definite(keyA, followers[0], "/v1/intents", map[string]any{
		"key": "charge-1", "tool": "test.tool", "owner": "agent-1", "payload": map[string]any{"n": 1}})
	if g.Code != http.StatusCreated || nodetest.IntentOf(g.Body)["principal"] != "agents-a" {
		t.Fatalf("claim by agents-a: %v", g)
	}
	report := map[string]any{"owner": "agent-1", "fencing_token": g.Body["fencing_token"], "outcome": "failed"}
	if a := definite(keyB, followers[1], "/v1/intents/charge-1/complete", report); a.Code != http.StatusForbidden ||
		a.Body["code"] != "not_grant_holder" {
		t.Fatalf("agents-b completing agents-a's grant through a follower: %v", a)
	}
	report["outcome"] = "executed"
	if a := definite(keyA, followers[1], "/v1/intents/charge-1/complete", report); a.Code != http.StatusOK ||
		nodetest.IntentOf(a.Body)["state"] != "executed" {
		t.Fatalf("agents-a completing its grant through a follower: %v", a)
	}
}
