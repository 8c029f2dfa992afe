package cluster

import (
	"bytes"
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceBlockRoundTrip: a version 2 frame's trace block carries the
// span context to the leader and leaves the entry intact; a command
// without a trace carries an empty block; a truncated or oversized block
// is refused.
func TestTraceBlockRoundTrip(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled,
	})
	entry := []byte{1, 2, 'e', 'n', 't', 'r', 'y'}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want trace.SpanContext
	}{
		{"with a span", trace.ContextWithSpanContext(context.Background(), sc), sc.WithRemote(true)},
		{"without one", context.Background(), trace.SpanContext{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append(appendTraceBlock(nil, tc.ctx), entry...)
			ctx, rest, err := readTraceBlock(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rest, entry) {
				t.Errorf("entry %q, want %q", rest, entry)
			}
			if got := trace.SpanContextFromContext(ctx); !got.Equal(tc.want) {
				t.Errorf("span context %v, want %v", got, tc.want)
			}
		})
	}
	good := appendTraceBlock(nil, trace.ContextWithSpanContext(context.Background(), sc))
	for name, bad := range map[string][]byte{
		"truncated": good[:10],
		"empty":     nil,
		"oversized": {0xff, 0xff, 0x01},
		"no state":  good[:len(good)-1],
	} {
		if _, _, err := readTraceBlock(bad); err == nil {
			t.Errorf("%s block accepted", name)
		}
	}
}

// TestClusterSpansNeedAParent: with a tracer, a commit or forward span
// is started under a request's span only; a proposal without one (the
// ledger's background work) records nothing.
func TestClusterSpansNeedAParent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	n := &Node{cfg: Config{TracerProvider: tp}}
	n.tr = n.tracer()
	parent, root := tp.Tracer("test").Start(context.Background(), "request")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"under a request's span", parent, true},
		{"background", context.Background(), false},
	} {
		_, span := n.startSpan(tc.ctx, SpanCommit, trace.SpanKindInternal)
		if span.IsRecording() != tc.want {
			t.Errorf("%s: recording %v, want %v", tc.name, span.IsRecording(), tc.want)
		}
		endSpan(span, nil)
	}
	root.End()
	if got := len(exp.GetSpans()); got != 2 {
		t.Errorf("%d spans ended, want the request's and its commit", got)
	}
}
