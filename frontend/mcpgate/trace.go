package mcpgate

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/client"
)

// SpanCall names the gate's span of one tools/call.
const SpanCall = "intent-mcp tools/call"

// traceContext is the W3C Trace Context propagator.
var traceContext = propagation.TraceContext{}

// startCall begins a tools/call: ctx gets the trace context its ledger
// calls and its upstream call carry, the caller's _meta traceparent, or,
// with a TracerProvider, that of a new span, its child, which the
// returned span is (nil without a TracerProvider).
func (g *Gate) startCall(ctx context.Context, tool string, meta map[string]any) (context.Context, trace.Span) {
	if g.cfg.TracerProvider == nil {
		return withTrace(ctx, meta), nil
	}
	carrier := propagation.MapCarrier{}
	for _, k := range []string{MetaTraceparent, MetaTracestate} {
		if v, ok := meta[k].(string); ok {
			carrier.Set(k, v)
		}
	}
	ctx = traceContext.Extract(ctx, carrier)
	ctx, span := g.cfg.TracerProvider.Tracer("github.com/intentledger/intentd/frontend/mcpgate").Start(ctx, SpanCall,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("mcp.tool", tool)))
	out := propagation.MapCarrier{}
	traceContext.Inject(ctx, out)
	return client.WithTraceparent(ctx, out.Get(MetaTraceparent), out.Get(MetaTracestate)), span
}

// endCall records how the call was answered on span (if any) and ends it.
func endCall(span trace.Span, result Result, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("intent_mcp.result", string(result)))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// traceMeta sets an upstream call's _meta traceparent (and tracestate) to
// the trace context ctx carries for it (the caller's, or the gate's span).
func traceMeta(ctx context.Context, m map[string]any) map[string]any {
	tp, ts := client.Traceparent(ctx)
	if tp == "" {
		return m
	}
	if m == nil {
		m = map[string]any{}
	}
	m[MetaTraceparent] = tp
	delete(m, MetaTracestate)
	if ts != "" {
		m[MetaTracestate] = ts
	}
	return m
}
