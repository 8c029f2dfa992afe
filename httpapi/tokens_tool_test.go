package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/token"
)

// toolKeysEnv is a node with API keys in namespace alpha: an agent, tool
// keys bound to tools (refunds: "payments.*"; mailer: "email.send"), an
// unbound tool key and an admin.
func toolKeysEnv(t *testing.T) (*testEnv, map[string][]string) {
	t.Helper()
	ks, keys := keysOf(t, "alpha", []keySpec{
		{"agent", `"roles":["agent"]`}, {"refunds", `"roles":["tool"],"tools":["payments.*"]`},
		{"mailer", `"roles":["tool"],"tools":["email.send"]`}, {"any-tool", `"roles":["tool"]`}, {"admin", `"roles":["admin"]`},
	})
	return newEnv(t, func(c *Config) { c.Auth = ks }), keys
}

// verifyClaims decodes the claims of a 200 verify answer.
func verifyClaims(t *testing.T, r reply) token.Claims {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("verify = %s, want 200", r)
	}
	var v struct {
		Valid  bool            `json:"valid"`
		Claims json.RawMessage `json:"claims"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil || !v.Valid {
		t.Fatalf("verify answer %s (%v)", r.body, err)
	}
	var c token.Claims
	if err := json.Unmarshal(v.Claims, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestVerifyRefusesAnotherToolsToken: the token of a refund names its
// tool; a tool key bound to another tool (403 token_tool_forbidden) and a
// verifier naming another tool (422 token_wrong_tool) are refused without
// a write, so the token is not burnt: the refund tool's key then spends
// it, once.
func TestVerifyRefusesAnotherToolsToken(t *testing.T) {
	e, keys := toolKeysEnv(t)
	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o"), keys["agent"]...), http.StatusCreated)
	if c := e.verifyOffline(t, g.ExecutionToken); c.Tool != "payments.refund" || !c.ForTool(g.Intent.Tool) {
		t.Fatalf("the token's aud is %q, want the intent's tool %q", c.Tool, g.Intent.Tool)
	}
	verify := func(as []string, body map[string]any) reply {
		body["execution_token"] = g.ExecutionToken
		return e.do(t, http.MethodPost, "/v1/tokens/verify", body, as...)
	}
	before := proposed(e.mem)
	for _, tc := range []struct {
		name   string
		as     []string
		body   map[string]any
		status int
		code   string
		detail []string
	}{
		{"a key bound to another tool", keys["mailer"], map[string]any{}, http.StatusForbidden, CodeTokenToolForbidden,
			[]string{`"payments.refund"`, `["email.send"]`}},
		{"a key bound to another tool, naming the token's", keys["mailer"], map[string]any{"tool": "payments.refund"},
			http.StatusForbidden, CodeTokenToolForbidden, nil},
		{"an unbound key naming another tool", keys["any-tool"], map[string]any{"tool": "email.send"},
			http.StatusUnprocessableEntity, CodeTokenWrongTool, []string{`"payments.refund"`, `"email.send"`}},
		{"the right key naming another tool", keys["refunds"], map[string]any{"tool": "payments.charge"},
			http.StatusUnprocessableEntity, CodeTokenWrongTool, nil},
		{"with the payload, naming another tool", keys["any-tool"],
			map[string]any{"tool": "email.send", "payload": json.RawMessage(`{"order":"ord_1","amount":100}`)},
			http.StatusUnprocessableEntity, CodeTokenWrongTool, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := problemOf(t, verify(tc.as, tc.body), tc.status, tc.code)
			for _, d := range tc.detail {
				if !strings.Contains(p.Detail, d) {
					t.Errorf("detail %q does not name %s", p.Detail, d)
				}
			}
		})
	}
	if n := proposed(e.mem) - before; n != 0 {
		t.Fatalf("refused verifications proposed %d commands", n)
	}
	if in := intentAnswer(t, e.do(t, http.MethodGet, keyPath("k"), nil, keys["agent"]...)); in.TokenUsed {
		t.Fatal("a refused verification spent the token")
	}
	if evs := auditOf(t, e, "k", keys["agent"]); evs[len(evs)-1]["op"] == "token.use" {
		t.Fatalf("a refused verification reached the audit trail: %v", evs[len(evs)-1])
	}

	// Not burnt: the refund tool's key spends it, and only once.
	c := verifyClaims(t, verify(keys["refunds"], map[string]any{"tool": "payments.refund"}))
	if c.Tool != "payments.refund" || c.Key != "k" {
		t.Fatalf("verified claims %+v", c)
	}
	problemOf(t, verify(keys["refunds"], map[string]any{"tool": "payments.refund"}), http.StatusConflict, string(fsm.StatusTokenUsed))
}

// TestVerifyToolField: "tool" is optional; an unbound key that names the
// token's tool, or none, spends it; a bad tool name is bad input.
func TestVerifyToolField(t *testing.T) {
	e, keys := toolKeysEnv(t)
	for i, body := range []map[string]any{{}, {"tool": "payments.refund"}} {
		k := fmt.Sprintf("k%d", i)
		g := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim(k, "o"), keys["agent"]...), http.StatusCreated)
		body["execution_token"] = g.ExecutionToken
		verifyClaims(t, e.do(t, http.MethodPost, "/v1/tokens/verify", body, keys["any-tool"]...))
	}
	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("bad", "o"), keys["agent"]...), http.StatusCreated)
	p := problemOf(t, e.do(t, http.MethodPost, "/v1/tokens/verify",
		map[string]any{"execution_token": g.ExecutionToken, "tool": "payments.refund\u001b"}, keys["any-tool"]...),
		http.StatusBadRequest, CodeBadRequest)
	if p.Field != "tool" {
		t.Fatalf("field = %q, want tool", p.Field)
	}
}

// TestVerifyTokenWithoutAudience: a token signed before tokens named their
// tool (no "aud") takes the tool of the intent whose fingerprint it binds
// (the fingerprint hashes the tool): a key bound to that tool spends it,
// a key bound to another is refused and leaves it unspent.
func TestVerifyTokenWithoutAudience(t *testing.T) {
	e, keys := toolKeysEnv(t)
	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o"), keys["agent"]...), http.StatusCreated)
	c := e.verifyOffline(t, g.ExecutionToken)
	c.Tool = ""
	// The helpers seed the cluster's signing key "test-key" with 32 ones.
	old, err := token.Sign(token.SigningKey{ID: "test-key", Seed: bytes.Repeat([]byte{1}, 32)}, c)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(as []string) reply {
		return e.do(t, http.MethodPost, "/v1/tokens/verify", map[string]any{"execution_token": old}, as...)
	}
	p := problemOf(t, verify(keys["mailer"]), http.StatusForbidden, CodeTokenToolForbidden)
	if !strings.Contains(p.Detail, `"payments.refund"`) {
		t.Errorf("detail %q does not name the intent's tool", p.Detail)
	}
	got := verifyClaims(t, verify(keys["refunds"]))
	if got.Tool != "" || got.Key != "k" {
		t.Fatalf("claims %+v, want the old token's (no aud)", got)
	}
}
