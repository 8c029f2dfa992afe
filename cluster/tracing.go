package cluster

import (
	"context"
	"encoding/binary"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/fsm"
)

// Tracing: with Config.TracerProvider set, a node records two spans of its
// own (see DESIGN.md, "Traces"):
//
//	intentd.raft.commit    the leader appends a command and waits for the
//	                       state machine's answer (raft.Apply); attributes
//	                       raft.log.index, intentd.node
//	intentd.forward.leader a follower sends a command to the leader and
//	                       waits for its answer; attribute intentd.leader
//
// A forwarded command carries its trace context to the leader (forwarding
// protocol version 2, spoken only by a node that traces), so the leader's
// commit span is a child of the follower's forward span. Without a
// TracerProvider nothing is recorded, no span is started and the
// forwarding protocol is version 1, byte for byte as before.

// Span names (the cluster's part of the trace; httpapi names the server
// spans).
const (
	SpanCommit  = "intentd.raft.commit"
	SpanForward = "intentd.forward.leader"
)

// traceContext is the W3C Trace Context propagator (traceparent,
// tracestate): the one format every hop of a trace speaks.
var traceContext = propagation.TraceContext{}

// tracer is the node's tracer; nil when the node does not trace.
func (n *Node) tracer() trace.Tracer {
	if n.cfg.TracerProvider == nil {
		return nil
	}
	return n.cfg.TracerProvider.Tracer("github.com/intentledger/intentd/cluster")
}

// startSpan starts a span named name under ctx's span, or returns ctx
// and a span that records nothing when the node does not trace or ctx has
// no span: the cluster's spans are parts of a request's trace, never
// traces of their own (the ledger's background proposals, expiries and
// notes, record none).
func (n *Node) startSpan(ctx context.Context, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	t := n.tr
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return t.Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// endSpan records err (if any) on span and ends it.
func endSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// maxTraceField bounds a traceparent or tracestate in a forwarded frame;
// a longer one (W3C allows 32 tracestate entries) is not sent.
const maxTraceField = 1024

// appendTraceBlock appends ctx's trace context to b as a version 2 frame
// carries it before the entry: traceparent and tracestate, each a uvarint
// length and its text (both empty when ctx has no span).
func appendTraceBlock(b []byte, ctx context.Context) []byte {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	for _, f := range []string{carrier.Get("traceparent"), carrier.Get("tracestate")} {
		if len(f) > maxTraceField {
			f = ""
		}
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// errTraceBlock is a version 2 frame whose trace block does not decode.
var errTraceBlock = errors.New("cluster: malformed trace context in a forwarded frame")

// readTraceBlock splits a version 2 frame's body (after the id) into the
// trace context it carries (as a context for the leader's spans) and the
// entry.
func readTraceBlock(body []byte) (context.Context, []byte, error) {
	carrier := propagation.MapCarrier{}
	for _, name := range []string{"traceparent", "tracestate"} {
		l, k := binary.Uvarint(body)
		if k <= 0 || l > maxTraceField || uint64(len(body)-k) < l {
			return nil, nil, errTraceBlock
		}
		if l > 0 {
			carrier.Set(name, string(body[k:k+int(l)]))
		}
		body = body[k+int(l):]
	}
	return traceContext.Extract(context.Background(), carrier), body, nil
}

// commandNames name the command types on spans (AttrCommand).
var commandNames = map[fsm.CommandType]string{
	fsm.TypeClaim: "claim", fsm.TypeComplete: "complete", fsm.TypeRenew: "renew", fsm.TypeCommit: "commit",
	fsm.TypeResolve: "resolve", fsm.TypeApprove: "approve", fsm.TypeReject: "reject", fsm.TypeExpire: "expire",
	fsm.TypePurge: "purge", fsm.TypePutPolicy: "put_policy", fsm.TypeDeletePolicy: "delete_policy",
	fsm.TypeAddSigningKey: "add_signing_key", fsm.TypeUseToken: "use_token", fsm.TypeSetSettings: "set_settings",
	fsm.TypeNoteDuplicates: "note_duplicates", fsm.TypeNoteRefusals: "note_refusals", fsm.TypeNoteDivergent: "note_divergent",
}

// AttrCommand is the span attribute naming the command a commit or a
// forward carries (claim, complete, approve, …).
const AttrCommand = "intentd.command"

// commandAttr is AttrCommand for a command type (its number when the
// type has no name here).
func commandAttr(t fsm.CommandType) attribute.KeyValue {
	if name, ok := commandNames[t]; ok {
		return attribute.String(AttrCommand, name)
	}
	return attribute.Int(AttrCommand, int(t))
}
