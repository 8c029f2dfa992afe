package mcpgate

import (
	"github.com/intentledger/intentd/testkit/nodetest"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/intentledger/intentd/client"
)

// ledgerTraces is a RoundTripper that notes the traceparent of every
// ledger request by method and path.
type ledgerTraces struct {
	mu   sync.Mutex
	seen map[string]string
}

func (lt *ledgerTraces) RoundTrip(r *http.Request) (*http.Response, error) {
	lt.mu.Lock()
	lt.seen[r.Method+" "+r.URL.Path] = r.Header.Get(client.HeaderTraceparent)
	lt.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// TestTraceparentInMetaReachesLedgerAndUpstream: the traceparent in a
// tools/call's _meta goes with the gate's claim and its completion to
// the ledger, and in the upstream call's _meta; a call without one sends
// none.
func TestTraceparentInMetaReachesLedgerAndUpstream(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name, order, sent string
	}{
		{"with a traceparent", "o-traced", tp},
		{"without one", "o-untraced", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := &ledgerTraces{seen: map[string]string{}}
			h := newGateHarnessWith(t, nil, []client.Option{client.WithHTTPClient(&http.Client{Transport: lt})})
			cs := h.connect(nil)
			meta := key("k-" + tc.order)
			if tc.sent != "" {
				meta[MetaTraceparent] = tc.sent
				meta[MetaTracestate] = "vendor=x"
			}
			if res := mustCall(t, cs, "charge", map[string]any{"order": tc.order, "amount": 1}, meta); res.IsError {
				t.Fatalf("call: %+v", res)
			}
			up := h.up.meta(tc.order)
			if got, _ := up[MetaTraceparent].(string); got != tc.sent {
				t.Errorf("upstream _meta traceparent %q, want %q", got, tc.sent)
			}
			lt.mu.Lock()
			defer lt.mu.Unlock()
			claims, completes := 0, 0
			for call, got := range lt.seen {
				switch {
				case call == "POST /v1/intents":
					claims++
				case strings.HasPrefix(call, "POST /v1/intents/") && strings.HasSuffix(call, "/complete"):
					completes++
				default:
					continue
				}
				if got != tc.sent {
					t.Errorf("%s traceparent %q, want %q", call, got, tc.sent)
				}
			}
			if claims != 1 || completes != 1 {
				t.Errorf("ledger calls %v: want one claim and one completion", lt.seen)
			}
		})
	}
}

// TestGateSpanParentsLedgerAndUpstream: with a TracerProvider the gate
// records a span per tools/call, the child of the caller's _meta
// traceparent, and its ledger calls and the upstream call carry that
// span's context: the trace reads agent → gate → ledger, upstream.
func TestGateSpanParentsLedgerAndUpstream(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		agent   = "00f067aa0ba902b7"
	)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	lt := &ledgerTraces{seen: map[string]string{}}
	h := newGateHarnessWith(t, nil, []client.Option{client.WithHTTPClient(&http.Client{Transport: lt})},
		func(c *Config) { c.TracerProvider = tp })
	cs := h.connect(nil)
	meta := key("k-span")
	meta[MetaTraceparent] = "00-" + traceID + "-" + agent + "-01"
	if res := mustCall(t, cs, "charge", map[string]any{"order": "o-span", "amount": 1}, meta); res.IsError {
		t.Fatalf("call: %+v", res)
	}
	// The gate's span ends as the call returns, which may be after the
	// answer reached the agent.
	nodetest.WaitFor(t, 10*time.Second, "the call's span to end", func() bool {
		for _, s := range exp.GetSpans() {
			if s.Name == SpanCall {
				return true
			}
		}
		return false
	})
	var gate *tracetest.SpanStub
	spans := exp.GetSpans()
	for i := range spans {
		if spans[i].Name == SpanCall {
			gate = &spans[i]
		}
	}
	if gate == nil {
		t.Fatalf("no %s span among %d", SpanCall, len(spans))
	}
	if gate.SpanContext.TraceID().String() != traceID || gate.Parent.SpanID().String() != agent {
		t.Fatalf("gate span in trace %s under %s, want %s under %s", gate.SpanContext.TraceID(), gate.Parent.SpanID(), traceID, agent)
	}
	want := "00-" + traceID + "-" + gate.SpanContext.SpanID().String() + "-01"
	if got, _ := h.up.meta("o-span")[MetaTraceparent].(string); got != want {
		t.Errorf("upstream _meta traceparent %q, want the gate span's %q", got, want)
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if got := lt.seen["POST /v1/intents"]; got != want {
		t.Errorf("ledger claim traceparent %q, want the gate span's %q", got, want)
	}
}
