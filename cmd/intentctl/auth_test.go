package main

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// newAuthEnv serves the API with API keys on; keys maps each key's name to
// its plaintext.
func newAuthEnv(t *testing.T) (*env, map[string]string) {
	t.Helper()
	keys := map[string]string{}
	var entries []string
	for _, k := range []struct{ name, roles string }{
		{"admin", `["admin"]`}, {"agent", `["agent"]`}, {"alice", `["approver"]`}, {"tool", `["tool"]`},
	} {
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[k.name] = plain
		entries = append(entries, fmt.Sprintf(`{"name":%q,"namespace":"payments","roles":%s,"sha256":%q}`, k.name, k.roles, sum))
	}
	ks, err := auth.Parse([]byte(`{"keys":[` + strings.Join(entries, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, clienttest.WithAuth(ks)), keys
}

func TestAuthRequired(t *testing.T) {
	e, keys := newAuthEnv(t)
	for name, args := range map[string][]string{
		"no key":    {"get", "k"},
		"wrong key": {"--api-key", "ik_" + strings.Repeat("A", 43), "get", "k"},
		"settings":  {"settings"},
		"no role":   {"--api-key", keys["agent"], "policy", "put", "p", "--tools", "x.*"},
		"tool role": {"--api-key", keys["tool"], "claim", "k", "--tool", "t", "--payload", "{}"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.run(t, args...)
			expect(t, r, exitUnauthorized)
			if r.stderr == "" {
				t.Error("no message on stderr")
			}
		})
	}

	admin := []string{"--api-key", keys["admin"]}
	expect(t, e.run(t, append(admin, "policy", "put", "payments", "--tools", "payments.*", "--require-approval")...), exitOK)
	expect(t, e.run(t, append(admin, "settings")...), exitOK, "audit_retention")

	// The agent claims through the environment's key.
	t.Setenv("INTENTCTL_API_KEY", keys["agent"])
	expect(t, e.run(t, "claim", "charge:1", "--tool", "payments.charge", "--payload", `{"amount":1}`), exitOK, "pending_approval", "payments")
	expect(t, e.run(t, "approvals"), exitOK, "charge:1", "0/1")

	// The approver needs no --actor: the server takes it from the key.
	r := e.run(t, "--api-key", keys["alice"], "approve", "charge:1")
	expect(t, r, exitOK, "approved")
	var in client.IntentResponse
	e.jsonOut(t, &in, "get", "charge:1")
	if len(in.Intent.Approvals) != 1 || in.Intent.Approvals[0].Actor != "alice" {
		t.Errorf("approvals = %+v", in.Intent.Approvals)
	}
	expect(t, e.run(t, "audit-log", "verify"), exitOK, "verified")
	expect(t, e.run(t, "keys"), exitOK, "KID") // public
}
