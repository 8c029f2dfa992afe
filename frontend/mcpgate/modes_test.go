package mcpgate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGateBlockMode: a tool a rule blocks is not listed, and a call of it
// is the unknown-tool error (-32602) whatever key it carries: the upstream
// never runs and nothing is claimed.
func TestGateBlockMode(t *testing.T) {
	h := newGateHarness(t, func(c *Config) {
		c.Tools = []ToolRule{{Match: "charge", Mode: ModeBlock}}
	})
	cs := h.connect(nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range res.Tools {
		names[tl.Name] = true
	}
	if names["charge"] || !names["read"] || !names[StatusTool] {
		t.Errorf("listed %v: want read and %s, not charge", names, StatusTool)
	}
	for _, meta := range []map[string]any{key("blk"), {"claudecode/toolUseId": "toolu_blk"}, nil} {
		res, err := callTool(t, cs, "charge", map[string]any{"order": "blk"}, meta)
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, `unknown tool "charge"`) {
			t.Errorf("meta %v: %+v, %v; want the unknown-tool error", meta, res, err)
		}
	}
	if n := h.up.count("blk"); n != 0 {
		t.Errorf("%d effects, want 0", n)
	}
	page, err := h.ledger.List(context.Background(), client.ListOptions{Prefix: "mcp:"})
	if err != nil || len(page.Intents) != 0 {
		t.Errorf("intents %+v (%v), want none", page, err)
	}
	// The other tool is unaffected.
	if r := mustCall(t, cs, "read", nil, nil); r.IsError {
		t.Errorf("read: %+v", r)
	}
}

// TestGatePolicyBlocked: a ledger policy that blocks the claims' tool
// answers blocked, not retryable, and nothing runs; policies select by
// the ledger tool (a rule's ledger_tool moves the tool out of one).
func TestGatePolicyBlocked(t *testing.T) {
	cases := []struct {
		name        string
		policyTools []string
		rules       []ToolRule
		ledgerTool  string
		blocked     bool
	}{
		{name: "by name", policyTools: []string{"pay.charge"}, ledgerTool: "pay.charge", blocked: true},
		{name: "by pattern", policyTools: []string{"pay.*"}, ledgerTool: "pay.charge", blocked: true},
		{name: "renamed ledger tool", policyTools: []string{"payments.charge"}, ledgerTool: "payments.charge", blocked: true,
			rules: []ToolRule{{Match: "charge", LedgerTool: "payments.charge"}}},
		{name: "renamed out of the policy", policyTools: []string{"pay.charge"}, ledgerTool: "payments.charge", blocked: false,
			rules: []ToolRule{{Match: "charge", LedgerTool: "payments.charge"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newGateHarness(t, func(c *Config) { c.Tools = tc.rules })
			ctx := context.Background()
			if _, err := h.ledger.PutPolicy(ctx, client.Policy{Name: "stop", Tools: tc.policyTools, Blocked: true}, 0); err != nil {
				t.Fatal(err)
			}
			cs := h.connect(nil)
			for _, kc := range []struct {
				meta map[string]any
				key  string // "": derived
			}{
				{key("pb"), "mcp:default:k:" + tc.ledgerTool + ":pb"},
				{map[string]any{"claudecode/toolUseId": "toolu_pb"}, "mcp:default:h:" + tc.ledgerTool + ":toolu_pb"},
				{nil, ""},
			} {
				for i := 0; i < 2; i++ { // and again: still blocked, still nothing run
					res := mustCall(t, cs, "charge", map[string]any{"order": "pb"}, kc.meta)
					sc := structured(t, res)
					if !tc.blocked {
						if res.IsError || sc["status"] != nil {
							t.Fatalf("not blocked: %v %s", sc, text(res))
						}
						continue
					}
					k, _ := sc["key"].(string)
					if kc.key == "" && strings.HasPrefix(k, "mcp:default:d:"+tc.ledgerTool+":") {
						kc.key = k
					}
					if !res.IsError || sc["status"] != string(StatusBlocked) || sc["retryable"] != false || k != kc.key ||
						res.Meta[MetaKey] != kc.key || !strings.Contains(text(res), "Do not retry") {
						t.Errorf("meta %v, call %d: %v %s, want blocked under %s", kc.meta, i, sc, text(res), kc.key)
					}
				}
			}
			want := 0
			if !tc.blocked {
				want = 3 // once per key; each second call is a replay
			}
			if n := h.up.count("pb"); n != want {
				t.Errorf("%d effects, want %d", n, want)
			}
		})
	}
}

// TestGateInFlightOutlastsMaxWait: a call whose key is held by a call
// still running waits --max-wait, then answers in_flight (retryable); the
// upstream ran once, and once the first call ends its result is replayed.
func TestGateInFlightOutlastsMaxWait(t *testing.T) {
	const maxWait = 400 * time.Millisecond
	for _, tc := range []struct {
		name   string
		meta   map[string]any
		source KeySource
	}{
		{"explicit key", key("if"), SourceExplicit},
		{"host call id", map[string]any{"claudecode/toolUseId": "toolu_if"}, SourceHost},
		{"derived key", nil, SourceDerived},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newGateHarness(t, func(c *Config) { c.MaxWait = maxWait })
			cs := h.connect(nil)
			args := map[string]any{"order": "if", "mode": "block"}
			firstc := make(chan *mcp.CallToolResult, 1)
			go func() { firstc <- mustCall(t, cs, "charge", args, tc.meta) }()
			select {
			case <-h.up.arrived:
			case <-time.After(30 * time.Second):
				t.Fatal("the first call never reached the upstream")
			}

			start := time.Now()
			res := mustCall(t, cs, "charge", args, tc.meta)
			waited := time.Since(start)
			sc := structured(t, res)
			if !res.IsError || sc["status"] != string(StatusInFlight) || sc["retryable"] != true || sc["retry_after_ms"] != 5000.0 {
				t.Fatalf("answer %v %s, want in_flight", sc, text(res))
			}
			k, _ := sc["key"].(string)
			if res.Meta[MetaKey] != k || !strings.HasPrefix(k, "mcp:default:"+map[KeySource]string{SourceExplicit: "k", SourceHost: "h", SourceDerived: "d"}[tc.source]+":pay.charge:") {
				t.Errorf("key %q, _meta %v", k, res.Meta)
			}
			if waited < maxWait || waited > maxWait+10*time.Second {
				t.Errorf("answered after %v, want about --max-wait (%v)", waited, maxWait)
			}
			if n := h.up.count("if"); n != 1 {
				t.Errorf("%d effects while the first call runs, want 1", n)
			}

			h.up.release <- struct{}{} // the first call's upstream answers
			var first *mcp.CallToolResult
			select {
			case first = <-firstc:
			case <-time.After(30 * time.Second):
				t.Fatal("the first call never answered")
			}
			if first.IsError || replayed(first) || first.Meta[MetaKey] != k || first.Meta[MetaKeySource] != string(tc.source) {
				t.Fatalf("first call: %+v %s", first.Meta, text(first))
			}
			again := mustCall(t, cs, "charge", args, tc.meta)
			if !replayed(again) || text(again) != text(first) || h.up.count("if") != 1 {
				t.Errorf("after the first call: %+v %s, %d effects", again.Meta, text(again), h.up.count("if"))
			}
		})
	}
}
