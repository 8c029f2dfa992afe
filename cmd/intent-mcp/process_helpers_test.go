package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/frontend/mcpgate"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// world is a 3-node intentd cluster, the test upstream as an HTTP server
// process, and what a host needs to launch gates in front of it and of a
// stdio test upstream.
type world struct {
	dir            string
	nodes          []*nodetest.Proc
	addrs          []string
	ledger         *client.Client
	gateBin, upBin string
	effPay, effWeb string // the effects files of the stdio (pay) and HTTP (web) upstreams
	web            *exec.Cmd
	webURL         string
	configFile     string
	extraArgs      []string
	gateLogs       []*nodetest.LockedBuffer
	mu             sync.Mutex
}

func startWorld(t *testing.T) *world {
	t.Helper()
	w := &world{gateBin: nodetest.Binary(t, "cmd/intent-mcp"), upBin: nodetest.Binary(t, "testkit/mcpupstream"), dir: t.TempDir()}
	ibin := nodetest.IntentdBinary(t)
	fast := []string{"--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms", "--auth=off"}
	first := nodetest.StartProc(t, ibin, w.dir, "n1", append(fast, "--bootstrap-expect", "3")...)
	w.nodes = []*nodetest.Proc{first,
		nodetest.StartProc(t, ibin, w.dir, "n2", append(fast, "--bootstrap-expect", "3", "--join", first.Gossip)...),
		nodetest.StartProc(t, ibin, w.dir, "n3", append(fast, "--bootstrap-expect", "3", "--join", first.Gossip)...)}
	for _, n := range w.nodes {
		w.addrs = append(w.addrs, "http://"+n.HTTP)
	}
	nodetest.WaitFor(t, 60*time.Second, "three ready nodes", func() bool {
		return nodetest.Ready(w.nodes[0].HTTP) && nodetest.Ready(w.nodes[1].HTTP) && nodetest.Ready(w.nodes[2].HTTP)
	})
	var err error
	if w.ledger, err = client.New(w.addrs); err != nil {
		t.Fatal(err)
	}
	w.effPay, w.effWeb = filepath.Join(w.dir, "pay.effects"), filepath.Join(w.dir, "web.effects")

	addrFile := filepath.Join(w.dir, "web.addr")
	var webLog nodetest.LockedBuffer
	w.web = exec.Command(w.upBin, "--effects", w.effWeb, "--http", "127.0.0.1:0", "--addr-file", addrFile)
	w.web.Stdout, w.web.Stderr = &webLog, &webLog
	if err := w.web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = w.web.Process.Kill()
		_ = w.web.Wait()
		if t.Failed() {
			t.Logf("log of the web upstream:\n%s", webLog.String())
		}
	})
	nodetest.WaitFor(t, 30*time.Second, "the web upstream's address", func() bool {
		b, err := os.ReadFile(addrFile)
		if err == nil {
			w.webURL = "http://" + string(b) + "/mcp"
		}
		return err == nil
	})

	cfg := map[string]any{
		"upstreams": []map[string]any{
			{"name": "pay", "command": []string{w.upBin, "--effects", w.effPay}},
			{"name": "web", "url": w.webURL},
		},
		"tools": []map[string]any{{"match": "web__read", "mode": "pass"}},
		"scope": "test",
	}
	b, _ := json.Marshal(cfg)
	w.configFile = filepath.Join(w.dir, "gate.json")
	if err := os.WriteFile(w.configFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			w.mu.Lock()
			defer w.mu.Unlock()
			for i, l := range w.gateLogs {
				t.Logf("log of gate %d:\n%s", i, l.String())
			}
		}
	})
	return w
}

// gateArgs are the flags of every gate of the world.
func (w *world) gateArgs(extra ...string) []string {
	return append([]string{"--ledger", strings.Join(w.addrs, ","), "--config", w.configFile, "--lease", "2s",
		"--max-wait", "20s", "--log-level", "debug"}, extra...)
}

func (w *world) newLog() *nodetest.LockedBuffer {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := &nodetest.LockedBuffer{}
	w.gateLogs = append(w.gateLogs, l)
	return l
}

// host is an MCP host that launched a gate process over stdio, as a
// desktop host does.
type host struct {
	addr    string // --listen of an HTTP gate
	cs      *mcp.ClientSession
	cmd     *exec.Cmd
	changed chan struct{}
	mu      sync.Mutex
	prog    []float64
}

func (w *world) launch(t *testing.T) *host {
	t.Helper()
	h := &host{changed: make(chan struct{}, 16)}
	h.cmd = exec.Command(w.gateBin, w.gateArgs()...)
	h.cmd.Stderr = w.newLog()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case h.changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			h.mu.Lock()
			h.prog = append(h.prog, r.Params.Progress)
			h.mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: h.cmd, TerminateDuration: 5 * time.Second}, nil)
	if err != nil {
		t.Fatalf("launching the gate: %v", err)
	}
	h.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return h
}

// serveHTTP starts a gate serving streamable HTTP (--listen) and returns a
// host connected to it.
func (w *world) serveHTTP(t *testing.T) *host {
	t.Helper()
	addr := nodetest.FreePort(t)
	h := &host{addr: addr, changed: make(chan struct{}, 16)}
	h.cmd = exec.Command(w.gateBin, w.gateArgs("--listen", addr, "--insecure-no-caller-auth")...)
	log := w.newLog()
	h.cmd.Stdout, h.cmd.Stderr = log, log
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
	})
	nodetest.WaitFor(t, 60*time.Second, "the HTTP gate to serve", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-http-host", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connecting to the HTTP gate: %v", err)
	}
	h.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return h
}

// metric is the value of one series on an HTTP gate's /metrics (a line
// that starts with series), or -1 when it is absent.
func (h *host) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + h.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// kill SIGKILLs the gate process.
func (h *host) kill() {
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	_ = h.cs.Close()
}

// call makes one tools/call, bounded (a hang guard).
func (h *host) call(t *testing.T, name string, args map[string]any, meta map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return h.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
}

func (h *host) mustCall(t *testing.T, name string, args map[string]any, meta map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := h.call(t, name, args, meta)
	if err != nil {
		t.Fatalf("call %s %v: %v", name, args, err)
	}
	return res
}

// toolNames lists the host's view of the gate's tools.
func (h *host) toolNames(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, tl := range res.Tools {
		out[tl.Name] = true
	}
	return out
}

// effects counts the lines of an effects file for (tool, order).
func effects(t *testing.T, file, tool, order string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, l := range bytes.Split(data, []byte("\n")) {
		var r map[string]any
		if json.Unmarshal(l, &r) == nil && r["tool"] == tool && r["order"] == order {
			n++
		}
	}
	return n
}

func explicitKey(k string) map[string]any { return map[string]any{mcpgate.MetaIdempotencyKey: k} }

func sc(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

func isReplay(res *mcp.CallToolResult) bool { return res.Meta[mcpgate.MetaReplayed] == true }

func describe(res *mcp.CallToolResult) string {
	return fmt.Sprintf("isError=%v meta=%v structured=%v text=%q", res.IsError, res.Meta, res.StructuredContent, textOf(res))
}
