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

// keySpec is one API key of a test keyset: its name and the rest of its
// configuration entry (roles, tools, key_prefixes) as JSON members.
type keySpec struct{ name, entry string }

// keysOf makes a keyset of fresh keys in namespace ns and returns it with
// each key's Authorization header.
func keysOf(t *testing.T, ns string, specs []keySpec) (*auth.Keyset, map[string][]string) {
	t.Helper()
	keys := map[string][]string{}
	var entries []string
	for _, k := range specs {
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[k.name] = bearer(plain)
		entries = append(entries, fmt.Sprintf(`{"name":%q,"namespace":%q,%s,"sha256":%q}`, k.name, ns, k.entry, sum))
	}
	ks, err := auth.Parse([]byte(`{"keys":[` + strings.Join(entries, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return ks, keys
}

// trustEnv is a node with auth on in namespace alpha: an agent, two
// approvers, an admin and a front end whose key reserves "idem:", with the
// policies of the attacker review: refunds (payments.refund needs 2 of
// appr1, appr2) and danger (danger.* blocked).
func trustEnv(t *testing.T) (*testEnv, map[string][]string) {
	t.Helper()
	ks, keys := keysOf(t, "alpha", []keySpec{
		{"agent", `"roles":["agent"]`}, {"appr1", `"roles":["approver"]`}, {"appr2", `"roles":["approver"]`},
		{"admin", `"roles":["admin"]`}, {"proxy", `"roles":["agent"],"key_prefixes":["idem:"]`},
	})
	e := newEnv(t, func(c *Config) { c.Auth = ks })
	for name, pol := range map[string]string{
		"refunds": `{"tools":["payments.refund"],"require_approval":true,"approvals_required":2,"approvers":["appr1","appr2"]}`,
		"danger":  `{"tools":["danger.*"],"blocked":true}`,
	} {
		if r := e.do(t, http.MethodPut, "/v1/policies/"+name, json.RawMessage(pol), keys["admin"]...); r.status != http.StatusOK {
			t.Fatalf("put policy %s: %s", name, r)
		}
	}
	return e, keys
}

// TestAgentCannotOptOutOfItsPolicy is the attacker review's critical
// finding: an agent key named another policy, or spelt the tool another
// way, and was granted. Every one of those claims is refused now, with
// nothing written, and the honest claims are gated as the policies say.
func TestAgentCannotOptOutOfItsPolicy(t *testing.T) {
	e, keys := trustEnv(t)
	payload := json.RawMessage(`{"order":"ord_1","amount":100}`)
	for i, c := range []struct {
		tool, policy string
		status       int
		code         string
	}{
		{"payments.refund", "default", http.StatusUnprocessableEntity, CodePolicyMismatch},
		{"danger.rm", "default", http.StatusUnprocessableEntity, CodePolicyMismatch},
		{"payments.refund", "danger", http.StatusUnprocessableEntity, CodePolicyMismatch},
		{"payments.refund", "nosuch", http.StatusUnprocessableEntity, CodeUnprocessable},
		{"Payments.Refund", "", http.StatusBadRequest, CodeBadRequest},
		{"DANGER.rm", "", http.StatusBadRequest, CodeBadRequest},
		{"payments.refund ", "", http.StatusBadRequest, CodeBadRequest},
		{"payments.refund/x", "", http.StatusBadRequest, CodeBadRequest},
		{"danger.rm", "", http.StatusForbidden, string(fsm.StatusBlocked)},
	} {
		before := proposed(e.mem)
		claim := claimJSON{Key: fmt.Sprintf("k%d", i), Tool: c.tool, Policy: c.policy, Payload: payload, Owner: "o"}
		p := problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claim, keys["agent"]...), c.status, c.code)
		if c.code == CodePolicyMismatch && (p.Field != "policy" || !strings.Contains(p.Detail, "not \""+c.policy+"\"")) {
			t.Errorf("%+v: problem %+v does not name the field and the tool's policy", c, p)
		}
		if c.code == CodeBadRequest && p.Field != "tool" {
			t.Errorf("%+v: field %q, want tool", c, p.Field)
		}
		if c.code != string(fsm.StatusBlocked) && proposed(e.mem) != before {
			t.Errorf("%+v: refused at the edge, yet %d commands were proposed", c, proposed(e.mem)-before)
		}
	}
	// Honest claims: the refund waits for two approvals (naming its own
	// policy is allowed, as a check), whatever the agent named.
	for i, pol := range []string{"", "refunds"} {
		claim := claimJSON{Key: fmt.Sprintf("refund-%d", i), Tool: "payments.refund", Policy: pol, Payload: payload, Owner: "o"}
		a := answer(t, e.do(t, http.MethodPost, "/v1/intents", claim, keys["agent"]...), http.StatusAccepted)
		if a.Status != "pending_approval" || a.ExecutionToken != "" || a.Intent.Policy != "refunds" || a.Intent.ApprovalsRequired != 2 {
			t.Fatalf("policy %q: %+v", pol, a)
		}
	}
}

// TestDefaultDeny: with the default policy blocked, a tool no policy
// covers is refused, and the tools a policy covers are gated by it.
func TestDefaultDeny(t *testing.T) {
	e, keys := trustEnv(t)
	if r := e.do(t, http.MethodPut, "/v1/policies/default", json.RawMessage(`{"blocked":true}`), keys["admin"]...); r.status != http.StatusOK {
		t.Fatalf("put default: %s", r)
	}
	payload := json.RawMessage(`{"x":1}`)
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claimJSON{Key: "u", Tool: "email.send", Payload: payload, Owner: "o"}, keys["agent"]...),
		http.StatusForbidden, string(fsm.StatusBlocked))
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claimJSON{Key: "u2", Tool: "email.send", Policy: "refunds", Payload: payload, Owner: "o"}, keys["agent"]...),
		http.StatusUnprocessableEntity, CodePolicyMismatch)
	answer(t, e.do(t, http.MethodPost, "/v1/intents", claimJSON{Key: "r", Tool: "payments.refund", Payload: payload, Owner: "o"}, keys["agent"]...),
		http.StatusAccepted)
}

// TestPolicyPatternsMustMatchTheGrammar: a pattern no tool name can match
// is refused when the policy is put, not discovered when a tool escapes.
func TestPolicyPatternsMustMatchTheGrammar(t *testing.T) {
	e, keys := trustEnv(t)
	for _, pat := range []string{"Payments.*", "payments/*", "payments. *"} {
		body := json.RawMessage(fmt.Sprintf(`{"tools":[%q],"blocked":true}`, pat))
		problemOf(t, e.do(t, http.MethodPut, "/v1/policies/p", body, keys["admin"]...), http.StatusUnprocessableEntity, CodeUnprocessable)
	}
}

// TestReservedKeyPrefix: a key under a front end's reserved prefix is
// claimed by the front end's key alone, so a co-tenant agent cannot plant
// a result the front end would replay.
func TestReservedKeyPrefix(t *testing.T) {
	e, keys := trustEnv(t)
	claim := claimJSON{Key: "idem:http:K", Tool: "http", Payload: json.RawMessage(`{"m":"POST"}`), Owner: "o"}
	before := proposed(e.mem)
	p := problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claim, keys["agent"]...), http.StatusForbidden, CodeKeyReserved)
	if p.Field != "key" || !strings.Contains(p.Detail, `"idem:"`) || proposed(e.mem) != before {
		t.Fatalf("problem %+v, %d proposed", p, proposed(e.mem)-before)
	}
	// The header form of the key is checked too.
	claim.Key = ""
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claim, append(keys["agent"], HeaderIdempotencyKey, "idem:http:K")...),
		http.StatusForbidden, CodeKeyReserved)
	claim.Key = "idem:http:K"
	answer(t, e.do(t, http.MethodPost, "/v1/intents", claim, keys["proxy"]...), http.StatusCreated)
	// Keys outside the prefix stay the agent's to claim.
	claim.Key = "charge:1"
	answer(t, e.do(t, http.MethodPost, "/v1/intents", claim, keys["agent"]...), http.StatusCreated)
}
