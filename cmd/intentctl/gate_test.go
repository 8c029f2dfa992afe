package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
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
	mem := ledgertest.NewMemory(epoch)
	api := httpapi.New(httpapi.Config{Service: ledger.New(mem, ledger.Limits{}), Cluster: fakeCluster{},
		NodeID: "n1", Now: mem.Now, Auth: ks})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &env{mem: mem, addr: srv.URL}, keys
}

// jsonOut runs a command with --output json and decodes its stdout.
func (e *env) jsonOut(t *testing.T, v any, args ...string) {
	t.Helper()
	r := e.run(t, append(args, "--output", "json")...)
	expect(t, r, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, r)
	}
}

func TestHelpGateExitCodes(t *testing.T) {
	r := runCLI(t, "help")
	expect(t, r, exitOK, "policy put NAME", "approvals", "wait KEY", "token verify TOKEN", "keys rotate",
		"audit-log export", "audit-log verify", "settings set", "apikey new", "--api-key KEY", "--fingerprint FP")
	for code := 10; code <= 12; code++ {
		if !strings.Contains(r.stdout, fmt.Sprintf("\n  %d ", code)) {
			t.Errorf("help does not document exit code %d", code)
		}
	}
}

func TestGateUsageErrors(t *testing.T) {
	e := newEnv(t)
	policyFile := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(policyFile, []byte(`{"name":"p","tools":["x.*"],"lease":"30s"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"policy alone":          {"policy"},
		"policy unknown":        {"policy", "frob"},
		"policy put no name":    {"policy", "put"},
		"policy file and flag":  {"policy", "put", "p", "--file", policyFile, "--tools", "y.*"},
		"policy file unknown":   {"policy", "put", "p", "--file", policyFile},
		"policy file missing":   {"policy", "put", "p", "--file", "/nonexistent/p.json"},
		"policy negative lease": {"policy", "put", "p", "--tools", "x.*", "--lease", "-1s"},
		"approve no actor":      {"approve", "k"},
		"reject no actor":       {"reject", "k", "--fingerprint", "ab"},
		"wait too long":         {"wait", "k", "--wait", "2m"},
		"token alone":           {"token"},
		"token verify no token": {"token", "verify"},
		"token bad payload":     {"token", "verify", "gex_x", "--payload", "{nope"},
		"keys argument":         {"keys", "list"},
		"audit-log argument":    {"audit-log", "x"},
		"verify file and since": {"audit-log", "verify", "--file", policyFile, "--since", "3"},
		"verify not an export":  {"audit-log", "verify", "--file", policyFile},
		"settings set no flag":  {"settings", "set"},
		"settings set negative": {"settings", "set", "--audit-retention", "-1"},
		"apikey alone":          {"apikey"},
		"apikey no name":        {"apikey", "new", "--roles", "agent"},
		"apikey no roles":       {"apikey", "new", "--name", "ci"},
		"apikey bad role":       {"apikey", "new", "--name", "ci", "--roles", "agent,root"},
		"apikey twice a role":   {"apikey", "new", "--name", "ci", "--roles", "agent,agent"},
		"apikey bad namespace":  {"apikey", "new", "--name", "ci", "--roles", "agent", "--namespace", "Pay"},
		"apikey bad name":       {"apikey", "new", "--name", "-ci", "--roles", "agent"},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.run(t, args...)
			expect(t, r, exitUsage)
			if r.stderr == "" {
				t.Error("no message on stderr")
			}
		})
	}
	if got := proposed(e.mem); got != 0 {
		t.Errorf("usage errors proposed %d commands", got)
	}
}

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

func TestApprovalFlow(t *testing.T) {
	e := newEnv(t)
	expect(t, e.run(t, "policy", "put", "payments", "--tools", "payments.*", "--require-approval", "--approvals", "2"), exitOK)
	claim := []string{"claim", "charge:ord_7", "--tool", "payments.charge", "--payload", `{"amount":700}`, "--owner", "agent-1"}
	expect(t, e.run(t, claim...), exitOK, "pending_approval")

	var in client.IntentResponse
	e.jsonOut(t, &in, "get", "charge:ord_7")
	fp := in.Intent.Fingerprint
	expect(t, e.run(t, "approvals"), exitOK, "KEY", "charge:ord_7", "payments.charge", "0/2", fp[:12])
	var page client.ListPage
	e.jsonOut(t, &page, "approvals", "--limit", "10")
	if len(page.Intents) != 1 || page.Intents[0].State != client.StatePendingApproval {
		t.Fatalf("approvals json = %+v", page)
	}

	// A decision bound to another payload's fingerprint is refused.
	wrong := strings.Repeat("0", len(fp))
	expect(t, e.run(t, "approve", "charge:ord_7", "--actor", "alice", "--fingerprint", wrong), exitDivergent)
	expect(t, e.run(t, "reject", "charge:ord_7", "--actor", "alice", "--fingerprint", wrong), exitDivergent)

	expect(t, e.run(t, "approve", "charge:ord_7", "--actor", "alice", "--fingerprint", fp, "--reason", "looks right"),
		exitOK, "pending_approval")
	expect(t, e.run(t, "approvals"), exitOK, "1/2", "alice")
	expect(t, e.run(t, "approve", "charge:ord_7", "--actor", "alice"), exitRefused) // already approved by alice

	// A long-poll wakes up on the second approval.
	e.jsonOut(t, &in, "get", "charge:ord_7")
	done := make(chan result, 1)
	go func() {
		var out, errOut strings.Builder
		code := run(context.Background(), []string{"--addr", e.addr, "--retries", "0", "wait", "charge:ord_7",
			"--after-version", fmt.Sprint(in.Intent.Version), "--wait", "20s"}, &out, &errOut)
		done <- result{code: code, stdout: out.String(), stderr: errOut.String()}
	}()
	time.Sleep(100 * time.Millisecond) // not needed for correctness: the wait answers either way
	expect(t, e.run(t, "approve", "charge:ord_7", "--actor", "bob", "--fingerprint", fp), exitOK, "approved")
	select {
	case r := <-done:
		expect(t, r, exitOK, "changed", "true", "approved")
	case <-time.After(15 * time.Second):
		t.Fatal("wait did not answer after the approval")
	}
	expect(t, e.run(t, "approvals"), exitOK)
	if r := e.run(t, "approvals"); strings.Contains(r.stdout, "charge:ord_7") {
		t.Errorf("an approved intent is still listed:\n%s", r)
	}
	// Nothing changes after the current version: the wait times out with
	// the intent as it is.
	e.jsonOut(t, &in, "get", "charge:ord_7")
	expect(t, e.run(t, "wait", "charge:ord_7", "--after-version", fmt.Sprint(in.Intent.Version), "--wait", "50ms"),
		exitOK, "changed", "false", "approved")
	expect(t, e.run(t, "wait", "missing", "--wait", "0s"), exitNotFound)

	expect(t, e.run(t, claim...), exitOK, "granted", "gex_")

	// Rejection.
	expect(t, e.run(t, "claim", "charge:ord_8", "--tool", "payments.charge", "--payload", "{}"), exitOK, "pending_approval")
	expect(t, e.run(t, "reject", "charge:ord_8", "--actor", "carol", "--reason", "no"), exitOK, "rejected")
	expect(t, e.run(t, "claim", "charge:ord_8", "--tool", "payments.charge", "--payload", "{}"), exitRefused)
}

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
	var v client.TokenVerification
	e.jsonOut(t, &v, "token", "verify", grant("refund:3"))
	if !v.Valid || v.Claims.Key != "refund:3" || v.Claims.FencingToken == 0 {
		t.Errorf("verify json = %+v", v)
	}
}

func TestKeys(t *testing.T) {
	e := newEnv(t)
	e.claim(t, "k", "o") // the first grant makes the first signing key
	r := e.run(t, "keys")
	expect(t, r, exitOK, "KID", "OKP", "Ed25519", "EdDSA")
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	e.jsonOut(t, &set, "keys")
	if len(set.Keys) != 1 {
		t.Fatalf("keys = %+v", set)
	}
	expect(t, e.run(t, "keys", "rotate"), exitOK, "rotated")
	var rotated map[string]string
	e.jsonOut(t, &rotated, "keys", "rotate")
	e.jsonOut(t, &set, "keys")
	if len(set.Keys) != 3 || !slices.ContainsFunc(set.Keys, func(k struct {
		Kid string `json:"kid"`
	}) bool {
		return k.Kid == rotated["kid"]
	}) {
		t.Errorf("after two rotations, keys = %+v (rotated to %q)", set, rotated["kid"])
	}
}

func TestAuditLogExportVerify(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		token := e.claim(t, fmt.Sprintf("job:%d", i), "o")
		expect(t, e.run(t, "complete", fmt.Sprintf("job:%d", i), "--owner", "o", "--token", fmt.Sprint(token),
			"--outcome", "executed"), exitOK)
	}
	// An event with characters JSON encoders like to escape.
	expect(t, e.run(t, "claim", "a<b>&c", "--tool", "t", "--payload", "{}"), exitOK)

	r := e.run(t, "audit-log", "--limit", "2")
	expect(t, r, exitOK, "SEQ", "HASH", "claim", "job:0", "next: --since 3")
	var page client.AuditLogPage
	e.jsonOut(t, &page, "audit-log")
	n := len(page.Events)
	if n < 7 || page.Head.LastSeq != page.Events[n-1].Seq {
		t.Fatalf("audit-log json: %d events, head %+v", n, page.Head)
	}

	expect(t, e.run(t, "audit-log", "verify"), exitOK, fmt.Sprintf("verified %d events, seq 1..%d, head hash %s", n, n, page.Head.LastHash))

	dir := t.TempDir()
	export := func(args ...string) (string, []string) {
		t.Helper()
		r := e.run(t, append([]string{"audit-log", "export"}, args...)...)
		expect(t, r, exitOK)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		file := filepath.Join(dir, fmt.Sprintf("export-%d.jsonl", len(lines)))
		if err := os.WriteFile(file, []byte(r.stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		return file, lines
	}
	file, lines := export()
	if len(lines) != n+1 || !strings.HasPrefix(lines[0], `{"head":`) {
		t.Fatalf("export: %d lines, first %q", len(lines), lines[0])
	}
	for i, line := range lines[1:] {
		var rec client.AuditRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Seq != page.Events[i].Seq ||
			string(rec.Event) != string(page.Events[i].Event) {
			t.Fatalf("export line %d = %s (%v)", i+2, line, err)
		}
	}
	expect(t, e.run(t, "audit-log", "verify", "--file", file), exitOK, fmt.Sprintf("verified %d events, seq 1..%d", n, n))
	var res verified
	e.jsonOut(t, &res, "audit-log", "verify", "--file", file)
	if !res.OK || res.Verified != n || res.HeadHash != page.Head.LastHash {
		t.Errorf("verify json = %+v", res)
	}

	// A partial export verifies from its first event on.
	partial, plines := export("--since", "3")
	if len(plines) != n-1 {
		t.Fatalf("export --since 3: %d lines", len(plines))
	}
	expect(t, e.run(t, "audit-log", "verify", "--file", partial), exitOK, fmt.Sprintf("verified %d events, seq 3..%d", n-2, n), "partial")
	expect(t, e.run(t, "audit-log", "verify", "--since", "3"), exitOK, "partial")

	tamper := func(name string, edit func([]string) []string) string {
		out := edit(slices.Clone(lines))
		f := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(f, []byte(strings.Join(out, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		name string
		edit func([]string) []string
		seq  string
	}{
		{"altered event", func(l []string) []string {
			l[3] = strings.Replace(l[3], `"owner":"o"`, `"owner":"x"`, 1)
			return l
		}, "seq 3"},
		{"altered hash and event", func(l []string) []string {
			// Recomputing one event's hash still breaks the next one's prev.
			var rec client.AuditRecord
			_ = json.Unmarshal([]byte(l[2]), &rec)
			rec.Event = json.RawMessage(strings.Replace(string(rec.Event), `"op":"complete"`, `"op":"claim"`, 1))
			rec.Hash = auth.HashKey(string(rec.Event))
			data, _ := json.Marshal(rec)
			l[2] = string(data)
			return l
		}, "seq 3"},
		{"deleted event", func(l []string) []string { return slices.Delete(l, 4, 5) }, "seq 5"},
		{"deleted first event", func(l []string) []string { return slices.Delete(l, 1, 2) }, "seq 2"},
		{"deleted last event", func(l []string) []string { return l[:len(l)-1] }, fmt.Sprintf("seq %d", n-1)},
		{"swapped events", func(l []string) []string {
			l[2], l[3] = l[3], l[2]
			return l
		}, "seq 3"},
		{"broken line", func(l []string) []string {
			l[5] = l[5][:20]
			return l
		}, "line 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tamper(strings.ReplaceAll(tc.name, " ", "-"), tc.edit)
			if tc.name == "altered event" && !strings.Contains(lines[3], `"owner":"o"`) {
				t.Fatalf("line 4 has no owner to alter: %s", lines[3])
			}
			r := e.run(t, "audit-log", "verify", "--file", f)
			expect(t, r, exitChainBroken)
			if !strings.Contains(r.stderr, "audit chain broken") || !strings.Contains(r.stderr, tc.seq) {
				t.Errorf("stderr does not name %s:\n%s", tc.seq, r)
			}
			r = e.run(t, "audit-log", "verify", "--file", f, "--output", "json")
			expect(t, r, exitChainBroken, `"ok": false`, tc.seq)
		})
	}
}

func TestSettings(t *testing.T) {
	e := newEnv(t)
	expect(t, e.run(t, "settings"), exitOK, "audit_retention", "0 (the default")
	expect(t, e.run(t, "settings", "set", "--audit-retention", "5"), exitOK, "audit_retention", "5")
	var st map[string]int
	e.jsonOut(t, &st, "settings")
	if st["audit_retention"] != 5 {
		t.Errorf("settings json = %v", st)
	}
	// Retention shows in the audit log: only the last 5 events are kept,
	// and the rest still verifies from the head's anchor.
	for i := range 8 {
		e.claim(t, fmt.Sprintf("k%d", i), "o")
	}
	var page client.AuditLogPage
	e.jsonOut(t, &page, "audit-log")
	if len(page.Events) != 5 || page.Head.Dropped == 0 {
		t.Errorf("after retention 5: %d events, head %+v", len(page.Events), page.Head)
	}
	expect(t, e.run(t, "audit-log", "verify"), exitOK, "verified 5 events")
	expect(t, e.run(t, "settings", "set", "--audit-retention", "20000000"), exitUsage)

	dead := httptest.NewServer(nil)
	dead.Close()
	expect(t, runCLI(t, "--addr", dead.URL, "settings"), exitUnavailable)
	// The next address answers when the first cannot.
	expect(t, runCLI(t, "--addr", dead.URL+","+e.addr, "settings"), exitOK, "5")
}

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
	if p, err := ks.Authenticate(plain); err != nil || p.Namespace != ledger.DefaultNamespace || !p.Has(auth.RoleAdmin) {
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
