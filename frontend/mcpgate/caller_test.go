package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/testkit/clienttest"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue 27: a recorded result is replayed only to the caller that wrote
// it, and only the gate's own API key may claim (and so complete) its
// keys.

// callAs makes a tools/call of the downstream tool name as caller (""
// for an unauthenticated one, as on stdio), the way the HTTP transport
// hands it to the gate after the bearer-token middleware.
func callAs(t *testing.T, g *Gate, caller, name string, args, meta map[string]any) *mcp.CallToolResult {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: name, Arguments: raw, Meta: meta}, Extra: &mcp.RequestExtra{}}
	if caller != "" {
		req.Extra.TokenInfo = &sdkauth.TokenInfo{UserID: caller}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var res *mcp.CallToolResult
	if name == StatusTool {
		res, err = g.status(ctx, req)
	} else {
		res, err = g.callTool(ctx, name, req)
	}
	if err != nil {
		t.Fatalf("%s calls %s: %v", caller, name, err)
	}
	return res
}

// TestCallersNeverShareResults is finding 5 in the gate: a second caller
// repeating a call (derived key) or guessing an explicit key runs the
// call for itself and never gets the first caller's result; the first
// caller's own repeat is replayed.
func TestCallersNeverShareResults(t *testing.T) {
	h := newGateHarness(t)
	for _, tc := range []struct {
		name  string
		order string
		meta  map[string]any
	}{
		{"derived key", "o-derived", nil},
		{"explicit key", "o-explicit", key("reset-1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"order": tc.order, "amount": 5}
			alice := callAs(t, h.gate, "alice", "charge", args, tc.meta)
			if alice.IsError || replayed(alice) {
				t.Fatalf("alice: %+v", alice)
			}
			k, _ := alice.Meta[MetaKey].(string)
			if !strings.HasPrefix(k, "mcp:default:@alice:") {
				t.Errorf("alice's key %q is not scoped to her", k)
			}
			for _, caller := range []string{"mallory", ""} {
				other := callAs(t, h.gate, caller, "charge", args, tc.meta)
				if replayed(other) || text(other) == text(alice) {
					t.Fatalf("caller %q got alice's result: %s", caller, text(other))
				}
			}
			if again := callAs(t, h.gate, "alice", "charge", args, tc.meta); !replayed(again) || text(again) != text(alice) {
				t.Errorf("alice's repeat: %s (replayed %v), want %s", text(again), replayed(again), text(alice))
			}
			if n := h.up.count(tc.order); n != 3 {
				t.Errorf("the upstream ran %s %d times, want 3 (alice, mallory, the unauthenticated caller)", tc.order, n)
			}
			// intentd_status answers a caller about its own keys only.
			if st := callAs(t, h.gate, "alice", StatusTool, map[string]any{"key": k}, nil); st.IsError {
				t.Errorf("alice's status: %s", text(st))
			}
			raw, _ := json.Marshal(map[string]any{"key": k})
			_, err := h.gate.status(context.Background(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: StatusTool, Arguments: raw},
				Extra: &mcp.RequestExtra{TokenInfo: &sdkauth.TokenInfo{UserID: "mallory"}}})
			if err == nil {
				t.Errorf("mallory read the status of alice's key %s", k)
			}
		})
	}
}

// TestLedgerToolNameIsTheLedgers: the default ledger tool of any MCP tool
// name is in the ledger's grammar (fsm.ValidTool), names already in it are
// unchanged, and the gate's copy of the grammar agrees with the ledger's.
func TestLedgerToolNameIsTheLedgers(t *testing.T) {
	long := strings.Repeat("A", 300)
	for _, tc := range []struct {
		upstream, tool, want string // want "" checks validity only
	}{
		{"pay", "charge", "pay.charge"},
		{"pay", "refund-v2_x", "pay.refund-v2_x"},
		{"GitHub", "createIssue", "github.createissue"},
		{"pay", "_private", "pay.x_private"},
		{"-pay", "charge", "x-pay.charge"},
		{"pay", "a..b", "pay.a.x.b"},
		{"pay", "trailing.", "pay.trailing.x"},
		{"pay", "with space/slash:colon", "pay.with_space_slash_colon"},
		{"pay", "ünïcode", ""},
		{"pay", long, ""},
		{"pay", long + "b", ""},
		{"pay", strings.Repeat("a.", 200), ""},
	} {
		got := DefaultLedgerTool(tc.upstream, tc.tool)
		if err := fsm.ValidTool(got); err != nil {
			t.Errorf("%s/%s: %q is not a valid ledger tool: %v", tc.upstream, tc.tool, got, err)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("%s/%s: %q, want %q", tc.upstream, tc.tool, got, tc.want)
		}
	}
	if DefaultLedgerTool("pay", long) == DefaultLedgerTool("pay", long+"b") {
		t.Error("two long names map to one ledger tool")
	}
}

// TestUpperCaseToolIsClaimed: a tool whose MCP name has upper case
// letters is claimed under a ledger tool the ledger accepts (before, its
// claims were refused 400 and the tool could not be called).
func TestUpperCaseToolIsClaimed(t *testing.T) {
	h := newGateHarness(t)
	h.up.server.AddTool(&mcp.Tool{Name: "CreateCharge", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}}, h.up.charge)
	waitFor(t, "the gate to list CreateCharge", func() bool { return h.gate.planOf("CreateCharge") != nil })
	res := callAs(t, h.gate, "", "CreateCharge", map[string]any{"order": "upper"}, key("u-1"))
	if res.IsError || h.up.count("upper") != 1 {
		t.Fatalf("CreateCharge: %s", text(res))
	}
	k, _ := res.Meta[MetaKey].(string)
	in, err := h.ledger.Get(context.Background(), k, client.GetOptions{})
	if err != nil || in.Tool != "pay.createcharge" {
		t.Fatalf("intent %s: %+v, %v", k, in, err)
	}
}

// TestCoTenantCannotClaimGateKeys is finding 4 for the gate: another agent
// key of the namespace computes the key of a call (here its explicit key)
// and claims it to record a forged result; the ledger refuses it
// (key_prefixes reserve mcp: to the gate's key) and the caller's call runs.
func TestCoTenantCannotClaimGateKeys(t *testing.T) {
	ks, plain := clienttest.AgentKeys(t, map[string][]string{"gate": {LedgerKeyPrefix}, "mallory": nil})
	h := newGateHarnessWith(t, []clienttest.MemoryOption{clienttest.WithAuth(ks)}, []client.Option{client.WithAPIKey(plain["gate"])})
	mallory, err := client.New([]string{h.mem.URL}, client.WithAPIKey(plain["mallory"]))
	if err != nil {
		t.Fatal(err)
	}
	k := client.KeyOf("mcp", "default", "k", "pay.charge", "pw-reset-1")
	_, err = mallory.Claim(context.Background(), client.ClaimRequest{Key: k, Tool: "pay.charge", Payload: json.RawMessage(`{}`), Owner: "mallory"})
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != "key_reserved" {
		t.Fatalf("mallory's claim of %s: %v, want 403 key_reserved", k, err)
	}
	res := callAs(t, h.gate, "", "charge", map[string]any{"order": "victim"}, key("pw-reset-1"))
	if res.IsError || replayed(res) || h.up.count("victim") != 1 {
		t.Fatalf("the caller's call: %s (replayed %v)", text(res), replayed(res))
	}
}

// TestKeyReservedIsTheGatesMisconfiguration: when another key reserves
// mcp: and the gate's own key does not list it, the call is answered
// ledger_refused naming the fix, and the tool is not run.
func TestKeyReservedIsTheGatesMisconfiguration(t *testing.T) {
	ks, plain := clienttest.AgentKeys(t, map[string][]string{"gate": nil, "other-gate": {LedgerKeyPrefix}})
	h := newGateHarnessWith(t, []clienttest.MemoryOption{clienttest.WithAuth(ks)}, []client.Option{client.WithAPIKey(plain["gate"])})
	res := callAs(t, h.gate, "", "charge", map[string]any{"order": "mis"}, nil)
	sc := structured(t, res)
	if !res.IsError || sc["status"] != string(StatusLedgerRefused) || !strings.Contains(text(res), `"key_prefixes": ["mcp:"]`) {
		t.Fatalf("answer: %v %s", sc, text(res))
	}
	if n := h.up.count("mis"); n != 0 {
		t.Errorf("the upstream ran %d times", n)
	}
}
