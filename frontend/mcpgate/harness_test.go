package mcpgate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fakeUpstream is an MCP server in the test process, behind the gate over
// in-memory transports. Its charge tool counts effects per order and does
// what the call's "mode" argument says:
//
//	""          the effect, then a result {"charge_id", "n", "fencing_token"}
//	"block"     the effect, announce on arrived, wait for release
//	"hang"      the effect, announce on arrived, never answer
//	"progress"  two progress notifications, then (bounded) waits until the
//	            test closes progressSeen, the effect, the result
//	"iserror"   the effect, then an isError result
//	"invalid"   a JSON-RPC invalid-params error, no effect
//	"internal"  the effect, then a JSON-RPC internal error
type fakeUpstream struct {
	server  *mcp.Server
	mu      sync.Mutex
	effects map[string]int
	metas   map[string]map[string]any
	reads   int
	conns   []net.Conn
	arrived chan string
	release chan struct{}
	quit    chan struct{}
	// progressSeen is closed by a test once its caller got the progress
	// notifications: the SDK hands notifications to handlers through a
	// queue that the call's response bypasses, so progress sent right
	// before a result may be handled after the call ended (and is then
	// rightly dropped by the gate: no progress after the result).
	progressSeen chan struct{}
}

var destructive = true

func newFakeUpstream(t *testing.T) *fakeUpstream {
	u := &fakeUpstream{effects: map[string]int{}, metas: map[string]map[string]any{}, arrived: make(chan string, 64),
		release: make(chan struct{}), quit: make(chan struct{}), progressSeen: make(chan struct{})}
	t.Cleanup(func() { close(u.quit) })
	u.server = mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "1"}, nil)
	schema := map[string]any{"type": "object"}
	u.server.AddTool(&mcp.Tool{Name: "charge", InputSchema: schema, Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}}, u.charge)
	u.server.AddTool(&mcp.Tool{Name: "read", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.reads++
			n := u.reads
			u.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(n)}}, StructuredContent: map[string]any{"reads": n}}, nil
		})
	return u
}

func (u *fakeUpstream) charge(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
		Mode   string  `json:"mode"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &in)
	if in.Mode == "invalid" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "amount must be positive"}
	}
	if in.Mode == "progress" {
		for i := 1; i <= 2; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 2, Message: "step"})
		}
		select {
		case <-u.progressSeen:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-u.quit:
			return nil, fmt.Errorf("quit")
		}
	}
	u.mu.Lock()
	u.effects[in.Order]++
	n := u.effects[in.Order]
	u.metas[in.Order] = req.Params.Meta
	u.mu.Unlock()
	switch in.Mode {
	case "block", "hang":
		u.arrived <- in.Order
		var rel <-chan struct{} = u.release
		if in.Mode == "hang" {
			rel = nil
		}
		select {
		case <-rel:
		case <-u.quit:
			return nil, fmt.Errorf("quit")
		}
	case "internal":
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the charge broke"}
	}
	res := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("charged %s (%d)", in.Order, n)}},
		StructuredContent: map[string]any{"charge_id": fmt.Sprintf("ch_%s_%d", in.Order, n), "n": n, "fencing_token": req.Params.Meta[MetaFencingToken]},
		Meta:              mcp.Meta{"io.modelcontextprotocol/serverInfo": "fake", "dev.intentd/replayed": false, "fake/kept": "yes"},
	}
	if in.Mode == "iserror" {
		res.IsError = true
	}
	return res, nil
}

func (u *fakeUpstream) count(order string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.effects[order]
}

func (u *fakeUpstream) meta(order string) map[string]any {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.metas[order]
}

// transport connects a new server session over an in-memory pipe.
func (u *fakeUpstream) transport() mcp.Transport {
	c1, c2 := net.Pipe()
	if _, err := u.server.Connect(context.Background(), &mcp.IOTransport{Reader: c2, Writer: c2}, nil); err != nil {
		panic(err)
	}
	u.mu.Lock()
	u.conns = append(u.conns, c2)
	u.mu.Unlock()
	return &mcp.IOTransport{Reader: c1, Writer: c1}
}

// drop cuts the upstream's connections (the server "dies" for the gate;
// its handlers run on).
func (u *fakeUpstream) drop() {
	u.mu.Lock()
	conns := u.conns
	u.conns = nil
	u.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// gateHarness is a gate over an in-memory ledger node and a fakeUpstream,
// with a downstream client.
type gateHarness struct {
	t      *testing.T
	mem    *clienttest.Memory
	ledger *client.Client
	up     *fakeUpstream
	gate   *Gate
	mu     sync.Mutex
	clock  time.Time
}

type harnessOption func(*Config)

func newGateHarness(t *testing.T, opts ...harnessOption) *gateHarness {
	t.Helper()
	return newGateHarnessWith(t, nil, nil, opts...)
}

// newGateHarnessWith is newGateHarness with more options for the ledger
// node (clienttest.WithAuth) and the gate's ledger client
// (client.WithAPIKey).
func newGateHarnessWith(t *testing.T, memOpts []clienttest.MemoryOption, clientOpts []client.Option, opts ...harnessOption) *gateHarness {
	t.Helper()
	h := &gateHarness{t: t, up: newFakeUpstream(t), clock: time.Unix(1_800_000_000, 0)}
	h.mem = clienttest.NewMemory(t, memOpts...)
	var err error
	h.ledger, err = client.New([]string{h.mem.URL}, append(clientOpts, client.WithBackoff(5*time.Millisecond, 50*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	level := slog.LevelError
	if os.Getenv("MCPGATE_TEST_LOGS") != "" {
		level = slog.LevelDebug
	}
	cfg := Config{
		Upstreams: []Upstream{{Name: "pay", Transport: h.up.transport}},
		Ledger:    h.ledger, LedgerURL: h.mem.URL,
		Lease: 2 * time.Second, CallTimeout: 5 * time.Second, MaxWait: 10 * time.Second, LedgerTimeout: 2 * time.Second, ReportTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		Now:    h.time,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if h.gate, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.gate.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = h.gate.Close(cctx)
	})
	return h
}

// time is the gate's clock: fixed unless a test moves it.
func (h *gateHarness) time() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clock
}

func (h *gateHarness) advance(d time.Duration) {
	h.mu.Lock()
	h.clock = h.clock.Add(d)
	h.mu.Unlock()
}

// connect returns a downstream client session on the gate.
func (h *gateHarness) connect(opts *mcp.ClientOptions) *mcp.ClientSession {
	h.t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := h.gate.Server().Connect(context.Background(), st, nil); err != nil {
		h.t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, opts).Connect(context.Background(), ct, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call makes one tools/call with a context bound (a hang guard).
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
}

func mustCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := callTool(t, cs, name, args, meta)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// structured returns a result's structuredContent as a map.
func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	return m
}

func text(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func replayed(res *mcp.CallToolResult) bool { return res.Meta[MetaReplayed] == true }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func key(k string) map[string]any { return map[string]any{MetaIdempotencyKey: k} }
