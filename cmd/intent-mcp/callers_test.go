package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/frontend/mcpgate"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// Issue 27, finding 5: intent-mcp --listen authenticates its callers and
// scopes keys per caller, so no caller is replayed another's result.

// writeCallerKeys writes a keys file of the given keys (name → roles) and
// returns its path and each key's plaintext.
func writeCallerKeys(t *testing.T, roles map[string][]auth.Role) (string, map[string]string) {
	t.Helper()
	plain := map[string]string{}
	var fc auth.FileConfig
	for name, rs := range roles {
		p, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		plain[name] = p
		fc.Keys = append(fc.Keys, auth.KeyConfig{Name: name, Namespace: "default", Roles: rs, SHA256: sum})
	}
	b, _ := json.Marshal(fc)
	path := filepath.Join(t.TempDir(), "callers.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, plain
}

func TestListenNeedsCallerAuth(t *testing.T) {
	keys, _ := writeCallerKeys(t, map[string][]auth.Role{"alice": {auth.RoleAgent}})
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"keys":[{"name":"x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--ledger", "http://127.0.0.1:8101", "--upstream", "pay=http://127.0.0.1:9000/mcp"}
	for _, tc := range []struct {
		name    string
		args    []string
		want    string // "" accepts
		callers bool
	}{
		{"stdio needs nothing", nil, "", false},
		{"listen without caller keys", []string{"--listen", "127.0.0.1:8490"}, "give --caller-keys FILE", false},
		{"listen with caller keys", []string{"--listen", "0.0.0.0:8490", "--caller-keys", keys}, "", true},
		{"insecure on loopback", []string{"--listen", "127.0.0.1:8490", "--insecure-no-caller-auth"}, "", false},
		{"insecure on localhost", []string{"--listen", "localhost:8490", "--insecure-no-caller-auth"}, "", false},
		{"insecure on ::1", []string{"--listen", "[::1]:8490", "--insecure-no-caller-auth"}, "", false},
		{"insecure on every address", []string{"--listen", ":8490", "--insecure-no-caller-auth"}, "not a loopback address", false},
		{"insecure on a public address", []string{"--listen", "10.0.0.5:8490", "--insecure-no-caller-auth"}, "not a loopback address", false},
		{"both", []string{"--listen", "127.0.0.1:8490", "--insecure-no-caller-auth", "--caller-keys", keys}, "give one", false},
		{"caller keys on stdio", []string{"--caller-keys", keys}, "on stdio the one caller", false},
		{"a bad keys file", []string{"--listen", "127.0.0.1:8490", "--caller-keys", bad}, "--caller-keys", false},
		{"a missing keys file", []string{"--listen", "127.0.0.1:8490", "--caller-keys", bad + ".gone"}, "--caller-keys", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig(append(append([]string{}, base...), tc.args...), func(string) string { return "" }, io.Discard)
			if tc.want == "" {
				if err != nil || (c.callers != nil) != tc.callers {
					t.Fatalf("refused or wrong callers (%v): %v", c.callers, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// resetUpstream is an MCP server whose reset_password tool makes a new
// password on every call: a result no other caller may see.
type resetUpstream struct {
	server *mcp.Server
	mu     sync.Mutex
	n      int
}

func newResetUpstream() *resetUpstream {
	u := &resetUpstream{server: mcp.NewServer(&mcp.Implementation{Name: "accounts", Version: "1"}, nil)}
	destructive := true
	u.server.AddTool(&mcp.Tool{Name: "reset_password", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.n++
			pw := fmt.Sprintf("pw-%d", u.n)
			u.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: pw}}}, nil
		})
	return u
}

func (u *resetUpstream) transport() mcp.Transport {
	c1, c2 := net.Pipe()
	if _, err := u.server.Connect(context.Background(), &mcp.IOTransport{Reader: c2, Writer: c2}, nil); err != nil {
		panic(err)
	}
	return &mcp.IOTransport{Reader: c1, Writer: c1}
}

func (u *resetUpstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n
}

// bearer adds Authorization: Bearer <key> to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestCallersAreAuthenticatedAndScoped: a request without a valid agent
// key is refused (401, or 403 for a key without the agent role); two
// callers repeating one call (same arguments, so the same derived key
// before) each get their own result; a caller's own repeat in a new
// session is replayed; no caller can use another's session.
func TestCallersAreAuthenticatedAndScoped(t *testing.T) {
	path, plain := writeCallerKeys(t, map[string][]auth.Role{"alice": {auth.RoleAgent}, "mallory": {auth.RoleAgent}, "viewer": {auth.RoleReader}})
	c, err := parseConfig([]string{"--ledger", "http://127.0.0.1:8101", "--upstream", "acct=http://127.0.0.1:9/mcp", "--listen", "127.0.0.1:8490",
		"--caller-keys", path}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	mem := clienttest.NewMemory(t)
	ledger, err := client.New([]string{mem.URL})
	if err != nil {
		t.Fatal(err)
	}
	up := newResetUpstream()
	gate, err := mcpgate.New(mcpgate.Config{Upstreams: []mcpgate.Upstream{{Name: "acct", Transport: up.transport}}, Ledger: ledger, LedgerURL: mem.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := gate.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gate.Close(context.Background()) })
	srv := httptest.NewServer(mcpHandler(gate, c.callers, slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)

	// Refusals, before any MCP is read.
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no credentials", "", http.StatusUnauthorized},
		{"not a bearer", "Basic YTpi", http.StatusUnauthorized},
		{"an unknown key", "Bearer ik_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", http.StatusUnauthorized},
		{"a key without the agent role", "Bearer " + plain["viewer"], http.StatusForbidden},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want || (tc.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer")) {
			t.Errorf("%s: %d %v, want %d", tc.name, resp.StatusCode, resp.Header, tc.want)
		}
	}

	connect := func(caller string) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: caller, Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{plain[caller]}}}, nil)
		if err != nil {
			t.Fatalf("%s connects: %v", caller, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	call := func(cs *mcp.ClientSession) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "reset_password", Arguments: map[string]any{"user": "bob"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	textOf := func(res *mcp.CallToolResult) string {
		if len(res.Content) == 0 {
			return ""
		}
		tc, _ := res.Content[0].(*mcp.TextContent)
		if tc == nil {
			return ""
		}
		return tc.Text
	}
	alice := connect("alice")
	first := call(alice)
	if textOf(first) != "pw-1" || !strings.HasPrefix(fmt.Sprint(first.Meta[mcpgate.MetaKey]), "mcp:default:@alice:d:") {
		t.Fatalf("alice's call: %s %v", textOf(first), first.Meta)
	}
	if again := call(connect("alice")); textOf(again) != "pw-1" || again.Meta[mcpgate.MetaReplayed] != true {
		t.Errorf("alice's repeat in a new session: %s %v", textOf(again), again.Meta)
	}
	if other := call(connect("mallory")); textOf(other) == "pw-1" || other.Meta[mcpgate.MetaReplayed] == true {
		t.Errorf("mallory got alice's result: %s %v", textOf(other), other.Meta)
	}
	if n := up.calls(); n != 2 {
		t.Errorf("the upstream ran %d times, want 2", n)
	}

	// Mallory's key on alice's session is refused by the transport.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL,
		strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"reset_password","arguments":{"user":"bob"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", alice.ID())
	req.Header.Set("Authorization", "Bearer "+plain["mallory"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("mallory on alice's session: %d", resp.StatusCode)
	}
}
