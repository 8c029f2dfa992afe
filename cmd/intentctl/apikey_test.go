package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/internal/namespace"
)

func TestAPIKeyNew(t *testing.T) {
	r := runCLI(t, "apikey", "new", "--name", "ci-agent", "--namespace", "payments", "--roles", "agent,approver")
	expect(t, r, exitOK, "API key", "keys file entry")
	var plain, entry string
	for _, line := range strings.Split(r.stdout, "\n") {
		switch l := strings.TrimSpace(line); {
		case strings.HasPrefix(l, auth.KeyPrefix):
			plain = l
		case strings.HasPrefix(l, "{"):
			entry = l
		}
	}
	ks, err := auth.Parse([]byte(`{"keys":[` + entry + `]}`))
	if err != nil {
		t.Fatalf("entry %q: %v\n%s", entry, err, r)
	}
	var kc auth.KeyConfig
	if err := json.Unmarshal([]byte(entry), &kc); err != nil || kc.SHA256 != auth.HashKey(plain) {
		t.Fatalf("entry %q does not hold the hash of %q (%v)", entry, plain, err)
	}
	p, err := ks.Authenticate(plain)
	if err != nil || p.Name != "ci-agent" || p.Namespace != "payments" || !p.Has(auth.RoleAgent) || !p.Has(auth.RoleApprover) || p.Has(auth.RoleAdmin) {
		t.Errorf("authenticate = %+v, %v", p, err)
	}

	r = runCLI(t, "apikey", "new", "--name", "ops", "--roles", "admin", "--env")
	expect(t, r, exitOK, auth.EnvVar)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	envEntry := strings.TrimSpace(lines[len(lines)-1])
	plain = strings.TrimSpace(lines[1])
	ks, err = auth.ParseEnv(envEntry)
	if err != nil {
		t.Fatalf("env entry %q: %v\n%s", envEntry, err, r)
	}
	if p, err := ks.Authenticate(plain); err != nil || p.Namespace != namespace.Default || !p.Has(auth.RoleAdmin) {
		t.Errorf("env key authenticate = %+v, %v", p, err)
	}

	var out struct {
		APIKey string         `json:"api_key"`
		Entry  auth.KeyConfig `json:"entry"`
		Env    string         `json:"env"`
	}
	r = runCLI(t, "apikey", "new", "--name", "t", "--roles", "tool", "--output", "json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || auth.HashKey(out.APIKey) != out.Entry.SHA256 ||
		!strings.HasSuffix(out.Env, ":tool:"+out.Entry.SHA256) {
		t.Errorf("apikey json = %s (%v)", r.stdout, err)
	}
}

// TestAPIKeyNewScopes: --tools and --key-prefixes land in the entry the
// server parses; the compact form refuses them, and a tool list on a key
// without the tool role is refused by the server's own rules.
func TestAPIKeyNewScopes(t *testing.T) {
	var out struct {
		Entry auth.KeyConfig `json:"entry"`
	}
	r := runCLI(t, "apikey", "new", "--name", "verifier", "--roles", "tool", "--tools", "payments.*,email.send", "--output", "json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || strings.Join(out.Entry.Tools, ",") != "payments.*,email.send" {
		t.Fatalf("tools entry = %s (%v)", r.stdout, err)
	}
	r = runCLI(t, "apikey", "new", "--name", "proxy", "--roles", "agent", "--key-prefixes", "idem:", "--output", "json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || strings.Join(out.Entry.KeyPrefixes, ",") != "idem:" {
		t.Fatalf("prefix entry = %s (%v)", r.stdout, err)
	}
	for args, want := range map[string]string{
		"--roles agent --key-prefixes idem: --env": "keys file",
		"--roles agent --tools x.*":                "no tool role",
	} {
		r := runCLI(t, append([]string{"apikey", "new", "--name", "k"}, strings.Fields(args)...)...)
		expect(t, r, exitUsage)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("%s: stderr lacks %q: %s", args, want, r)
		}
	}
}
