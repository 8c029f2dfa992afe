package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests run the gate in process: an in-memory ledger node, the
// gate, an upstream MCP server and a host, the two MCP hops over
// in-memory transports. cmd/intent-mcp's tests run the same over real
// processes.

func TestGateExplicitKeyRunsOnceAndReplays(t *testing.T) {
	h := newGateHarness(t)
	cs := h.connect(nil)
	args := map[string]any{"order": "o1", "amount": 1299}
	first := mustCall(t, cs, "charge", args, key("k1"))
	if first.IsError || replayed(first) {
		t.Fatalf("first: %+v", first)
	}
	again := mustCall(t, cs, "charge", map[string]any{"amount": 1299.0, "order": "o1"}, key("k1"))
	if !replayed(again) || text(again) != text(first) {
		t.Fatalf("again: %+v, want the replay of %+v", again, first)
	}
	if got, want := structured(t, again)["charge_id"], structured(t, first)["charge_id"]; got != want {
		t.Errorf("replayed charge_id %v, want %v", got, want)
	}
	if n := h.up.count("o1"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	// What the upstream saw: the grant's tokens and the ledger key, no
	// hop metadata.
	m := h.up.meta("o1")
	if m[MetaFencingToken] == nil || m[MetaExecutionToken] == "" || m[MetaIdempotencyKey] != "mcp:default:k:pay.charge:k1" {
		t.Errorf("upstream meta %v", m)
	}
	// What the host saw: the upstream's own meta kept, the protocol's (the
	// gate's server info now, not the upstream's) and a forged gate key
	// replaced.
	info, _ := first.Meta["io.modelcontextprotocol/serverInfo"].(map[string]any)
	if first.Meta["fake/kept"] != "yes" || (info != nil && info["name"] != "intent-mcp") || first.Meta[MetaReplayed] != nil ||
		first.Meta[MetaKey] != "mcp:default:k:pay.charge:k1" {
		t.Errorf("result meta %v", first.Meta)
	}
	in, err := h.ledger.Get(context.Background(), "mcp:default:k:pay.charge:k1", client.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p Payload
	if err := json.Unmarshal(in.Payload, &p); err != nil || p.KeySource != "explicit" || p.Tool != "charge" || p.Upstream != "pay" {
		t.Errorf("payload %s (%v)", in.Payload, err)
	}
}

func TestGateLostResponseReplays(t *testing.T) {
	h := newGateHarness(t)
	cs := h.connect(nil)
	args := map[string]any{"order": "lost", "mode": "block"}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge", Arguments: args, Meta: key("lost")})
		errc <- err
	}()
	<-h.up.arrived
	cancel() // the host gives up: notifications/cancelled to the gate
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call answered")
	}
	// A new call (a new JSON-RPC id) with the same key waits for the first.
	resc := make(chan *mcp.CallToolResult, 1)
	go func() { resc <- mustCall(t, cs, "charge", args, key("lost")) }()
	waitFor(t, "the retry to find the call in flight", func() bool {
		a, err := h.ledger.Audit(context.Background(), "mcp:default:k:pay.charge:lost")
		return err == nil && len(a.Events) >= 2
	})
	close(h.up.release)
	res := <-resc
	if !replayed(res) || res.IsError {
		t.Fatalf("retry: %+v", res)
	}
	if n := h.up.count("lost"); n != 1 {
		t.Errorf("%d effects", n)
	}
}

func TestGateConcurrentCallsRunOnce(t *testing.T) {
	h := newGateHarness(t)
	cs := h.connect(nil)
	var wg sync.WaitGroup
	results := make([]*mcp.CallToolResult, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = mustCall(t, cs, "charge", map[string]any{"order": "c"}, key("c"))
		}()
	}
	wg.Wait()
	fresh := 0
	for _, r := range results {
		if r.IsError {
			t.Fatalf("a call failed: %+v %s", r, text(r))
		}
		if !replayed(r) {
			fresh++
		}
		if structured(t, r)["charge_id"] != "ch_c_1" {
			t.Errorf("result %v", structured(t, r))
		}
	}
	if fresh != 1 || h.up.count("c") != 1 {
		t.Errorf("%d fresh results, %d effects; want 1 and 1", fresh, h.up.count("c"))
	}
}

func TestGateDivergentIsInvalidParams(t *testing.T) {
	h := newGateHarness(t)
	cs := h.connect(nil)
	mustCall(t, cs, "charge", map[string]any{"order": "d", "amount": 1}, key("d"))
	_, err := callTool(t, cs, "charge", map[string]any{"order": "d", "amount": 2}, key("d"))
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("err %v, want invalid params", err)
	}
	var data map[string]string
	if err := json.Unmarshal(werr.Data, &data); err != nil || data["code"] != ConflictCode || data["fingerprint"] == "" ||
		data["request_fingerprint"] == "" || data["fingerprint"] == data["request_fingerprint"] {
		t.Errorf("data %s", werr.Data)
	}
	// A host that drops the data still shows what happened.
	for _, want := range []string{ConflictCode, data["fingerprint"], data["request_fingerprint"]} {
		if !strings.Contains(werr.Message, want) {
			t.Errorf("message %q lacks %q", werr.Message, want)
		}
	}
	if n := h.up.count("d"); n != 1 {
		t.Errorf("%d effects", n)
	}
}

func TestGateUpstreamLostMidCallIsInDoubt(t *testing.T) {
	h := newGateHarness(t)
	cs := h.connect(nil)
	args := map[string]any{"order": "gone", "mode": "hang"}
	resc := make(chan *mcp.CallToolResult, 1)
	go func() { resc <- mustCall(t, cs, "charge", args, key("gone")) }()
	<-h.up.arrived
	h.up.drop()
	res := <-resc
	if !res.IsError || structured(t, res)["status"] != string(StatusInDoubt) {
		t.Fatalf("answer %+v %s", res, text(res))
	}
	waitFor(t, "the upstream to be reconnected", func() bool { return h.gate.ups[0].session() != nil })
	// The gate cut the lease (2 s) to the ledger's smallest: the key is in
	// doubt as soon as that passes, not when the lease would have.
	h.mem.Ledger.Advance(2 * shortLease)
	for i := 0; i < 2; i++ {
		again := mustCall(t, cs, "charge", args, key("gone"))
		if sc := structured(t, again); !again.IsError || sc["status"] != string(StatusInDoubt) || sc["retryable"] != false {
			t.Errorf("retry %d: %v %s", i, sc, text(again))
		}
	}
	if n := h.up.count("gone"); n != 1 {
		t.Errorf("%d effects", n)
	}
}

func TestGateUpstreamErrors(t *testing.T) {
	h := newGateHarness(t)
	cs := h.connect(nil)
	// Invalid params: the call never ran; recorded failed, so it runs again.
	for i := 0; i < 2; i++ {
		_, err := callTool(t, cs, "charge", map[string]any{"order": "inv", "mode": "invalid"}, key("inv"))
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("err %v", err)
		}
	}
	in, _ := h.ledger.Get(context.Background(), "mcp:default:k:pay.charge:inv", client.GetOptions{})
	if in.State != client.StateFailed || in.Generation != 2 {
		t.Errorf("intent %s generation %d", in.State, in.Generation)
	}
	// An internal error after the effect: recorded, replayed, never run again.
	for i := 0; i < 2; i++ {
		_, err := callTool(t, cs, "charge", map[string]any{"order": "int", "mode": "internal"}, key("int"))
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError {
			t.Fatalf("err %v", err)
		}
	}
	if n := h.up.count("int"); n != 1 {
		t.Errorf("%d effects", n)
	}
	// An isError result is a result: recorded and replayed.
	first := mustCall(t, cs, "charge", map[string]any{"order": "ie", "mode": "iserror"}, key("ie"))
	again := mustCall(t, cs, "charge", map[string]any{"order": "ie", "mode": "iserror"}, key("ie"))
	if !first.IsError || !again.IsError || !replayed(again) || h.up.count("ie") != 1 {
		t.Errorf("isError: %+v / %+v, %d effects", first, again, h.up.count("ie"))
	}
}

func TestGateDerivedKeysAndWindow(t *testing.T) {
	h := newGateHarness(t, func(c *Config) { c.Keys.Window = Duration(time.Minute) })
	cs := h.connect(nil)
	args := map[string]any{"order": "w", "amount": 5}
	first := mustCall(t, cs, "charge", args, nil)
	if first.IsError || first.Meta[MetaKeySource] != string(SourceDerived) {
		t.Fatalf("first %+v", first)
	}
	if again := mustCall(t, cs, "charge", map[string]any{"amount": 5.0, "order": "w"}, nil); !replayed(again) {
		t.Errorf("identical call in the window ran again: %+v", again)
	}
	// Into the next window, under a minute after the first: still the same
	// call (the previous window's key is recent).
	h.advance(50 * time.Second)
	if again := mustCall(t, cs, "charge", args, nil); !replayed(again) {
		t.Errorf("a retry across the window boundary ran again")
	}
	// A window later the same arguments are a new call.
	h.advance(2 * time.Minute)
	if again := mustCall(t, cs, "charge", args, nil); replayed(again) || h.up.count("w") != 2 {
		t.Errorf("a call a window later was replayed (%d effects)", h.up.count("w"))
	}
	// A host call id wins over derivation: two ids, two runs.
	for _, id := range []string{"toolu_1", "toolu_2", "toolu_1"} {
		mustCall(t, cs, "charge", map[string]any{"order": "host"}, map[string]any{"claudecode/toolUseId": id})
	}
	if n := h.up.count("host"); n != 2 {
		t.Errorf("host ids: %d effects, want 2", n)
	}
}

func TestGateBadExplicitKey(t *testing.T) {
	h := newGateHarness(t)
	cs := h.connect(nil)
	for _, k := range []any{"", 12, map[string]any{"a": 1}} {
		_, err := callTool(t, cs, "charge", map[string]any{"order": "bad"}, map[string]any{MetaIdempotencyKey: k})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("key %v: err %v", k, err)
		}
	}
	if n := h.up.count("bad"); n != 0 {
		t.Errorf("%d effects", n)
	}
}

func TestGateReadOnlyPassesThrough(t *testing.T) {
	h := newGateHarness(t)
	cs := h.connect(nil)
	a := mustCall(t, cs, "read", nil, key("r"))
	b := mustCall(t, cs, "read", nil, key("r"))
	if structured(t, a)["reads"] != 1.0 || structured(t, b)["reads"] != 2.0 || replayed(b) {
		t.Errorf("reads %v %v", structured(t, a), structured(t, b))
	}
	page, err := h.ledger.List(context.Background(), client.ListOptions{Prefix: "mcp:"})
	if err != nil || len(page.Intents) != 0 {
		t.Errorf("intents %v (%v)", page, err)
	}
}

func TestGatePendingApproval(t *testing.T) {
	h := newGateHarness(t)
	ctx := context.Background()
	if _, err := h.ledger.PutPolicy(ctx, client.Policy{Name: "approve", Tools: []string{"pay.charge"}, RequireApproval: true, ApprovalsRequired: 1}, 0); err != nil {
		t.Fatal(err)
	}
	cs := h.connect(nil)
	args := map[string]any{"order": "ap"}
	res := mustCall(t, cs, "charge", args, key("ap"))
	sc := structured(t, res)
	if res.IsError || sc["status"] != string(StatusPendingApproval) || sc["approve_url"] == "" || h.up.count("ap") != 0 {
		t.Fatalf("pending: %v %s", sc, text(res))
	}
	k := sc["key"].(string)
	st := mustCall(t, cs, StatusTool, map[string]any{"key": k}, nil)
	if structured(t, st)["state"] != string(client.StatePendingApproval) {
		t.Errorf("status %v", structured(t, st))
	}
	if _, err := h.ledger.Approve(ctx, client.DecisionRequest{Key: k, Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	if st := mustCall(t, cs, StatusTool, map[string]any{"key": k}, nil); structured(t, st)["state"] != string(client.StateApproved) {
		t.Errorf("status %v", structured(t, st))
	}
	if res := mustCall(t, cs, "charge", args, key("ap")); res.IsError || replayed(res) || h.up.count("ap") != 1 {
		t.Errorf("after approval: %+v, %d effects", res, h.up.count("ap"))
	}
	if res := mustCall(t, cs, "charge", args, key("ap")); !replayed(res) || h.up.count("ap") != 1 {
		t.Errorf("again: %+v", res)
	}
	if _, err := callTool(t, cs, StatusTool, map[string]any{"key": "other:key"}, nil); err == nil {
		t.Error("status of a key outside the gate's scope answered")
	}
}

func TestGateProgressRelayed(t *testing.T) {
	h := newGateHarness(t)
	var mu sync.Mutex
	var got []float64
	cs := h.connect(&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		if r.Params.ProgressToken == "mine" {
			got = append(got, r.Params.Progress)
			if len(got) == 2 {
				close(h.up.progressSeen) // the upstream may answer now
			}
		}
	}})
	p := &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"order": "pr", "mode": "progress"}, Meta: key("pr")}
	p.SetProgressToken("mine")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || h.up.count("pr") != 1 {
		t.Fatalf("call: %+v, %d effects", res, h.up.count("pr"))
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []float64{1, 2}) {
		t.Errorf("progress relayed to the caller: %v, want [1 2]", got)
	}
}

func TestGateToolListFollowsUpstream(t *testing.T) {
	h := newGateHarness(t)
	changed := make(chan struct{}, 8)
	cs := h.connect(&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	names := func() map[string]bool {
		out := map[string]bool{}
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			out[tl.Name] = true
		}
		return out
	}
	if n := names(); !n["charge"] || !n["read"] || !n[StatusTool] {
		t.Fatalf("tools %v", n)
	}
	h.up.server.AddTool(&mcp.Tool{Name: "refund", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	<-changed
	waitFor(t, "refund to be listed", func() bool { return names()["refund"] })
	h.up.server.RemoveTools("read")
	waitFor(t, "read to be gone", func() bool { return !names()["read"] })
}

func TestGateLeaseComesFromThePolicyUnlessSet(t *testing.T) {
	h := newGateHarness(t, func(c *Config) { c.Lease = 0 })
	ctx := context.Background()
	if _, err := h.ledger.PutPolicy(ctx, client.Policy{Name: "slow", Tools: []string{"pay.charge"}, LeaseMS: 7000}, 0); err != nil {
		t.Fatal(err)
	}
	cs := h.connect(nil)
	res := mustCall(t, cs, "charge", map[string]any{"order": "pl"}, key("pl"))
	in, err := h.ledger.Get(ctx, res.Meta[MetaKey].(string), client.GetOptions{})
	if err != nil || in.LeaseMS != 7000 {
		t.Fatalf("intent %+v, %v: want the policy's 7 s lease", in, err)
	}
}

func TestGateCutsTheCallWhenItsLeaseIsLost(t *testing.T) {
	h := newGateHarness(t) // a 2 s lease, renewed every 667 ms
	cs := h.connect(nil)
	resc := make(chan *mcp.CallToolResult, 1)
	go func() { resc <- mustCall(t, cs, "charge", map[string]any{"order": "cut", "mode": "block"}, key("cut")) }()
	<-h.up.arrived
	h.mem.Ledger.Advance(time.Hour) // the lease passes: the next renewal is refused (in_doubt)
	res := <-resc                   // answered without the tool being released
	if sc := structured(t, res); !res.IsError || sc["status"] != string(StatusInDoubt) {
		t.Fatalf("answer %v %s", sc, text(res))
	}
}

func TestGatePendingApprovalElicitsTheConsoleLink(t *testing.T) {
	h := newGateHarness(t)
	ctx := context.Background()
	if _, err := h.ledger.PutPolicy(ctx, client.Policy{Name: "approve", Tools: []string{"pay.charge"}, RequireApproval: true, ApprovalsRequired: 1}, 0); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []*mcp.ElicitParams
	approve := true
	cs := h.connect(&mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, req.Params)
			ok := approve
			mu.Unlock()
			if ok { // the person opens the link and approves there
				if _, err := h.ledger.Approve(ctx, client.DecisionRequest{Key: req.Params.ElicitationID, Actor: "ops"}); err != nil {
					t.Error(err)
				}
			}
			return &mcp.ElicitResult{Action: "accept"}, nil // what the host says decides nothing
		},
	})

	// Approved while the host showed the link: the call runs once.
	res := mustCall(t, cs, "charge", map[string]any{"order": "el"}, key("el"))
	if res.IsError || replayed(res) || h.up.count("el") != 1 {
		t.Fatalf("after the elicitation: %v %s, %d effects", structured(t, res), text(res), h.up.count("el"))
	}
	mu.Lock()
	if len(asked) != 1 || asked[0].Mode != "url" || !strings.Contains(asked[0].URL, "/ui/intent?key=") {
		t.Fatalf("asked %+v", asked)
	}
	approve = false
	mu.Unlock()

	// Accepted without an approval: the ledger still says pending, so the
	// call does not run and the host is not asked again in a loop.
	res = mustCall(t, cs, "charge", map[string]any{"order": "el2"}, key("el2"))
	if sc := structured(t, res); res.IsError || sc["status"] != string(StatusPendingApproval) || h.up.count("el2") != 0 {
		t.Fatalf("accepted, not approved: %v %s", sc, text(res))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 {
		t.Errorf("asked %d times, want 2 (once per call)", len(asked))
	}
}
