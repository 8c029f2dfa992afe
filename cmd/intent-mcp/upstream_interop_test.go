package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/frontend/mcpgate"
	"github.com/intentledger/intentd/testkit/clienttest"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// mcpGoUpstream is an upstream built on a second MCP implementation: a
// mark3labs/mcp-go MCPServer served over streamable HTTP, with a
// side-effecting tool (send, an additive write: readOnlyHint false,
// destructiveHint false, still gated) that counts its runs per order and a
// read-only tool (lookup) annotated readOnlyHint true.
type mcpGoUpstream struct {
	url string

	mu       sync.Mutex
	sends    map[string]int
	lookups  int
	versions []string // negotiated at each initialize
	headers  []string // the MCP-Protocol-Version headers the gate sent
}

func newMcpGoUpstream(t *testing.T) *mcpGoUpstream {
	t.Helper()
	u := &mcpGoUpstream{sends: map[string]int{}}
	hooks := &mcpgoserver.Hooks{}
	hooks.AddAfterInitialize(func(_ context.Context, _ any, _ *mcpgomcp.InitializeRequest, res *mcpgomcp.InitializeResult) {
		u.mu.Lock()
		defer u.mu.Unlock()
		u.versions = append(u.versions, res.ProtocolVersion)
	})
	s := mcpgoserver.NewMCPServer("mcp-go-upstream", "1", mcpgoserver.WithToolCapabilities(true), mcpgoserver.WithHooks(hooks))
	s.AddTool(mcpgomcp.NewTool("send",
		mcpgomcp.WithDescription("sends a message (a side effect)"),
		mcpgomcp.WithString("order", mcpgomcp.Required()),
		mcpgomcp.WithString("text"),
		mcpgomcp.WithDestructiveHintAnnotation(false),
	), func(_ context.Context, req mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
		order, err := req.RequireString("order")
		if err != nil {
			return mcpgomcp.NewToolResultError(err.Error()), nil
		}
		u.mu.Lock()
		u.sends[order]++
		n := u.sends[order]
		u.mu.Unlock()
		return mcpgomcp.NewToolResultText(fmt.Sprintf("sent %s (run %d)", order, n)), nil
	})
	s.AddTool(mcpgomcp.NewTool("lookup",
		mcpgomcp.WithDescription("reads a value"),
		mcpgomcp.WithReadOnlyHintAnnotation(true),
	), func(context.Context, mcpgomcp.CallToolRequest) (*mcpgomcp.CallToolResult, error) {
		u.mu.Lock()
		u.lookups++
		n := u.lookups
		u.mu.Unlock()
		return mcpgomcp.NewToolResultText(fmt.Sprintf("lookup %d", n)), nil
	})
	h := mcpgoserver.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("MCP-Protocol-Version"); v != "" {
			u.mu.Lock()
			if !slices.Contains(u.headers, v) {
				u.headers = append(u.headers, v)
			}
			u.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.url = srv.URL + "/mcp"
	return u
}

func (u *mcpGoUpstream) counts(order string) (sends, lookups int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sends[order], u.lookups
}

// runGate starts run() in the test process against ledger with the
// arguments given (flags, and an upstream command after -- if any) and
// returns its stdin and stdout; it stops when the test ends, and logs
// the gate's log if the test failed.
func runGate(t *testing.T, ledger string, args ...string) (io.WriteCloser, io.ReadCloser) {
	t.Helper()
	args = append([]string{"--ledger", ledger, "--log-level", "debug", "--shutdown-timeout", "5s"}, args...)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	log := &nodetest.LockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, func(string) string { return "" }, inR, outW, log) }()
	t.Cleanup(func() {
		cancel()
		_ = inW.Close()
		_ = outR.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the gate did not stop")
		}
		if t.Failed() {
			t.Logf("gate log:\n%s", log.String())
		}
	})
	return inW, outR
}

// TestGateInFrontOfMcpGoServer is issue 33 on the upstream side: the gate
// fronts an mcp-go server over streamable HTTP. Through the gate, the
// side-effecting tool runs once for two calls with the same key (the
// second is replayed), the read-only tool passes through on every call,
// and its readOnlyHint true reaches the host. Hosts: the go-sdk client on
// stdio and the mcp-go client over HTTP.
func TestGateInFrontOfMcpGoServer(t *testing.T) {
	up := newMcpGoUpstream(t)
	ledger := clienttest.NewMemory(t).URL
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("go-sdk/stdio", func(t *testing.T) {
		in, out := runGate(t, ledger, "--upstream", "mg="+up.url)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: out, Writer: in}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer cs.Close()
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		i := slices.IndexFunc(lt.Tools, func(tool *mcp.Tool) bool { return tool.Name == "lookup" })
		if i < 0 || !slices.ContainsFunc(lt.Tools, func(tool *mcp.Tool) bool { return tool.Name == "send" }) {
			t.Fatalf("tools/list: %d tools, want send and lookup", len(lt.Tools))
		}
		if a := lt.Tools[i].Annotations; a == nil || !a.ReadOnlyHint {
			t.Errorf("lookup's annotations through the gate: %+v, want readOnlyHint true", a)
		}

		const order = "mg-gosdk"
		call := func() *mcp.CallToolResult {
			t.Helper()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send", Arguments: map[string]any{"order": order, "text": "hi"},
				Meta: map[string]any{mcpgate.MetaIdempotencyKey: order}})
			if err != nil || res.IsError {
				t.Fatalf("send: %v %+v", err, res)
			}
			return res
		}
		first, second := call(), call()
		if isReplay(first) || !isReplay(second) {
			t.Errorf("replayed: first %v, second %v; want false, true", first.Meta[mcpgate.MetaReplayed], second.Meta[mcpgate.MetaReplayed])
		}
		if textOf(first) != textOf(second) || textOf(first) != "sent "+order+" (run 1)" {
			t.Errorf("results: %q then %q, want the first run's twice", textOf(first), textOf(second))
		}
		_, before := up.counts(order)
		for range 2 {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{}})
			if err != nil || res.IsError || isReplay(res) {
				t.Fatalf("lookup: %v %+v", err, res)
			}
		}
		if sends, lookups := up.counts(order); sends != 1 || lookups != before+2 {
			t.Errorf("the upstream ran send %d times and lookup %d times, want 1 and 2", sends, lookups-before)
		}
	})

	t.Run("mcp-go/http", func(t *testing.T) {
		addr := nodetest.FreePort(t)
		runGate(t, ledger, "--listen", addr, "--insecure-no-caller-auth", "--upstream", "mg="+up.url)
		nodetest.WaitFor(t, 30*time.Second, "the HTTP gate to serve", func() bool {
			resp, err := http.Get("http://" + addr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		c, err := mcpgo.NewStreamableHttpClient("http://" + addr + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		init := mcpgomcp.InitializeRequest{}
		init.Params.ClientInfo = mcpgomcp.Implementation{Name: "mcp-go-host", Version: "1"}
		if _, err := c.Initialize(ctx, init); err != nil {
			t.Fatalf("initialize: %v", err)
		}
		lt, err := c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		i := slices.IndexFunc(lt.Tools, func(tool mcpgomcp.Tool) bool { return tool.Name == "lookup" })
		if i < 0 {
			t.Fatalf("tools/list: %d tools, no lookup", len(lt.Tools))
		}
		if ro := lt.Tools[i].Annotations.ReadOnlyHint; ro == nil || !*ro {
			t.Errorf("lookup's readOnlyHint through the gate: %v, want true", ro)
		}

		const order = "mg-mcpgo"
		call := func() *mcpgomcp.CallToolResult {
			t.Helper()
			req := mcpgomcp.CallToolRequest{}
			req.Params.Name = "send"
			req.Params.Arguments = map[string]any{"order": order, "text": "hi"}
			req.Params.Meta = &mcpgomcp.Meta{AdditionalFields: map[string]any{mcpgate.MetaIdempotencyKey: order}}
			res, err := c.CallTool(ctx, req)
			if err != nil || res.IsError {
				t.Fatalf("send: %v %+v", err, res)
			}
			return res
		}
		replayed := func(r *mcpgomcp.CallToolResult) bool {
			return r.Meta != nil && r.Meta.AdditionalFields[mcpgate.MetaReplayed] == true
		}
		first, second := call(), call()
		if replayed(first) || !replayed(second) {
			t.Errorf("replayed: first %v, second %v; want false, true", replayed(first), replayed(second))
		}
		_, before := up.counts(order)
		for range 2 {
			req := mcpgomcp.CallToolRequest{}
			req.Params.Name = "lookup"
			res, err := c.CallTool(ctx, req)
			if err != nil || res.IsError || replayed(res) {
				t.Fatalf("lookup: %v %+v", err, res)
			}
		}
		if sends, lookups := up.counts(order); sends != 1 || lookups != before+2 {
			t.Errorf("the upstream ran send %d times and lookup %d times, want 1 and 2", sends, lookups-before)
		}
	})

	// docs/mcp.md's matrix says which version the gate and the mcp-go
	// server speak: the go-sdk client's server/discover at 2026-07-28,
	// accepted, so no initialize.
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.versions) != 0 || !slices.Equal(up.headers, []string{"2026-07-28"}) {
		t.Errorf("the gate and the mcp-go server: initialize results %v, MCP-Protocol-Version headers %v; "+
			"want no initialize and 2026-07-28 (else update the upstream row in docs/mcp.md)", up.versions, up.headers)
	}
}
