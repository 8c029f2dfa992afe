package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"

	"github.com/intentledger/intentd/frontend/mcpgate"
)

// TestGateWithMcpGoClient: a host built on a second MCP implementation
// (mark3labs/mcp-go), with its default options, gets in at each version on
// both transports, lists and calls tools, and reads a key conflict's
// fingerprints in the error message (it drops JSON-RPC data).
func TestGateWithMcpGoClient(t *testing.T) {
	l := newLightGate(t)
	url := l.serveHTTP(t)
	served := mcpgate.ProtocolVersions()
	for _, v := range triedVersions {
		want := v
		if !contains(served, v) {
			want = served[0]
		}
		for _, transport := range []string{"stdio", "http"} {
			t.Run(transport+"/"+v, func(t *testing.T) {
				var c *mcpgo.Client
				if transport == "stdio" {
					in, out := l.run(t, nil)
					c = mcpgo.NewClient(mcpgotransport.NewIO(out, in, io.NopCloser(strings.NewReader(""))))
				} else {
					var err error
					if c, err = mcpgo.NewStreamableHttpClient(url); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := c.Start(ctx); err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				init := mcpgomcp.InitializeRequest{}
				init.Params.ProtocolVersion = v
				init.Params.ClientInfo = mcpgomcp.Implementation{Name: "mcp-go-host", Version: "1"}
				res, err := c.Initialize(ctx, init)
				if err != nil {
					t.Fatalf("initialize at %s: %v", v, err)
				}
				if res.ProtocolVersion != want || c.ProtocolVersion() != want {
					t.Errorf("negotiated %s (client on %s), want %s", res.ProtocolVersion, c.ProtocolVersion(), want)
				}
				lt, err := c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				found := false
				for _, tool := range lt.Tools {
					found = found || tool.Name == "charge"
				}
				if !found {
					t.Fatalf("tools/list has no charge: %d tools", len(lt.Tools))
				}
				order := "mcpgo-" + transport + "-" + v
				call := func(amount int) (*mcpgomcp.CallToolResult, error) {
					req := mcpgomcp.CallToolRequest{}
					req.Params.Name = "charge"
					req.Params.Arguments = map[string]any{"order": order, "amount": amount}
					req.Params.Meta = &mcpgomcp.Meta{AdditionalFields: map[string]any{mcpgate.MetaIdempotencyKey: order}}
					return c.CallTool(ctx, req)
				}
				if r, err := call(1); err != nil || r.IsError {
					t.Fatalf("charge: %v %+v", err, r)
				}
				_, err = call(2)
				if err == nil || !strings.Contains(err.Error(), mcpgate.ConflictCode) || strings.Count(err.Error(), "fingerprint") < 2 {
					t.Errorf("a conflicting call: %v, want the conflict and both fingerprints in the message", err)
				}
			})
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestGateSlowUpstreamWithMcpGoClient is issue 33's second finding: an
// mcp-go host gives up on server/discover after 5 s and sends initialize;
// the gate must answer at once whatever its upstream is doing, and never
// with error code 0.
func TestGateSlowUpstreamWithMcpGoClient(t *testing.T) {
	l := newLightGate(t)
	up := filepath.Join(l.dir, "up")
	in, out := l.run(t, nil, "--start-after", up)
	c := mcpgo.NewClient(mcpgotransport.NewIO(out, in, io.NopCloser(strings.NewReader(""))))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	init := mcpgomcp.InitializeRequest{}
	init.Params.ClientInfo = mcpgomcp.Implementation{Name: "mcp-go-host", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize while the upstream starts: %v", err)
	}
	if _, err := os.Stat(up); err == nil {
		t.Fatal("the upstream was started before the handshake")
	}
	if err := os.WriteFile(up, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	lt, err := c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if len(lt.Tools) < 2 {
		t.Fatalf("tools/list: %d tools, want the upstream's too", len(lt.Tools))
	}
}
