package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/frontend/mcpgate"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// These tests run everything as it runs in production: a 3-node intentd
// cluster, the gate launched by a real go-sdk host over stdio (and one
// serving streamable HTTP), a stdio upstream the gate runs and an HTTP
// upstream of its own, all real processes (kill -9 is a real crash). The
// upstreams append every effect to a file with O_SYNC, which the tests
// count. Two upstreams, so tools are prefixed: pay__charge, web__charge.

func TestGateProcesses(t *testing.T) {
	w := startWorld(t)
	h := w.launch(t)
	ctx := context.Background()

	t.Run("tools are prefixed and classified", func(t *testing.T) {
		names := h.toolNames(t)
		for _, n := range []string{"pay__charge", "pay__read", "web__charge", "web__refund", mcpgate.StatusTool} {
			if !names[n] {
				t.Errorf("%s not listed: %v", n, names)
			}
		}
	})

	t.Run("a duplicate call runs once and replays the result", func(t *testing.T) {
		args := map[string]any{"order": "dup", "amount": 1299}
		first := h.mustCall(t, "pay__charge", args, explicitKey("dup"))
		again := h.mustCall(t, "pay__charge", map[string]any{"amount": 1299.0, "order": "dup"}, explicitKey("dup"))
		if first.IsError || isReplay(first) || !isReplay(again) {
			t.Fatalf("first %s\nagain %s", describe(first), describe(again))
		}
		if sc(t, first)["charge_id"] != "ch_dup_1" || sc(t, again)["charge_id"] != "ch_dup_1" || textOf(first) != textOf(again) {
			t.Errorf("first %s\nagain %s", describe(first), describe(again))
		}
		if n := effects(t, w.effPay, "charge", "dup"); n != 1 {
			t.Errorf("%d effects, want 1", n)
		}
		// The upstream saw the grant's fencing token and the ledger key.
		if sc(t, first)["fencing_token"] == nil {
			t.Errorf("no fencing token reached the upstream: %s", describe(first))
		}
	})

	t.Run("a lost response is replayed to the retry", func(t *testing.T) {
		args := map[string]any{"order": "lost", "mode": "block"}
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := h.cs.CallTool(cctx, &mcp.CallToolParams{Name: "pay__charge", Arguments: args, Meta: explicitKey("lost")})
			errc <- err
		}()
		nodetest.WaitFor(t, 30*time.Second, "the effect", func() bool { return effects(t, w.effPay, "charge", "lost") == 1 })
		cancel() // the host gives up on the call
		if err := <-errc; err == nil {
			t.Fatal("the abandoned call answered")
		}
		// The host calls again: a new JSON-RPC id, the same key. It waits for
		// the first call, which the gate saw through.
		resc := make(chan *mcp.CallToolResult, 1)
		go func() { resc <- h.mustCall(t, "pay__charge", args, explicitKey("lost")) }()
		waitAudit(t, w.ledger, "mcp:test:k:pay.charge:lost", "in_flight")
		if err := os.WriteFile(w.effPay+".release", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		res := <-resc
		if res.IsError || !isReplay(res) || sc(t, res)["charge_id"] != "ch_lost_1" {
			t.Fatalf("retry: %s", describe(res))
		}
		if n := effects(t, w.effPay, "charge", "lost"); n != 1 {
			t.Errorf("%d effects", n)
		}
	})

	t.Run("10 concurrent calls on one key make one effect", func(t *testing.T) {
		var wg sync.WaitGroup
		results := make([]*mcp.CallToolResult, 10)
		errs := make([]error, 10)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = h.call(t, "web__charge", map[string]any{"order": "conc", "amount": 7}, explicitKey("conc"))
			}()
		}
		wg.Wait()
		fresh := 0
		for i, r := range results {
			if errs[i] != nil || r.IsError || sc(t, r)["charge_id"] != "ch_conc_1" {
				t.Fatalf("call %d: %v %v", i, errs[i], r)
			}
			if !isReplay(r) {
				fresh++
			}
		}
		if n := effects(t, w.effWeb, "charge", "conc"); n != 1 || fresh != 1 {
			t.Errorf("%d effects, %d fresh answers; want 1 and 1", n, fresh)
		}
	})

	t.Run("divergent arguments are a conflict with both fingerprints", func(t *testing.T) {
		h.mustCall(t, "pay__charge", map[string]any{"order": "div", "amount": 1}, explicitKey("div"))
		_, err := h.call(t, "pay__charge", map[string]any{"order": "div", "amount": 2}, explicitKey("div"))
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("err %v, want invalid params", err)
		}
		var data map[string]string
		if json.Unmarshal(werr.Data, &data) != nil || data["code"] != mcpgate.ConflictCode || len(data["fingerprint"]) != 64 ||
			len(data["request_fingerprint"]) != 64 || data["fingerprint"] == data["request_fingerprint"] {
			t.Errorf("data %s", werr.Data)
		}
		if n := effects(t, w.effPay, "charge", "div"); n != 1 {
			t.Errorf("%d effects", n)
		}
	})

	t.Run("a read-only tool passes straight through", func(t *testing.T) {
		a := h.mustCall(t, "pay__read", nil, explicitKey("r"))
		b := h.mustCall(t, "pay__read", nil, explicitKey("r"))
		if isReplay(b) || sc(t, b)["reads"].(float64) != sc(t, a)["reads"].(float64)+1 {
			t.Errorf("reads %s / %s", describe(a), describe(b))
		}
		page, err := w.ledger.List(ctx, client.ListOptions{Prefix: "mcp:test:k:pay.read"})
		if err != nil || len(page.Intents) != 0 {
			t.Errorf("read claimed: %v %v", page, err)
		}
	})

	t.Run("an approval policy holds the call until approved, then it runs once", func(t *testing.T) {
		if _, err := w.ledger.PutPolicy(ctx, client.Policy{Name: "refunds", Tools: []string{"web.refund"}, RequireApproval: true, ApprovalsRequired: 1}, 0); err != nil {
			t.Fatal(err)
		}
		args := map[string]any{"order": "ap"}
		res := h.mustCall(t, "web__refund", args, explicitKey("ap"))
		s := sc(t, res)
		if res.IsError || s["status"] != "pending_approval" || !strings.HasSuffix(s["approve_url"].(string), "/approve") {
			t.Fatalf("pending: %s", describe(res))
		}
		key := s["key"].(string)
		if st := h.mustCall(t, mcpgate.StatusTool, map[string]any{"key": key}, nil); sc(t, st)["state"] != "pending_approval" {
			t.Errorf("status %s", describe(st))
		}
		if n := effects(t, w.effWeb, "refund", "ap"); n != 0 {
			t.Fatalf("%d effects before approval", n)
		}
		if _, err := w.ledger.Approve(ctx, client.DecisionRequest{Key: key, Actor: "ops@example.com"}); err != nil {
			t.Fatal(err)
		}
		if st := h.mustCall(t, mcpgate.StatusTool, map[string]any{"key": key}, nil); sc(t, st)["state"] != "approved" {
			t.Errorf("status %s", describe(st))
		}
		ran := h.mustCall(t, "web__refund", args, explicitKey("ap"))
		again := h.mustCall(t, "web__refund", args, explicitKey("ap"))
		if ran.IsError || isReplay(ran) || !isReplay(again) {
			t.Errorf("ran %s\nagain %s", describe(ran), describe(again))
		}
		if n := effects(t, w.effWeb, "refund", "ap"); n != 1 {
			t.Errorf("%d effects", n)
		}
	})

	t.Run("an upstream adding a tool at runtime shows up downstream", func(t *testing.T) {
		for len(h.changed) > 0 {
			<-h.changed
		}
		h.mustCall(t, "pay__add_tool", map[string]any{"name": "late"}, nil)
		select {
		case <-h.changed:
		case <-time.After(30 * time.Second):
			t.Fatal("no notifications/tools/list_changed")
		}
		nodetest.WaitFor(t, 30*time.Second, "pay__late to be listed", func() bool { return h.toolNames(t)["pay__late"] })
		res := h.mustCall(t, "pay__late", map[string]any{"order": "late"}, nil)
		again := h.mustCall(t, "pay__late", map[string]any{"order": "late"}, nil) // derived key: the same call
		if res.IsError || !isReplay(again) || effects(t, w.effPay, "late", "late") != 1 {
			t.Errorf("late tool: %s / %s", describe(res), describe(again))
		}
	})

	t.Run("progress of the upstream reaches the caller", func(t *testing.T) {
		h.mu.Lock()
		h.prog = nil
		h.mu.Unlock()
		p := &mcp.CallToolParams{Name: "web__charge", Arguments: map[string]any{"order": "prog", "mode": "progress"}, Meta: explicitKey("prog")}
		p.SetProgressToken("tok-1")
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		seen := make(chan error, 1)
		go func() { // tell the upstream its caller got the progress, so it may answer
			got := func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				return len(h.prog) == 3
			}
			for !got() {
				select {
				case <-cctx.Done():
					seen <- cctx.Err()
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			seen <- os.WriteFile(w.effWeb+".progress-seen", nil, 0o600)
		}()
		if res, err := h.cs.CallTool(cctx, p); err != nil || res.IsError {
			t.Fatalf("%v %v", res, err)
		}
		if err := <-seen; err != nil {
			t.Fatalf("three progress notifications: %v", err)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if !slices.Equal(h.prog, []float64{1, 2, 3}) {
			t.Errorf("progress relayed: %v, want [1 2 3]", h.prog)
		}
	})

	t.Run("gates share keys: another gate over HTTP replays", func(t *testing.T) {
		other := w.serveHTTP(t)
		first := h.mustCall(t, "web__charge", map[string]any{"order": "share"}, nil) // derived key
		again := other.mustCall(t, "web__charge", map[string]any{"order": "share"}, nil)
		if first.IsError || !isReplay(again) || effects(t, w.effWeb, "charge", "share") != 1 {
			t.Errorf("first %s\nagain %s", describe(first), describe(again))
		}
		// The HTTP gate's /metrics counts its answer.
		if n := other.metric(t, `intent_mcp_calls_total{result="replayed",tool="web__charge"}`); n != 1 {
			t.Errorf("replayed calls on /metrics: %v, want 1", n)
		}
		if n := other.metric(t, `intent_mcp_ledger_duration_seconds_count{op="claim"}`); n != 1 {
			t.Errorf("claims timed on /metrics: %v, want 1", n)
		}
	})

	t.Run("the upstream SIGKILLed after its effect leaves the call in doubt on every retry", func(t *testing.T) {
		args := map[string]any{"order": "die", "mode": "die"}
		res := h.mustCall(t, "pay__charge", args, explicitKey("die"))
		if s := sc(t, res); !res.IsError || s["status"] != "in_doubt" || s["retryable"] != false || s["resolve_url"] == nil {
			t.Fatalf("answer: %s", describe(res))
		}
		for i := 0; i < 3; i++ {
			again := h.mustCall(t, "pay__charge", args, explicitKey("die"))
			if s := sc(t, again); !again.IsError || s["status"] != "in_doubt" {
				t.Errorf("retry %d: %s", i, describe(again))
			}
		}
		if n := effects(t, w.effPay, "charge", "die"); n != 1 {
			t.Errorf("%d effects, want exactly 1", n)
		}
		in, err := w.ledger.Get(ctx, "mcp:test:k:pay.charge:die", client.GetOptions{})
		if err != nil || in.State != client.StateInDoubt {
			t.Errorf("intent %v %v", in, err)
		}
		// The gate started the upstream again: its other tools work.
		nodetest.WaitFor(t, 30*time.Second, "the pay upstream to be back", func() bool {
			r, err := h.call(t, "pay__read", nil, nil)
			return err == nil && !r.IsError
		})
	})
}

// TestGateProcessKilled SIGKILLs the gate, with a call in flight and after
// a call finished, and checks that a new gate answers the retries from the
// ledger and never runs the effect again.
func TestGateProcessKilled(t *testing.T) {
	w := startWorld(t)
	ctx := context.Background()

	t.Run("after the result was recorded: the restarted gate replays it", func(t *testing.T) {
		h := w.launch(t)
		first := h.mustCall(t, "web__charge", map[string]any{"order": "rec"}, explicitKey("rec"))
		h.kill()
		h2 := w.launch(t)
		again := h2.mustCall(t, "web__charge", map[string]any{"order": "rec"}, explicitKey("rec"))
		if first.IsError || !isReplay(again) || sc(t, again)["charge_id"] != sc(t, first)["charge_id"] {
			t.Errorf("first %s\nagain %s", describe(first), describe(again))
		}
		if n := effects(t, w.effWeb, "charge", "rec"); n != 1 {
			t.Errorf("%d effects", n)
		}
	})

	t.Run("mid-call: the retry through a new gate is in doubt, never a second effect", func(t *testing.T) {
		h := w.launch(t)
		args := map[string]any{"order": "mid", "mode": "block"}
		go func() { _, _ = h.call(t, "web__charge", args, explicitKey("mid")) }()
		nodetest.WaitFor(t, 30*time.Second, "the effect", func() bool { return effects(t, w.effWeb, "charge", "mid") == 1 })
		h.kill()
		h2 := w.launch(t)
		res := h2.mustCall(t, "web__charge", args, explicitKey("mid"))
		if s := sc(t, res); !res.IsError || s["status"] != "in_doubt" {
			t.Fatalf("retry: %s", describe(res))
		}
		// The upstream finishes the dead gate's request now; nobody gets it.
		if err := os.WriteFile(w.effWeb+".release", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if res := h2.mustCall(t, "web__charge", args, explicitKey("mid")); sc(t, res)["status"] != "in_doubt" {
			t.Errorf("second retry: %s", describe(res))
		}
		if n := effects(t, w.effWeb, "charge", "mid"); n != 1 {
			t.Errorf("%d effects, want 1", n)
		}
		// A person checks the upstream and resolves it with a result in the
		// gate's record format: retries get that result.
		rec := `{"v":1,"result":{"content":[{"type":"text","text":"charged mid (found in the provider log)"}],"structuredContent":{"charge_id":"ch_mid_1"}}}`
		if _, err := w.ledger.Resolve(ctx, client.ResolveRequest{Key: "mcp:test:k:web.charge:mid", Outcome: client.OutcomeExecuted,
			Result: json.RawMessage(rec), Actor: "ops", Reason: "seen in the provider's log"}); err != nil {
			t.Fatal(err)
		}
		res = h2.mustCall(t, "web__charge", args, explicitKey("mid"))
		if res.IsError || !isReplay(res) || sc(t, res)["charge_id"] != "ch_mid_1" {
			t.Errorf("after resolve: %s", describe(res))
		}
	})
}

// waitAudit waits until the key's audit trail holds an attempt with status.
func waitAudit(t *testing.T, l *client.Client, key, status string) {
	t.Helper()
	nodetest.WaitFor(t, 30*time.Second, key+" to see "+status, func() bool {
		a, err := l.Audit(context.Background(), key)
		if err != nil {
			return false
		}
		for _, e := range a.Events {
			if e.Status == status {
				return true
			}
		}
		return false
	})
}
