package idemproxy

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

// traceRecorder is a RoundTripper that notes the traceparent of every
// ledger request by its path.
type traceRecorder struct {
	mu   sync.Mutex
	seen map[string]string // "METHOD path" -> traceparent
}

func (tr *traceRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	tr.mu.Lock()
	tr.seen[r.Method+" "+r.URL.Path] = r.Header.Get(client.HeaderTraceparent)
	tr.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (tr *traceRecorder) get(k string) (string, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	v, ok := tr.seen[k]
	return v, ok
}

// TestTraceparentReachesLedgerAndUpstream: the caller's traceparent goes
// with the proxy's claim and its completion to the ledger, and with the
// request to the upstream; a request without one sends none.
func TestTraceparentReachesLedgerAndUpstream(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name, sent, want string
	}{
		{"with a traceparent", tp, tp},
		{"without one", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &traceRecorder{seen: map[string]string{}}
			hs := newHarnessWith(t, testRoutes(), nil, []client.Option{client.WithHTTPClient(&http.Client{Transport: rec})})
			var hdr []string
			if tc.sent != "" {
				hdr = []string{"traceparent", tc.sent}
			}
			if r := hs.send("POST", "/v1/charges", "k-trace", `{"amount":1}`, hdr...); r.code != http.StatusCreated {
				t.Fatalf("send: %v", r)
			}
			if got := hs.up.header(`"k-trace"`).Get("traceparent"); got != tc.want {
				t.Errorf("upstream traceparent %q, want %q", got, tc.want)
			}
			claim, ok := rec.get("POST /v1/intents")
			if !ok || claim != tc.want {
				t.Errorf("ledger claim traceparent %q (sent %v), want %q", claim, ok, tc.want)
			}
			// The proxy records the outcome before it answers.
			completes := 0
			rec.mu.Lock()
			for call, got := range rec.seen {
				if strings.HasPrefix(call, "POST /v1/intents/") && strings.HasSuffix(call, "/complete") {
					completes++
					if got != tc.want {
						t.Errorf("%s traceparent %q, want %q", call, got, tc.want)
					}
				}
			}
			rec.mu.Unlock()
			if completes != 1 {
				t.Errorf("%d completions recorded, want 1: %v", completes, rec.seen)
			}
		})
	}
}

// TestProxySpanParentsLedgerAndUpstream: with a TracerProvider the proxy
// records a span per claimed request under the caller's traceparent, and
// its ledger claim and the upstream request carry that span's context.
func TestProxySpanParentsLedgerAndUpstream(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		caller  = "00f067aa0ba902b7"
	)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	rec := &traceRecorder{seen: map[string]string{}}
	hs := newHarnessWith(t, testRoutes(), nil, []client.Option{client.WithHTTPClient(&http.Client{Transport: rec})},
		func(c *Config) { c.TracerProvider = tp })
	if r := hs.send("POST", "/v1/charges", "k-span", `{"amount":1}`, "traceparent", "00-"+traceID+"-"+caller+"-01"); r.code != http.StatusCreated {
		t.Fatalf("send: %v", r)
	}
	// The span ends as the handler returns, which may be after the
	// answer reached the caller.
	nodetest.WaitFor(t, 10*time.Second, "the request span to end", func() bool { return len(exp.GetSpans()) > 0 })
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != SpanRequest {
		t.Fatalf("spans %v, want one %s", spans, SpanRequest)
	}
	s := spans[0]
	if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != caller {
		t.Fatalf("span in trace %s under %s, want %s under %s", s.SpanContext.TraceID(), s.Parent.SpanID(), traceID, caller)
	}
	want := "00-" + traceID + "-" + s.SpanContext.SpanID().String() + "-01"
	if got := hs.up.header(`"k-span"`).Get("traceparent"); got != want {
		t.Errorf("upstream traceparent %q, want the span's %q", got, want)
	}
	if got, _ := rec.get("POST /v1/intents"); got != want {
		t.Errorf("ledger claim traceparent %q, want the span's %q", got, want)
	}
}
