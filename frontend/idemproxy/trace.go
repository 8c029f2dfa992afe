package idemproxy

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/client"
)

// SpanRequest names the proxy's span of one claimed request.
const SpanRequest = "intent-proxy request"

// traceContext is the W3C Trace Context propagator.
var traceContext = propagation.TraceContext{}

// startSpan begins the span of a claimed request on route when the proxy
// traces: r's context then carries the span's trace context for the
// ledger calls and the upstream request. Otherwise r is returned as it
// is (it carries the caller's, ServeHTTP) with a span that records
// nothing.
func (h *Handler) startSpan(r *http.Request, route string) (*http.Request, trace.Span) {
	if h.cfg.TracerProvider == nil {
		return r, trace.SpanFromContext(context.Background()) // records nothing, ends nothing
	}
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := h.cfg.TracerProvider.Tracer("github.com/intentledger/intentd/frontend/idemproxy").Start(ctx, SpanRequest,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("intent_proxy.route", route), attribute.String("http.request.method", r.Method)))
	out := propagation.MapCarrier{}
	traceContext.Inject(ctx, out)
	return r.WithContext(client.WithTraceparent(ctx, out.Get(client.HeaderTraceparent), out.Get(client.HeaderTracestate))), span
}
