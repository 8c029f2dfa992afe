package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/intentledger/intentd/client"
)

func TestTokenVerify(t *testing.T) {
	e := newEnv(t)
	grant := func(key string) string {
		r := e.run(t, "claim", key, "--tool", "payments.refund", "--payload", `{"amount":100}`, "--output", "json")
		expect(t, r, exitOK)
		var resp client.ClaimResponse
		if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || resp.ExecutionToken == "" {
			t.Fatalf("claim: %v\n%s", err, r)
		}
		return resp.ExecutionToken
	}
	tok := grant("refund:1")
	expect(t, e.run(t, "token", "verify", tok, "--payload", `{ "amount": 100.0 }`), exitOK,
		"valid", "true", "refund:1", "declared")
	r := e.run(t, "token", "verify", tok, "--payload", `{"amount":100}`)
	expect(t, r, exitTokenRefused)
	if !strings.Contains(r.stderr, "token_used") {
		t.Errorf("second verify:\n%s", r)
	}

	// A well-formed token whose signature is another token's.
	a, b := strings.Split(grant("refund:4"), "."), strings.Split(grant("refund:5"), ".")
	forged := a[0] + "." + a[1] + "." + b[2]
	for name, args := range map[string][]string{
		"other payload": {"token", "verify", grant("refund:2"), "--payload", `{"amount":999}`},
		"forged":        {"token", "verify", forged},
	} {
		t.Run(name, func(t *testing.T) { expect(t, e.run(t, args...), exitTokenRefused) })
	}
	// --tool: a token for another tool is refused and not spent.
	other := grant("refund:6")
	r = e.run(t, "token", "verify", other, "--tool", "email.send")
	expect(t, r, exitTokenRefused)
	if !strings.Contains(r.stderr, "token_wrong_tool") {
		t.Errorf("wrong tool:\n%s", r)
	}
	expect(t, e.run(t, "token", "verify", other, "--tool", "payments.refund"), exitOK, "valid", "true", "payments.refund")

	var v client.TokenVerification
	e.jsonOut(t, &v, "token", "verify", grant("refund:3"))
	if !v.Valid || v.Claims.Key != "refund:3" || v.Claims.FencingToken == 0 {
		t.Errorf("verify json = %+v", v)
	}
}
