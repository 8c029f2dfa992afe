package node

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestNamespaceQuotasAcrossFollowers: the quotas are the leader's, for
// the claims of the whole cluster, whichever node they reach. Claims sent
// to two followers spend one bucket (burst 3: the fourth claim is refused
// although no node received more than three) and fill one maximum (2
// intents), and the refusals reach the client through the follower it
// asked, as problems, with nothing written; completes in the full
// namespace are served.
func TestNamespaceQuotasAcrossFollowers(t *testing.T) {
	tn := newTestNodes(t)
	quotas := filepath.Join(tn.dir, "quotas.json")
	// 0.001 claims per second: no token comes back while the test runs.
	if err := os.WriteFile(quotas, []byte(`{"default": {"claims_per_second": 0.001, "burst": 3, "max_intents": 2}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tune := func(c *Config) { c.NamespaceQuotasFile = quotas }
	first := tn.startCfg("n1", 3, anyAddrs, tune)
	for _, id := range []string{"n2", "n3"} {
		tn.startCfg(id, 3, anyAddrs, tune, first.Cluster().GossipAddr())
	}
	tn.waitReady()
	leader := tn.leader()
	var followers []*Node
	for _, m := range tn.mains {
		if m != leader {
			followers = append(followers, m)
		}
	}
	claim := func(m *Node, key string) nodetest.Answer {
		t.Helper()
		a, err := nodetest.Post(m.HTTPAddr(), "/v1/intents", map[string]any{
			"key": key, "tool": "test.tool", "owner": "o", "payload": map[string]any{"key": key}})
		if err != nil {
			t.Fatalf("claim %s on %s: %v", key, m.cfg.ID, err)
		}
		return a
	}
	var token float64
	for _, k := range []string{"a", "b"} {
		a := claim(followers[0], k)
		if a.Code != http.StatusCreated {
			t.Fatalf("claim %s: %d %v", k, a.Code, a.Body)
		}
		if k == "a" {
			token, _ = a.Body["fencing_token"].(float64)
		}
	}
	if a := claim(followers[1], "c"); a.Code != http.StatusInsufficientStorage || a.Body["code"] != "namespace_full" {
		t.Fatalf("a third intent through the other follower: %d %v, want 507 namespace_full", a.Code, a.Body)
	}
	if a := claim(followers[0], "d"); a.Code != http.StatusTooManyRequests || a.Body["code"] != "namespace_rate_limited" {
		t.Fatalf("a fourth claim (the first follower's third): %d %v, want 429 namespace_rate_limited", a.Code, a.Body)
	}
	for _, k := range []string{"c", "d"} {
		if a, err := nodetest.Get(leader.HTTPAddr(), "/v1/intents/"+k); err != nil || a.Code != http.StatusNotFound {
			t.Fatalf("refused key %s: %d %v (%v), want 404", k, a.Code, a.Body, err)
		}
	}
	a, err := nodetest.Post(followers[1].HTTPAddr(), "/v1/intents/a/complete",
		map[string]any{"owner": "o", "fencing_token": token, "outcome": "executed"})
	if err != nil || a.Code != http.StatusOK {
		t.Fatalf("complete in the full namespace: %d %v (%v)", a.Code, a.Body, err)
	}
	u, err := nodetest.Get(followers[1].HTTPAddr(), "/v1/namespaces/default/usage")
	if err != nil || u.Code != http.StatusOK || u.Body["intents"] != float64(2) {
		t.Fatalf("usage: %d %v (%v)", u.Code, u.Body, err)
	}
	byState, _ := u.Body["by_state"].(map[string]any)
	if fmt.Sprint(byState["executed"], byState["declared"]) != "1 1" {
		t.Fatalf("usage by state %v", byState)
	}
}

// TestNamespaceQuotasReload: a signal (SIGHUP in cmd/intentd) reloads
// the quotas file with the API keys; a quotas file that does not load
// keeps the quotas in force.
func TestNamespaceQuotasReload(t *testing.T) {
	tn := newTestNodes(t)
	dir := t.TempDir()
	keys, quotas := filepath.Join(dir, "keys.json"), filepath.Join(dir, "quotas.json")
	_, entry := keyEntry(t, "ops")
	writeKeysFile(t, keys, entry)
	writeFileAtomically(t, quotas, `{"default": {"max_intents": 5}}`)
	hup := make(chan os.Signal, 1)
	n := tn.startCfg("n1", 1, anyAddrs, func(c *Config) {
		c.Auth = AuthRequired
		c.APIKeysFile = keys
		c.APIKeysPoll = 0
		c.Reload = hup
		c.NamespaceQuotasFile = quotas
		c.Security.GossipKey = testGossipKey
	})
	maxIntents := func() int { return n.svc.NamespaceQuotas()["default"].MaxIntents }
	if got := maxIntents(); got != 5 {
		t.Fatalf("max_intents at start: %d, want 5", got)
	}
	writeFileAtomically(t, quotas, `{"default": {"max_intents": 7}}`)
	hup <- os.Interrupt // any value: cmd/intentd sends SIGHUP
	nodetest.WaitFor(t, 10*time.Second, "the new quotas to be in force", func() bool { return maxIntents() == 7 })

	writeFileAtomically(t, quotas, `{"default": {"max_intents": -1}}`)
	n.reloadQuotas()
	if got := maxIntents(); got != 7 {
		t.Fatalf("a quotas file that does not load changed max_intents to %d", got)
	}
}
