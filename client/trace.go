package client

import (
	"context"
	"net/http"
)

// Trace context: every request the client sends carries the caller's W3C
// trace context (traceparent, tracestate) when it has one, so that the
// ledger's spans join the agent's trace (docs/operations.md, "Traces").
// The SDK stays standard library only: the header is text, and it comes
// either from the context (WithTraceparent) or from a hook
// (WithTraceContext) an OpenTelemetry user fills with otel's propagator in
// one line:
//
//	c, err := client.New(addrs, client.WithTraceContext(func(ctx context.Context, h http.Header) {
//		otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
//	}))
//
// A traceparent set on the context wins over the hook's. Only
// traceparent and tracestate are sent, and only a well-formed traceparent
// (version 00 as W3C writes it); anything else the hook writes is dropped.

// Header names of the W3C Trace Context.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// maxTracestate bounds a tracestate the client sends (W3C: 32 entries;
// 512 bytes is what propagators must keep).
const maxTracestate = 512

type traceKey struct{}

type traceContext struct{ parent, state string }

// WithTraceparent returns a context whose requests carry traceparent and
// tracestate (tracestate may be empty). An invalid traceparent is ignored:
// the context is returned unchanged. The front ends use it to pass on the
// trace context their callers sent.
func WithTraceparent(ctx context.Context, traceparent, tracestate string) context.Context {
	if !ValidTraceparent(traceparent) {
		return ctx
	}
	if len(tracestate) > maxTracestate {
		tracestate = ""
	}
	return context.WithValue(ctx, traceKey{}, traceContext{traceparent, tracestate})
}

// Traceparent returns the trace context WithTraceparent put on ctx ("" when
// none).
func Traceparent(ctx context.Context) (traceparent, tracestate string) {
	tc, _ := ctx.Value(traceKey{}).(traceContext)
	return tc.parent, tc.state
}

// WithTraceContext makes every request carry the trace context inject
// writes into a header for the request's context (see the package's trace
// notes for the one line an OpenTelemetry user writes). Only traceparent
// and tracestate are copied from what inject writes.
func WithTraceContext(inject func(ctx context.Context, h http.Header)) Option {
	return func(c *Client) { c.injectTrace = inject }
}

// setTrace writes ctx's trace context into the request's header h.
func (c *Client) setTrace(ctx context.Context, h http.Header) {
	parent, state := Traceparent(ctx)
	if parent == "" && c.injectTrace != nil {
		scratch := http.Header{}
		c.injectTrace(ctx, scratch)
		parent, state = scratch.Get(HeaderTraceparent), scratch.Get(HeaderTracestate)
		if !ValidTraceparent(parent) {
			return
		}
		if len(state) > maxTracestate {
			state = ""
		}
	}
	if parent == "" {
		return
	}
	h.Set(HeaderTraceparent, parent)
	if state != "" {
		h.Set(HeaderTracestate, state)
	}
}

// ValidTraceparent reports whether s is a W3C traceparent of version 00:
// "00-" 32 lowercase hex digits (not all zero) "-" 16 (not all zero) "-"
// 2.
func ValidTraceparent(s string) bool {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	return hexDigits(s[3:35], true) && hexDigits(s[36:52], true) && hexDigits(s[53:], false)
}

// hexDigits reports whether s is lowercase hex, and not all zeros when
// nonZero says so.
func hexDigits(s string, nonZero bool) bool {
	zero := true
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch >= '1' && ch <= '9', ch >= 'a' && ch <= 'f':
			zero = false
		case ch == '0':
		default:
			return false
		}
	}
	return !nonZero || !zero
}
