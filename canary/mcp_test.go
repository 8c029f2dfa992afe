package canary

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/frontend/mcpgate"
)

// callLog records the tools/call requests that reach a handler: their
// delivery (from _meta) and JSON-RPC id.
type callLog struct {
	mu   sync.Mutex
	next http.Handler
	ids  map[string]string // delivery → id
}

func (c *callLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if call := parseMCPCall(r.Method, body); call != nil {
		c.mu.Lock()
		c.ids[call.delivery] = string(call.msg["id"])
		c.mu.Unlock()
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.next.ServeHTTP(w, r)
}

func (c *callLog) got() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, v := range c.ids {
		out[k] = v
	}
	return out
}

// TestProxyAppliesThePlanThroughMCP puts the fault proxy in MCP mode in
// front of the plain MCP tool (no gate, no ledger: every delivery that
// reaches it charges) and drives it with the go-sdk agent: the faults land
// on tools/call only, copies carry their own delivery and JSON-RPC id, a
// crash delivery reaches a fresh tool that dies at the crash point.
func TestProxyAppliesThePlanThroughMCP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := newBook()
	prov := httptest.NewServer(newProvider(b))
	defer prov.Close()
	calls := &callLog{next: mcpHandler(NewMCPTool(PlainToolConfig{Provider: prov.URL})), ids: map[string]string{}}
	toolURL, stopTool, err := serveOne(calls)
	if err != nil {
		t.Fatal(err)
	}
	defer stopTool()
	px := &proxy{book: b, tool: toolURL, hc: newHTTPClient(4), ctx: ctx, via: ViaMCP}
	px.crashLane = func(context.Context) (string, func(bool) string, error) {
		var stop func()
		died := make(chan struct{})
		url, s, err := serveOne(mcpHandler(NewMCPTool(PlainToolConfig{Provider: prov.URL, Die: func() {
			close(died)
			stop()
		}})))
		stop = s
		return url, func(bool) string {
			stop()
			select {
			case <-died:
				return "the tool's server closed at the crash point"
			default:
				return ""
			}
		}, err
	}
	ps := httptest.NewServer(px)
	defer ps.Close()
	agent := &mcpAgent{client: mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil), endpoint: ps.URL + mcpPath,
		hc: newHTTPClient(4)}
	defer agent.close()
	send := func(label, delivery string) string {
		o, _ := agent.call(ctx, label, delivery, ChargeRequest{Key: "k-" + label, Amount: 7})
		return o
	}
	const seed = 5

	t.Run("lost-ack", func(t *testing.T) {
		n, plan := firstEpisode(t, seed, LostAck, func(p Plan) bool { return p.LostAcks == 2 })
		label := episodeLabel(seed, LostAck, n)
		for a := 0; a < plan.LostAcks; a++ {
			if o := send(label, fmt.Sprintf("a%d", a)); o != "" {
				t.Fatalf("a%d: the agent got %q; the plan drops the answer", a, o)
			}
		}
		if o := send(label, "a2"); o != "executed" {
			t.Fatalf("a2: %q, want the tool's answer", o)
		}
		rec := b.get(label)
		planned, outcomes, effects := rec.snapshot()
		if rec.acksLost != 2 || len(effects) != 3 || strings.Join(outcomes, ",") != "executed,executed,executed" ||
			planned[0] != "a0 deliver, ack lost" || planned[2] != "a2 deliver" {
			t.Fatalf("acks lost %d, effects %d, outcomes %v, planned %v", rec.acksLost, len(effects), outcomes, planned)
		}
	})
	t.Run("duplicate", func(t *testing.T) {
		n, plan := firstEpisode(t, seed, Duplicate, func(p Plan) bool { return p.Dups == 2 })
		label := episodeLabel(seed, Duplicate, n)
		if o := send(label, "a0"); o != "executed" {
			t.Fatalf("a0: %q", o)
		}
		rec := b.get(label)
		rec.bg.Wait()
		if _, _, effects := rec.snapshot(); len(effects) != 1+plan.Dups {
			t.Fatalf("%d effects, want %d: every copy reaches the tool", len(effects), 1+plan.Dups)
		}
		ids := calls.got()
		seen := map[string]bool{}
		for _, d := range []string{"a0", "a0.dup1", "a0.dup2"} {
			id, ok := ids[d]
			if !ok || seen[id] {
				t.Fatalf("delivery %s: id %q (all: %v): each copy is a tools/call of its own", d, id, ids)
			}
			seen[id] = true
		}
	})
	t.Run("reorder", func(t *testing.T) {
		n, _ := firstEpisode(t, seed, Reorder, func(Plan) bool { return true })
		label := episodeLabel(seed, Reorder, n)
		if o := send(label, "a0"); o != "" {
			t.Fatalf("a0: %q, want no answer (the proxy's 504)", o)
		}
		if o := send(label, "a1"); o != "executed" {
			t.Fatalf("a1: %q", o)
		}
		rec := b.get(label)
		rec.bg.Wait()
		if _, outcomes, _ := rec.snapshot(); len(outcomes) != 2 {
			t.Fatalf("outcomes %v: the held delivery never reached the tool", outcomes)
		}
	})
	t.Run("crash", func(t *testing.T) {
		for _, after := range []bool{false, true} {
			n, _ := firstEpisode(t, seed, Crash, func(p Plan) bool { return p.CrashAfterEffect == after })
			label := episodeLabel(seed, Crash, n)
			if o := send(label, "a0"); o != "" {
				t.Fatalf("a0: the agent got %q from a crashed tool", o)
			}
			_, outcomes, effects := b.get(label).snapshot()
			if want := map[bool]int{false: 0, true: 1}[after]; len(outcomes) != 1 || outcomes[0] != "crashed" || len(effects) != want {
				t.Fatalf("after effect %t: outcomes %v, %d effects (want crashed, %d)", after, outcomes, len(effects), want)
			}
			if !slices.ContainsFunc(b.get(label).eventList(), func(e string) bool { return strings.Contains(e, "closed at the crash point") }) {
				t.Fatalf("events %v: the crash lane was not reaped", b.get(label).eventList())
			}
		}
	})
}

func TestMCPCallRewrite(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"charge","arguments":{"amount":3},` +
		`"_meta":{"canary/episode":"1/crash/0002","canary/delivery":"a0","dev.intentd/idempotencyKey":"k"}}}`)
	c := parseMCPCall(http.MethodPost, body)
	if c == nil || c.label != "1/crash/0002" || c.delivery != "a0" {
		t.Fatalf("parse: %+v", c)
	}
	if got := c.rewrite("a0", ""); !bytes.Equal(got, body) {
		t.Fatalf("the agent's own delivery changed: %s", got)
	}
	var m struct {
		ID     any `json:"id"`
		Params struct {
			Arguments map[string]int `json:"arguments"`
			Meta      map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(c.rewrite("a0.dup1", ""), &m); err != nil || m.ID != "7/a0.dup1" || m.Params.Meta[MetaDelivery] != "a0.dup1" ||
		m.Params.Meta[mcpgate.MetaIdempotencyKey] != "k" || m.Params.Arguments["amount"] != 3 || m.Params.Meta[MetaCrash] != nil {
		t.Fatalf("copy: %+v %v", m, err)
	}
	m.Params.Meta = nil
	if err := json.Unmarshal(c.rewrite("a0", "after"), &m); err != nil || m.ID != float64(7) || m.Params.Meta[MetaCrash] != "after" ||
		m.Params.Meta[MetaDelivery] != "a0" {
		t.Fatalf("crash delivery: %+v %v", m, err)
	}
	for _, other := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"charge","arguments":{}}}`,
		`not json`,
	} {
		if c := parseMCPCall(http.MethodPost, []byte(other)); c != nil {
			t.Fatalf("%s: read as a charge delivery", other)
		}
	}
	if c := parseMCPCall(http.MethodGet, body); c != nil {
		t.Fatal("a GET read as a charge delivery")
	}
}

func TestMCPAnswerOutcome(t *testing.T) {
	jsonH := http.Header{"Content-Type": {"application/json"}}
	result := func(res *mcp.CallToolResult) string {
		raw, _ := json.Marshal(res)
		return `{"jsonrpc":"2.0","id":1,"result":` + string(raw) + `}`
	}
	txn := map[string]any{"txn": "t1"}
	gate := func(status mcpgate.Status, isError bool) string {
		return result(&mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: "x"}},
			StructuredContent: map[string]any{"status": string(status), "key": "k"}})
	}
	conflict, _ := json.Marshal(map[string]string{"code": mcpgate.ConflictCode})
	for _, c := range []struct {
		name   string
		status int
		header http.Header
		body   string
		want   string
	}{
		{"executed", 200, jsonH, result(&mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: txn}), "executed"},
		{"replayed", 200, jsonH, result(&mcp.CallToolResult{Content: []mcp.Content{}, StructuredContent: txn,
			Meta: mcp.Meta{mcpgate.MetaReplayed: true}}), "duplicate"},
		{"in_doubt", 200, jsonH, gate(mcpgate.StatusInDoubt, true), "in_doubt"},
		{"in_flight", 200, jsonH, gate(mcpgate.StatusInFlight, true), "in_flight"},
		{"ledger unavailable", 200, jsonH, gate(mcpgate.StatusLedgerUnavailable, true), "error"},
		{"tool error", 200, jsonH, result(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "provider"}}}), "error"},
		{"no txn", 200, jsonH, result(&mcp.CallToolResult{Content: []mcp.Content{}}), "error"},
		{"divergent", 400, jsonH, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"conflict","data":` + string(conflict) + `}}`, "divergent"},
		{"invalid params", 400, jsonH, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"bad"}}`, "error"},
		{"rejected by transport", 200, jsonH, `{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"rejected by transport"}}`, ""},
		{"sse", 200, http.Header{"Content-Type": {"text/event-stream"}}, "event: message\ndata: " + gate(mcpgate.StatusInDoubt, true) + "\n\n", "in_doubt"},
		{"plain 502", 502, http.Header{"Content-Type": {"text/plain"}}, "bad gateway", "error"},
		{"empty", 200, jsonH, ``, ""},
	} {
		if got, _ := answerOutcome(ViaMCP, c.status, c.header, []byte(c.body)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	// What the agent's client returns: the transport's own error is no
	// answer, the server's JSON-RPC error an answer.
	transport := fmt.Errorf("sending: %w: EOF", &jsonrpc.Error{Code: codeRejectedByTransport, Message: "rejected by transport"})
	if o, _ := mcpOutcome(nil, transport); o != "" {
		t.Errorf("a POST that died: %q, want no answer", o)
	}
	server := fmt.Errorf("calling: %w: %w", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Data: conflict},
		&jsonrpc.Error{Code: codeRejectedByTransport})
	if o, _ := mcpOutcome(nil, server); o != "divergent" {
		t.Errorf("the divergent error with a 400: %q", o)
	}
	if o, _ := mcpOutcome(nil, errors.New("connection closed")); o != "" {
		t.Errorf("a closed connection: %q", o)
	}
	if v, err := ParseVia("mcp"); err != nil || v != ViaMCP {
		t.Errorf(`ParseVia("mcp"): %q, %v`, v, err)
	}
	if got, want := mcpLedgerKey("canary:r:1:crash:2"), "mcp:canary:k:canary.charge:canary%3Ar%3A1%3Acrash%3A2"; got != want {
		t.Errorf("mcpLedgerKey: %s, want %s", got, want)
	}
}
