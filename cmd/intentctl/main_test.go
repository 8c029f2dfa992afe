package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// epoch is where the test server's clock starts.
var epoch = clienttest.Epoch

// fakeCluster is the status the test server reports: two nodes, n1 the
// leader, n2 suspect.
type fakeCluster struct{}

func (fakeCluster) Status() cluster.Status {
	return cluster.Status{NodeID: "n1", State: "leader", LeaderID: "n1", LeaderHTTP: "127.0.0.1:8101", Term: 4,
		CommitIndex: 12, AppliedIndex: 12, LastIndex: 12, Ready: true, Nodes: []cluster.MemberStatus{
			{ID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8101", Suffrage: "voter", Gossip: "alive", Leader: true},
			{ID: "n2", RaftAddr: "127.0.0.1:7002", HTTPAddr: "127.0.0.1:8102", Suffrage: "voter", Gossip: "suspect"},
		}}
}

type env struct {
	mem  *ledgertest.Memory
	svc  *ledger.Service
	addr string
}

// newEnv starts an API server over an in-memory ledger
// (clienttest.NewMemory) that reports fakeCluster's status; opts add to
// that.
func newEnv(t *testing.T, opts ...clienttest.MemoryOption) *env {
	t.Helper()
	m := clienttest.NewMemory(t, append([]clienttest.MemoryOption{clienttest.WithCluster(fakeCluster{})}, opts...)...)
	return &env{mem: m.Ledger, svc: m.Service, addr: m.URL}
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs intentctl against the env's server, without retries.
func (e *env) run(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, append([]string{"--addr", e.addr, "--retries", "0"}, args...)...)
}

func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func expect(t *testing.T, r result, code int, stdoutHas ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
	for _, s := range stdoutHas {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, r)
		}
	}
}

// claim claims key as owner and returns the fencing token.
func (e *env) claim(t *testing.T, key, owner string, extra ...string) uint64 {
	t.Helper()
	r := e.run(t, append([]string{"claim", key, "--tool", "payments.refund", "--payload", `{"amount":100}`,
		"--owner", owner, "--output", "json"}, extra...)...)
	expect(t, r, exitOK)
	var resp client.ClaimResponse
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil {
		t.Fatalf("claim output: %v\n%s", err, r)
	}
	if resp.Status != client.StatusGranted || resp.FencingToken == 0 || resp.ExecutionToken == "" {
		t.Fatalf("claim = %+v", resp)
	}
	return resp.FencingToken
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := runCLI(t, args...)
		expect(t, r, exitOK, "Exit codes:", "claim KEY", "cluster")
		for code := 0; code <= 9; code++ {
			if !strings.Contains(r.stdout, fmt.Sprintf("\n  %d  ", code)) {
				t.Errorf("help does not document exit code %d", code)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	expectUsageErrors(t, newEnv(t), map[string][]string{
		"no command":       {},
		"unknown command":  {"frobnicate"},
		"unknown flag":     {"get", "k", "--colour"},
		"missing key":      {"get"},
		"extra argument":   {"get", "k", "j"},
		"missing tool":     {"claim", "k", "--payload", "{}"},
		"missing payload":  {"claim", "k", "--tool", "t"},
		"bad payload":      {"claim", "k", "--tool", "t", "--payload", "{nope"},
		"missing file":     {"claim", "k", "--tool", "t", "--payload", "@/nonexistent/payload.json"},
		"bad outcome":      {"complete", "k", "--owner", "o", "--token", "1", "--outcome", "done"},
		"missing token":    {"complete", "k", "--owner", "o", "--outcome", "executed"},
		"bad token":        {"complete", "k", "--owner", "o", "--token", "-1", "--outcome", "executed"},
		"renew no lease":   {"renew", "k", "--owner", "o", "--token", "1"},
		"resolve reason":   {"resolve", "k", "--outcome", "failed", "--actor", "ops"},
		"bad output":       {"get", "k", "--output", "xml"},
		"cluster argument": {"cluster", "extra"},
	})
}

// expectUsageErrors runs each command line of cases against e: each must
// exit 2 with a message on stderr, and none may propose a command.
func expectUsageErrors(t *testing.T, e *env, cases map[string][]string) {
	t.Helper()
	for name, args := range cases {
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

// proposed counts the commands the server proposed.
func proposed(mem *ledgertest.Memory) int { return mem.Proposed() }

func TestExitCodes(t *testing.T) {
	e := newEnv(t)
	token := e.claim(t, "k", "agent-1")

	r := e.run(t, "claim", "k", "--tool", "payments.refund", "--payload", `{"amount":100}`, "--owner", "agent-2")
	expect(t, r, exitInFlight)
	if !strings.Contains(r.stderr, "in_flight") || !strings.Contains(r.stderr, "retry after: 1s") {
		t.Errorf("in_flight message:\n%s", r)
	}
	r = e.run(t, "claim", "k", "--tool", "payments.refund", "--payload", `{"amount":999}`, "--owner", "agent-1")
	expect(t, r, exitDivergent)
	if !strings.Contains(r.stderr, "request fingerprint") {
		t.Errorf("divergent message lacks the fingerprints:\n%s", r)
	}
	expect(t, e.run(t, "complete", "k", "--owner", "agent-1", "--token", fmt.Sprint(token+1), "--outcome", "executed"), exitFenced)
	expect(t, e.run(t, "get", "missing"), exitNotFound)
	expect(t, e.run(t, "commit", "k", "--owner", "agent-1"), exitRefused)
	expect(t, e.run(t, "approve", "k", "--actor", "ops"), exitRefused)
	expect(t, e.run(t, "reject", "k", "--actor", "ops", "--reason", "no"), exitRefused)
	expect(t, e.run(t, "claim", "x", "--tool", "t", "--payload", "{}", "--lease", "10ms"), exitUsage)

	e.mem.FailNext(ledger.ErrNoLeader)
	r = e.run(t, "claim", "y", "--tool", "t", "--payload", "{}")
	expect(t, r, exitUnavailable)
	e.mem.FailNext(ledger.ErrOutcomeUnknown)
	expect(t, e.run(t, "claim", "y", "--tool", "t", "--payload", "{}"), exitUnavailable)

	// The lease passes without a report: in doubt until resolved.
	e.mem.Advance(time.Minute)
	expect(t, e.run(t, "claim", "k", "--tool", "payments.refund", "--payload", `{"amount":100}`, "--owner", "agent-2"), exitInDoubt)
	expect(t, e.run(t, "resolve", "k", "--outcome", "failed", "--actor", "ops", "--reason", "no charge at the PSP"), exitOK, "failed")
	e.claim(t, "k", "agent-2")
}

func TestUnreachable(t *testing.T) {
	dead := httptest.NewServer(nil)
	dead.Close()
	r := runCLI(t, "--addr", dead.URL, "--retries", "0", "get", "k")
	expect(t, r, exitUnavailable)
	r = runCLI(t, "--addr", dead.URL, "--retries", "0", "health")
	expect(t, r, exitUnavailable, "false")
}

func TestJSONErrorOutput(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, "get", "missing", "--output", "json")
	expect(t, r, exitNotFound)
	var p struct {
		Code   string `json:"code"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p.Code != "not_found" || p.Status != 404 {
		t.Errorf("json problem = %s (%v)", r.stdout, err)
	}
}

func TestPayloadFileEnvAddrAndFlagOrder(t *testing.T) {
	e := newEnv(t)
	t.Setenv("INTENTCTL_ADDR", e.addr)
	file := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(file, []byte(`{"to":"a@example.com"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Global flags after the command, flags before the key.
	r := runCLI(t, "claim", "--tool", "email.send", "--payload", "@"+file, "email:ticket_1/step 1", "--output", "json")
	expect(t, r, exitOK, `"to": "a@example.com"`, `"key": "email:ticket_1/step 1"`)
	// A key that looks like a flag goes after "--".
	expect(t, runCLI(t, "claim", "--tool", "t", "--payload", "{}", "--", "-odd"), exitOK, "-odd")
	expect(t, runCLI(t, "get", "-odd"), exitUsage)
	expect(t, runCLI(t, "get", "--", "-odd"), exitOK, "-odd")
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
	expectUsageErrors(t, e, map[string][]string{
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
	})
}
