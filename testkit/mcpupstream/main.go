// Command mcpupstream is the MCP server cmd/intent-mcp's process tests
// put behind the gate. Every effect is one JSON line appended to the
// --effects file with O_SYNC before the tool answers, so a test counts
// what really happened even when the process is killed right after.
//
// Tools:
//
//	charge {order, amount, mode}  destructive: the effect, then {"charge_id", ...}. mode:
//	                              "block" waits after the effect until <effects>.release exists,
//	                              "die" SIGKILLs the process after the effect,
//	                              "progress" sends three progress notifications first, then waits
//	                              until <effects>.progress-seen exists (the caller got them: the
//	                              gate drops progress it handles after the call's result),
//	                              "iserror" answers an isError result
//	refund {order}                destructive: the effect, then {"refund_id"}
//	strict {ok}                   ok false: a JSON-RPC invalid-params error, no effect
//	read {}                       readOnlyHint: how many times read ran in this process
//	add_tool {name}               adds a tool named name (no annotations) whose calls are effects
//	bench {...}                   destructive, but writes no effect: answers a small result at once
//	                              (make bench-mcp's tool: the upstream's own cost stays near zero)
//
// It serves stdio, or streamable HTTP with --http ADDR (the bound address
// is written to --addr-file). With --start-after FILE it reads nothing and
// serves nothing until FILE exists (a slow upstream: the test decides when
// it is up).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type upstream struct {
	server  *mcp.Server
	effects string
	mu      sync.Mutex
	reads   int
	benched atomic.Uint64
}

func main() {
	effects := flag.String("effects", "", "file the effects are appended to (required)")
	httpAddr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	addrFile := flag.String("addr-file", "", "with --http: write the bound address here")
	startAfter := flag.String("start-after", "", "serve only once this file exists")
	flag.Parse()
	if *startAfter != "" {
		for {
			if _, err := os.Stat(*startAfter); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if *effects == "" {
		log.Fatal("--effects is required")
	}
	u := &upstream{effects: *effects, server: mcp.NewServer(&mcp.Implementation{Name: "testupstream", Version: "1"}, nil)}
	yes := true
	object := map[string]any{"type": "object"}
	u.server.AddTool(&mcp.Tool{Name: "charge", InputSchema: object, Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, u.charge)
	u.server.AddTool(&mcp.Tool{Name: "refund", InputSchema: object, Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, u.simple("refund"))
	u.server.AddTool(&mcp.Tool{Name: "strict", InputSchema: object, Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, u.strict)
	u.server.AddTool(&mcp.Tool{Name: "read", InputSchema: object, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, u.read)
	u.server.AddTool(&mcp.Tool{Name: "add_tool", InputSchema: object}, u.addTool)
	u.server.AddTool(&mcp.Tool{Name: "bench", InputSchema: object, Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, u.bench)

	if *httpAddr == "" {
		if err := u.server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Printf("stdio: %v", err)
		}
		return
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile+".tmp", []byte(ln.Addr().String()), 0o600); err != nil {
			log.Fatal(err)
		}
		if err := os.Rename(*addrFile+".tmp", *addrFile); err != nil {
			log.Fatal(err)
		}
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server }, nil)
	log.Fatal(http.Serve(ln, h))
}

// effect appends one line to the effects file, synced, and returns how
// many lines the file holds for this (tool, order).
func (u *upstream) effect(rec map[string]any) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	rec["pid"] = os.Getpid()
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(u.effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	data, _ := os.ReadFile(u.effects)
	n := 0
	for _, l := range bytes.Split(data, []byte("\n")) {
		var r map[string]any
		if json.Unmarshal(l, &r) == nil && r["tool"] == rec["tool"] && r["order"] == rec["order"] {
			n++
		}
	}
	return n
}

func (u *upstream) charge(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Order  string  `json:"order"`
		Amount float64 `json:"amount"`
		Mode   string  `json:"mode"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if in.Mode == "progress" {
		for i := 1; i <= 3; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(),
				Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
		}
		if err := waitForFile(ctx, u.effects+".progress-seen"); err != nil {
			return nil, err
		}
	}
	n := u.effect(map[string]any{"tool": "charge", "order": in.Order, "amount": in.Amount,
		"fencing_token": req.Params.Meta["dev.intentd/fencingToken"], "key": req.Params.Meta["dev.intentd/idempotencyKey"]})
	switch in.Mode {
	case "die":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case "block":
		if err := waitForFile(ctx, u.effects+".release"); err != nil {
			return nil, err
		}
	}
	res := &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("charged %s %v", in.Order, in.Amount)}},
		StructuredContent: map[string]any{"charge_id": fmt.Sprintf("ch_%s_%d", in.Order, n), "order": in.Order, "amount": in.Amount,
			"pid": os.Getpid(), "fencing_token": req.Params.Meta["dev.intentd/fencingToken"]},
	}
	res.IsError = in.Mode == "iserror"
	return res, nil
}

// waitForFile polls until path exists or ctx ends.
func waitForFile(ctx context.Context, path string) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (u *upstream) simple(tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Order string `json:"order"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &in)
		n := u.effect(map[string]any{"tool": tool, "order": in.Order})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool + " done"}},
			StructuredContent: map[string]any{"id": fmt.Sprintf("%s_%s_%d", tool, in.Order, n)}}, nil
	}
}

func (u *upstream) strict(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		OK    bool   `json:"ok"`
		Order string `json:"order"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &in)
	if !in.OK {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "ok must be true"}
	}
	u.effect(map[string]any{"tool": "strict", "order": in.Order})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "strict done"}}}, nil
}

func (u *upstream) read(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	u.mu.Lock()
	u.reads++
	n := u.reads
	u.mu.Unlock()
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(n)}}, StructuredContent: map[string]any{"reads": n}}, nil
}

func (u *upstream) addTool(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.Name == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "name is required"}
	}
	u.server.AddTool(&mcp.Tool{Name: in.Name, InputSchema: map[string]any{"type": "object"}}, u.simple(in.Name))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added " + in.Name}}}, nil
}

// bench answers at once with a small result naming the call, as a tool
// that creates something would; nothing is written.
func (u *upstream) bench(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Order string `json:"order"`
	}
	_ = json.Unmarshal(req.Params.Arguments, &in)
	n := u.benched.Add(1)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("created %s", in.Order)}},
		StructuredContent: map[string]any{"id": fmt.Sprintf("ch_%d", n), "order": in.Order, "status": "succeeded"}}, nil
}
