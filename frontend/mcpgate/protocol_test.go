package mcpgate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawTools is the tools/list of rawUpstream: one tool without annotations,
// one with some hints, one read-only with a title.
const rawTools = `[{"name":"plain","inputSchema":{"type":"object"}},` +
	`{"name":"hinted","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true,"openWorldHint":false}},` +
	`{"name":"ro","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"title":"Read"}}]`

// rawUpstream is an MCP server written by hand (not with the go-sdk, which
// spells every annotation out): what it sends is exactly what it means.
func rawUpstream() mcp.Transport {
	c1, c2 := net.Pipe()
	go func() {
		defer c2.Close()
		sc := bufio.NewScanner(c2)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
				continue
			}
			reply := `"result":{}`
			switch m.Method {
			case "server/discover":
				reply = `"error":{"code":-32601,"message":"method not found"}`
			case "initialize":
				reply = `"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`
			case "tools/list":
				reply = `"result":{"tools":` + rawTools + `}`
			}
			if _, err := fmt.Fprintf(c2, `{"jsonrpc":"2.0","id":%s,%s}`+"\n", m.ID, reply); err != nil {
				return
			}
		}
	}()
	return &mcp.IOTransport{Reader: c1, Writer: c1}
}

// rawHost is a downstream connection that reads and writes JSON-RPC lines.
type rawHost struct {
	t     *testing.T
	conn  net.Conn
	lines chan []byte
}

func newRawHost(t *testing.T, g *Gate) *rawHost {
	c1, c2 := net.Pipe()
	if _, err := g.Server().Connect(context.Background(), LiftSEP3182(c2, c2), nil); err != nil {
		t.Fatal(err)
	}
	h := &rawHost{t: t, conn: c1, lines: make(chan []byte, 64)}
	t.Cleanup(func() { _ = c1.Close() })
	go func() {
		sc := bufio.NewScanner(c1)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			h.lines <- slices.Clone(sc.Bytes())
		}
		close(h.lines)
	}()
	return h
}

// rawReply is a JSON-RPC response as a host reads it.
type rawReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// call sends one request and returns its response (notifications and
// other messages in between are skipped).
func (h *rawHost) call(id int, method string, params string) rawReply {
	h.t.Helper()
	if _, err := fmt.Fprintf(h.conn, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params); err != nil {
		h.t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				h.t.Fatalf("%s: the connection closed", method)
			}
			var r rawReply
			if json.Unmarshal(line, &r) == nil && string(r.ID) == fmt.Sprint(id) {
				return r
			}
		case <-timeout:
			h.t.Fatalf("%s: no answer", method)
		}
	}
}

func (h *rawHost) notify(method string) {
	h.t.Helper()
	if _, err := fmt.Fprintf(h.conn, `{"jsonrpc":"2.0","method":%q}`+"\n", method); err != nil {
		h.t.Fatal(err)
	}
}

const rawInitParams = `{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`

// TestGateNegotiationAndAnnotations: a version the gate does not serve is
// refused at negotiation (server/discover answers -32022 with the
// versions it serves; initialize answers the newest of them), a repeated
// initialize is an invalid request (never code 0), and listed annotations
// are what the upstream sent: absent hints stay absent.
func TestGateNegotiationAndAnnotations(t *testing.T) {
	h := newGateHarness(t, func(c *Config) { c.Upstreams = []Upstream{{Name: "raw", Transport: rawUpstream}} })
	host := newRawHost(t, h.gate)

	discover := fmt.Sprintf(`{"_meta":{%q:"2026-07-28",%q:{"name":"raw","version":"1"},%q:{}}}`,
		mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities)
	r := host.call(1, "server/discover", discover)
	if r.Error == nil || r.Error.Code != mcp.CodeUnsupportedProtocolVersion {
		t.Fatalf("discover at 2026-07-28: %s %+v, want error %d", r.Result, r.Error, mcp.CodeUnsupportedProtocolVersion)
	}
	var data mcp.UnsupportedProtocolVersionData
	if err := json.Unmarshal(r.Error.Data, &data); err != nil || !slices.Equal(data.Supported, ProtocolVersions()) {
		t.Errorf("discover refusal data %s, want supported %v", r.Error.Data, ProtocolVersions())
	}

	r = host.call(2, "initialize", fmt.Sprintf(rawInitParams, "2026-07-28"))
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &init) != nil || init.ProtocolVersion != ProtocolVersions()[0] {
		t.Fatalf("initialize at 2026-07-28: %s %+v, want %s", r.Result, r.Error, ProtocolVersions()[0])
	}
	host.notify("notifications/initialized")

	r = host.call(3, "initialize", fmt.Sprintf(rawInitParams, "2025-11-25"))
	if r.Error == nil || r.Error.Code != -32600 {
		t.Errorf("a second initialize: %s %+v, want error -32600", r.Result, r.Error)
	}

	r = host.call(4, "tools/list", `{}`)
	if r.Error != nil {
		t.Fatalf("tools/list: %+v", r.Error)
	}
	var list struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(r.Result, &list); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"plain":  "",
		"hinted": `{"destructiveHint":true,"openWorldHint":false}`,
		"ro":     `{"readOnlyHint":true,"title":"Read"}`,
	}
	seen := 0
	for _, tool := range list.Tools {
		var name string
		_ = json.Unmarshal(tool["name"], &name)
		w, ok := want[name]
		if !ok {
			continue
		}
		seen++
		got := ""
		if a, ok := tool["annotations"]; ok {
			var m map[string]any
			_ = json.Unmarshal(a, &m)
			b, _ := json.Marshal(m) // sorted keys
			got = string(b)
		}
		if got != w {
			t.Errorf("%s: annotations %s, want %s (as the upstream sent them)", name, got, w)
		}
	}
	if seen != len(want) {
		t.Errorf("listed %s", r.Result)
	}
}
