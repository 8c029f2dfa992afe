package httpapi

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/fsm"
)

// bindingEnv is a node with API keys in one namespace: two agents, a
// reconciler, a key that is both agent and approver, another approver and
// an admin.
func bindingEnv(t *testing.T) (*testEnv, map[string][]string) {
	t.Helper()
	keys := map[string][]string{}
	var entries []string
	for _, k := range []struct{ name, roles string }{
		{"agent-a", `["agent"]`}, {"agent-b", `["agent"]`}, {"reconciler", `["reconciler"]`},
		{"agent-approver", `["agent","approver"]`}, {"approver", `["approver"]`}, {"admin", `["admin"]`},
	} {
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[k.name] = bearer(plain)
		entries = append(entries, fmt.Sprintf(`{"name":%q,"namespace":"alpha","roles":%s,"sha256":%q}`, k.name, k.roles, sum))
	}
	ks, err := auth.Parse([]byte(`{"keys":[` + strings.Join(entries, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(c *Config) { c.Auth = ks }), keys
}

// auditOf reads the audit trail of key as key holder.
func auditOf(t *testing.T, e *testEnv, key string, as []string) []map[string]any {
	t.Helper()
	r := e.do(t, http.MethodGet, keyPath(key, "audit"), nil, as...)
	if r.status != http.StatusOK {
		t.Fatalf("audit: %s", r)
	}
	var v struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	return v.Events
}

// TestGrantIsBoundToTheClaimingKey: a second agent key of the namespace,
// which reads the owner and the fencing token of the first key's grant,
// cannot complete, renew or commit it (403 not_grant_holder, nothing
// written but the audit event), nor get it again by repeating the claim;
// the claiming key and a reconciler can.
func TestGrantIsBoundToTheClaimingKey(t *testing.T) {
	e, keys := bindingEnv(t)
	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o"), keys["agent-a"]...), http.StatusCreated)
	if g.Intent.Principal != "agent-a" {
		t.Fatalf("principal = %q, want the claiming key's name", g.Intent.Principal)
	}
	read := intentAnswer(t, e.do(t, http.MethodGet, keyPath("k"), nil, keys["agent-b"]...))
	if read.Owner != "o" || read.FencingToken != g.FencingToken || read.Principal != "agent-a" {
		t.Fatalf("agent-b reads %+v", read)
	}
	report := map[string]any{"owner": read.Owner, "fencing_token": read.FencingToken, "outcome": "failed"}
	renew := map[string]any{"owner": read.Owner, "fencing_token": read.FencingToken, "lease_ms": 5000}

	for _, c := range []struct {
		action string
		body   any
	}{{"complete", report}, {"renew", renew}} {
		p := problemOf(t, e.do(t, http.MethodPost, keyPath("k", c.action), c.body, keys["agent-b"]...),
			http.StatusForbidden, string(fsm.StatusNotGrantHolder))
		if p.Intent == nil || p.Intent.State != "declared" || p.Intent.Principal != "agent-a" {
			t.Fatalf("%s by agent-b: intent %+v", c.action, p.Intent)
		}
	}
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o"), keys["agent-b"]...),
		http.StatusForbidden, string(fsm.StatusNotGrantHolder))
	evs := auditOf(t, e, "k", keys["agent-a"])
	last := evs[len(evs)-1]
	if last["status"] != string(fsm.StatusNotGrantHolder) || last["actor"] != "agent-b" {
		t.Fatalf("last audit event %v, want agent-b's refused attempt", last)
	}
	if in := intentAnswer(t, e.do(t, http.MethodGet, keyPath("k"), nil, keys["agent-a"]...)); in.State != "declared" {
		t.Fatalf("after refusals the intent is %s", in.State)
	}

	// The reconciler may renew and settle another key's grant.
	answer(t, e.do(t, http.MethodPost, keyPath("k", "renew"), renew, keys["reconciler"]...), http.StatusOK)
	done := answer(t, e.do(t, http.MethodPost, keyPath("k", "complete"),
		map[string]any{"owner": "o", "fencing_token": g.FencingToken, "outcome": "executed"}, keys["reconciler"]...), http.StatusOK)
	if done.Intent.State != "executed" {
		t.Fatalf("reconciler's complete: %+v", done.Intent)
	}
	problemOf(t, e.do(t, http.MethodPost, keyPath("k", "commit"), map[string]any{"owner": "o"}, keys["agent-b"]...),
		http.StatusForbidden, string(fsm.StatusNotGrantHolder))
	c := answer(t, e.do(t, http.MethodPost, keyPath("k", "commit"), map[string]any{"owner": "o"}, keys["agent-a"]...), http.StatusOK)
	if c.Intent.State != "committed" {
		t.Fatalf("agent-a's commit: %+v", c.Intent)
	}

	// The claiming key completes its own grant.
	g2 := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k2", "o"), keys["agent-a"]...), http.StatusCreated)
	answer(t, e.do(t, http.MethodPost, keyPath("k2", "complete"),
		map[string]any{"owner": "o", "fencing_token": g2.FencingToken, "outcome": "executed"}, keys["agent-a"]...), http.StatusOK)
}

// TestSelfApprovalIsRefused: a key that is both agent and approver cannot
// approve its own claim (403 self_approval) unless the policy sets
// allow_self_approval; another approver can.
func TestSelfApprovalIsRefused(t *testing.T) {
	e, keys := bindingEnv(t)
	answer(t, e.do(t, http.MethodPut, "/v1/policies/gate", `{"tools":["gated.*"],"require_approval":true}`, keys["admin"]...), http.StatusOK)
	answer(t, e.do(t, http.MethodPut, "/v1/policies/self", `{"tools":["self.*"],"require_approval":true,"allow_self_approval":true}`,
		keys["admin"]...), http.StatusOK)
	pol := e.do(t, http.MethodGet, "/v1/policies/self", nil, keys["admin"]...)
	if !strings.Contains(string(pol.body), `"allow_self_approval":true`) {
		t.Fatalf("GET policy: %s", pol)
	}

	gated := newClaim("g", "o")
	gated.Tool = "gated.tool"
	pending := answer(t, e.do(t, http.MethodPost, "/v1/intents", gated, keys["agent-approver"]...), http.StatusAccepted)
	if pending.Intent.Principal != "agent-approver" {
		t.Fatalf("pending intent bound to %q", pending.Intent.Principal)
	}
	p := problemOf(t, e.do(t, http.MethodPost, keyPath("g", "approve"), map[string]string{"actor": "someone-else"}, keys["agent-approver"]...),
		http.StatusForbidden, string(fsm.StatusSelfApproval))
	if p.Intent == nil || p.Intent.State != "pending_approval" || len(p.Intent.Approvals) != 0 {
		t.Fatalf("self-approval problem carries %+v", p.Intent)
	}
	a := answer(t, e.do(t, http.MethodPost, keyPath("g", "approve"), map[string]string{}, keys["approver"]...), http.StatusOK)
	if a.Intent.State != "approved" || a.Intent.Approvals[0].Actor != "approver" {
		t.Fatalf("another approver: %+v", a.Intent)
	}

	self := newClaim("s", "o")
	self.Tool = "self.tool"
	answer(t, e.do(t, http.MethodPost, "/v1/intents", self, keys["agent-approver"]...), http.StatusAccepted)
	a = answer(t, e.do(t, http.MethodPost, keyPath("s", "approve"), map[string]string{}, keys["agent-approver"]...), http.StatusOK)
	if a.Intent.State != "approved" {
		t.Fatalf("self-approval under allow_self_approval: %+v", a.Intent)
	}
}

// TestAuthOffBindsNothing: in development mode grants are bound to no key
// and any caller settles them, as before.
func TestAuthOffBindsNothing(t *testing.T) {
	e := newEnv(t)
	g := e.claimOK(t, "k", "o")
	if g.Intent.Principal != "" || strings.Contains(string(e.do(t, http.MethodGet, keyPath("k"), nil).body), "principal") {
		t.Fatalf("a grant with auth off is bound to %q", g.Intent.Principal)
	}
	answer(t, e.do(t, http.MethodPost, keyPath("k", "complete"),
		map[string]any{"owner": "o", "fencing_token": g.FencingToken, "outcome": "executed"}), http.StatusOK)
}
