package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/frontend/mcpgate"
	"github.com/intentledger/intentd/testkit/clienttest"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// The versions hosts were tried at (issue 33), newest first.
var triedVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// lightGate runs the gate's run() in the test process, in front of an
// in-memory ledger node and the test upstream as a stdio command: what a
// host sees of the gate, without a cluster.
type lightGate struct {
	ledger, upBin, dir string
}

func newLightGate(t *testing.T) *lightGate {
	t.Helper()
	return &lightGate{ledger: clienttest.NewMemory(t).URL, upBin: nodetest.Binary(t, "testkit/mcpupstream"), dir: t.TempDir()}
}

// run starts run() (runGate) with the gate flags and upstream flags given
// and returns its stdin (write) and stdout (read); it stops when the test
// ends.
func (l *lightGate) run(t *testing.T, gateArgs []string, upArgs ...string) (io.WriteCloser, io.ReadCloser) {
	t.Helper()
	up := []string{"--", l.upBin, "--effects", filepath.Join(l.dir, "effects")}
	return runGate(t, l.ledger, slices.Concat(gateArgs, up, upArgs)...)
}

// serveHTTP runs a gate on --listen and returns its /mcp URL once it
// serves.
func (l *lightGate) serveHTTP(t *testing.T, upArgs ...string) string {
	t.Helper()
	addr := nodetest.FreePort(t)
	l.run(t, []string{"--listen", addr, "--insecure-no-caller-auth"}, upArgs...)
	nodetest.WaitFor(t, 30*time.Second, "the HTTP gate to serve", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return "http://" + addr + "/mcp"
}

// useGate lists the tools and calls one gated and one passed-through tool.
func useGate(t *testing.T, cs *mcp.ClientSession, order string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if !slices.ContainsFunc(lt.Tools, func(tool *mcp.Tool) bool { return tool.Name == "charge" }) {
		t.Fatalf("tools/list has no charge: %d tools", len(lt.Tools))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"order": order, "amount": 1},
		Meta: map[string]any{mcpgate.MetaIdempotencyKey: order}})
	if err != nil || res.IsError {
		t.Fatalf("charge: %v %+v", err, res)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("read: %v %+v", err, res)
	}
}

// TestGateVersionsOnBothTransports: a go-sdk host at each version gets the
// same protocol version on stdio and over HTTP, and lists and calls tools.
// A version the gate does not serve is negotiated down at the handshake
// (server/discover is refused, initialize answers the newest the gate
// serves), never accepted and refused afterwards.
func TestGateVersionsOnBothTransports(t *testing.T) {
	l := newLightGate(t)
	url := l.serveHTTP(t)
	served := mcpgate.ProtocolVersions()
	for _, v := range triedVersions {
		want := v
		if !slices.Contains(served, v) {
			want = served[0]
		}
		for _, transport := range []string{"stdio", "http"} {
			t.Run(transport+"/"+v, func(t *testing.T) {
				var tr mcp.Transport
				if transport == "stdio" {
					in, out := l.run(t, nil)
					tr = &mcp.IOTransport{Reader: out, Writer: in}
				} else {
					tr = &mcp.StreamableClientTransport{Endpoint: url}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
				if err != nil {
					t.Fatalf("connect at %s: %v", v, err)
				}
				defer cs.Close()
				if got := cs.InitializeResult().ProtocolVersion; got != want {
					t.Errorf("negotiated %s, want %s", got, want)
				}
				useGate(t, cs, "v-"+transport+"-"+v)
			})
		}
	}
}

// TestGateHTTPDiscoverRefusesUnservedVersion: over HTTP, server/discover at
// a version the gate does not serve is refused with -32022 and the
// versions it serves (a host that proceeded on a discover result would be
// refused on every later request).
func TestGateHTTPDiscoverRefusesUnservedVersion(t *testing.T) {
	l := newLightGate(t)
	url := l.serveHTTP(t)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{%q:"2026-07-28",%q:{"name":"raw","version":"1"},%q:{}}}}`,
		mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "server/discover")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	msg := raw
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.Lines(string(raw)) {
			if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok {
				msg = []byte(d)
			}
		}
	}
	var r struct {
		Error *struct {
			Code int64                              `json:"code"`
			Data mcp.UnsupportedProtocolVersionData `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &r); err != nil || r.Error == nil || r.Error.Code != mcp.CodeUnsupportedProtocolVersion ||
		!slices.Equal(r.Error.Data.Supported, mcpgate.ProtocolVersions()) {
		t.Fatalf("discover at 2026-07-28 over HTTP: %d %s, want error %d listing %v", resp.StatusCode, raw,
			mcp.CodeUnsupportedProtocolVersion, mcpgate.ProtocolVersions())
	}
}

// TestGateAnswersBeforeUpstreamStarts: on stdio the handshake is answered
// while the upstream is still starting; tools/list waits for it and lists
// its tools once it is up; past --start-timeout tools/list says what is
// going on.
func TestGateAnswersBeforeUpstreamStarts(t *testing.T) {
	l := newLightGate(t)
	up := filepath.Join(l.dir, "up")
	in, out := l.run(t, nil, "--start-after", up)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: out, Writer: in}, nil)
	if err != nil {
		t.Fatalf("handshake while the upstream starts: %v", err)
	}
	defer cs.Close()
	if _, err := os.Stat(up); err == nil {
		t.Fatal("the upstream was started before the handshake")
	}
	listed := make(chan error, 1)
	go func() {
		lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer lcancel()
		lt, err := cs.ListTools(lctx, nil)
		if err == nil && !slices.ContainsFunc(lt.Tools, func(tool *mcp.Tool) bool { return tool.Name == "charge" }) {
			err = fmt.Errorf("no charge among %d tools", len(lt.Tools))
		}
		listed <- err
	}()
	if err := os.WriteFile(up, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-listed; err != nil {
		t.Fatalf("tools/list once the upstream is up: %v", err)
	}
	useGate(t, cs, "slow")

	// An upstream that never comes up: tools/list fails past --start-timeout,
	// with a message that says so.
	in2, out2 := l.run(t, []string{"--start-timeout", "1s"}, "--start-after", filepath.Join(l.dir, "never"))
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: out2, Writer: in2}, nil)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	defer cs2.Close()
	if _, err := cs2.ListTools(ctx, nil); err == nil || !strings.Contains(err.Error(), "start timeout") {
		t.Fatalf("tools/list past the start timeout: %v", err)
	}
}
