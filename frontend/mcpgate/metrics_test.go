package mcpgate

import (
	"testing"

	"github.com/intentledger/intentd/internal/probe/probetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestGateMetricsCountEveryAnswer: each way the gate answers a call is
// counted under its result, with the tool's listed name (and one fixed
// label for a name that stopped being listed while its call arrived; the
// MCP server itself refuses names never listed), and the ledger and upstream
// steps of gated calls are timed.
func TestGateMetricsCountEveryAnswer(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h := newGateHarness(t, func(c *Config) { c.Metrics = m })
	cs := h.connect(nil)

	mustCall(t, cs, "charge", map[string]any{"order": "m1"}, key("m1"))                        // executed
	mustCall(t, cs, "charge", map[string]any{"order": "m1"}, key("m1"))                        // replayed
	_, _ = callTool(t, cs, "charge", map[string]any{"order": "m2"}, key("m1"))                 // divergent
	_, _ = callTool(t, cs, "charge", map[string]any{"mode": "invalid"}, key("m3"))             // failed: refused before running
	mustCall(t, cs, "read", map[string]any{}, nil)                                             // passthrough
	_, _ = callTool(t, cs, "nosuch", map[string]any{}, nil)                                    // unknown tool
	_, _ = callTool(t, cs, "charge", map[string]any{}, map[string]any{MetaIdempotencyKey: ""}) // bad key

	for _, want := range []struct {
		tool   string
		result Result
	}{
		{"charge", ResultExecuted}, {"charge", ResultReplayed}, {"charge", ResultDivergent}, {"charge", ResultFailed},
		{"read", ResultPassthrough}, {"charge", ResultBadRequest},
	} {
		if n := testutil.ToFloat64(m.calls.WithLabelValues(want.tool, string(want.result))); n != 1 {
			t.Errorf("calls{tool=%q,result=%q} = %v, want 1", want.tool, want.result, n)
		}
	}
	if n := testutil.CollectAndCount(m.calls); n != 6 {
		t.Errorf("%d call series, want 6", n)
	}
	// Four calls reached the ledger (executed, replayed, divergent,
	// failed); two were granted and ran upstream, one was recorded.
	for op, want := range map[string]uint64{"claim": 4, "record": 1} {
		if got := probetest.SampleCount(t, reg, "intent_mcp_ledger_duration_seconds", map[string]string{"op": op}); got != want {
			t.Errorf("ledger step %s timed %d times, want %d", op, got, want)
		}
	}
	if got := probetest.SampleCount(t, reg, "intent_mcp_upstream_duration_seconds", map[string]string{"upstream": "pay"}); got != 2 {
		t.Errorf("upstream calls timed %d times, want 2", got)
	}
	if got := probetest.SampleCount(t, reg, "intent_mcp_call_duration_seconds", map[string]string{"result": string(ResultReplayed)}); got != 1 {
		t.Errorf("replayed calls timed %d times, want 1", got)
	}
}
