package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/intentledger/intentd/client"
)

func TestPolicyRoundTrip(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, "policy", "put", "payments", "--tools", "payments.*,refunds.*", "--priority", "10",
		"--dedupe-window", "48h", "--lease", "1m", "--token-ttl", "5m", "--approvals", "2", "--approvers", "alice,bob,carol",
		"--max-payload-bytes", "4096")
	expect(t, r, exitOK, "payments.*,refunds.*", "48h0m0s", "1m0s", "5m0s", "2 of 3", "alice,bob,carol", "4096")

	var p client.Policy
	e.jsonOut(t, &p, "policy", "get", "payments")
	want := client.Policy{Name: "payments", Version: p.Version, Tools: []string{"payments.*", "refunds.*"}, Priority: 10,
		DedupeWindowMS: 48 * 3600 * 1000, LeaseMS: 60_000, TokenTTLMS: 300_000, RequireApproval: true, ApprovalsRequired: 2,
		Approvers: []string{"alice", "bob", "carol"}, MaxPayloadBytes: 4096}
	if p.Version == 0 || !policyEqual(p, want) {
		t.Errorf("policy get = %+v, want %+v", p, want)
	}

	// What "policy get --output json" prints is what --file takes.
	file := filepath.Join(t.TempDir(), "payments.json")
	p.Priority, p.Blocked = 20, true
	data, _ := json.Marshal(p)
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	expect(t, e.run(t, "policy", "put", "payments", "--file", file, "--expect-version", fmt.Sprint(p.Version+1000)), exitRefused)
	expect(t, e.run(t, "policy", "put", "payments", "--file", file, "--expect-version", fmt.Sprint(p.Version)), exitOK, "20", "blocked")
	expect(t, e.run(t, "policy", "put", "other", "--file", file), exitUsage) // the file names another policy

	expect(t, e.run(t, "policy", "put", "email", "--tools", "email.*", "--require-approval"), exitOK)
	// allow_self_approval round-trips through the flag and through a file.
	expect(t, e.run(t, "policy", "put", "selfish", "--tools", "selfish.*", "--allow-self-approval"), exitOK,
		"allow_self_approval", "true")
	var selfish client.Policy
	e.jsonOut(t, &selfish, "policy", "get", "selfish")
	if !selfish.AllowSelfApproval || !selfish.RequireApproval {
		t.Fatalf("policy put --allow-self-approval stored %+v", selfish)
	}
	r = e.run(t, "policy", "list")
	expect(t, r, exitOK, "NAME", "payments", "email", "email.*")
	var list struct{ Policies []client.Policy }
	e.jsonOut(t, &list, "policy", "list")
	var names []string
	for _, p := range list.Policies {
		names = append(names, p.Name)
	}
	if !slices.Contains(names, "payments") || !slices.Contains(names, "email") {
		t.Errorf("policy list = %v", names)
	}

	// A blocked policy refuses claims of its tools.
	expect(t, e.run(t, "claim", "refund:1", "--tool", "refunds.card", "--payload", "{}"), exitRefused)

	expect(t, e.run(t, "policy", "delete", "payments"), exitOK, "deleted policy payments")
	expect(t, e.run(t, "policy", "get", "payments"), exitNotFound)
	expect(t, e.run(t, "policy", "delete", "payments"), exitNotFound)

	for name, args := range map[string][]string{
		"no tools":            {"policy", "put", "bad"},
		"bad name":            {"policy", "put", "Bad Name", "--tools", "x.*"},
		"lease too short":     {"policy", "put", "bad", "--tools", "x.*", "--lease", "10ms"},
		"bad pattern":         {"policy", "put", "bad", "--tools", "[x"},
		"more than approvers": {"policy", "put", "bad", "--tools", "x.*", "--approvals", "3", "--approvers", "a,b"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.run(t, args...)
			expect(t, r, exitUsage)
			if !strings.Contains(r.stderr, "detail") {
				t.Errorf("no detail from the server:\n%s", r)
			}
		})
	}
}

func policyEqual(a, b client.Policy) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
