package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/fsm"
)

// Traces (docs/operations.md, "Traces"): with Config.TracerProvider set,
// every request is a server span, the child of the W3C traceparent the
// caller sent (an agent's SDK, intent-proxy, intent-mcp, or a follower
// forwarding to the leader). The intent calls have their own names
// (spanNames); every other route is "intentd " + method + " " + route.
// A request forwarded to the leader over HTTP adds a client span,
// SpanForwardHTTP, whose context travels in the forwarded request's
// traceparent. The cluster adds the Raft commit and the forward of a
// command to the leader (cluster/tracing.go).

// SpanForwardHTTP names the span of a request a follower forwards to the
// leader over HTTP.
const SpanForwardHTTP = "intentd.forward.http"

// Span attribute keys the API sets.
const (
	// AttrOutcome is the ledger's answer: granted, duplicate, in_flight,
	// divergent, in_doubt, pending_approval, completed, … (fsm.Status).
	AttrOutcome = "intentd.outcome"
	// AttrPolicy is the policy the intent was decided under.
	AttrPolicy = "intentd.policy"
	// AttrNamespace is the caller's namespace.
	AttrNamespace = "intentd.namespace"
	// AttrKeyHash is the first 16 hex digits of the SHA-256 of the intent
	// key: keys often carry customer or order identifiers, which a trace
	// backend (other people, other retention) should not receive.
	AttrKeyHash = "intentd.key.sha256"
	// AttrTool is the claimed tool's name.
	AttrTool = "intentd.tool"
	// AttrProblem is the problem code of a refused request.
	AttrProblem = "intentd.problem"
	// AttrNode is the node that served the span.
	AttrNode = "intentd.node"
	// AttrLocalAnswer is true on a duplicate a follower answered from its
	// own copy of the ledger.
	AttrLocalAnswer = "intentd.local_answer"
)

// spanNames names the server spans of the intent calls, by route.
var spanNames = map[string]string{
	http.MethodPost + " /v1/intents":                "intentd.claim",
	http.MethodPost + " /v1/intents/:key/complete":  "intentd.complete",
	http.MethodPost + " /v1/intents/:key/renew":     "intentd.renew",
	http.MethodPost + " /v1/intents/:key/commit":    "intentd.commit",
	http.MethodPost + " /v1/intents/:key/approve":   "intentd.approve",
	http.MethodPost + " /v1/intents/:key/reject":    "intentd.reject",
	http.MethodPost + " /v1/intents/:key/resolve":   "intentd.resolve",
	http.MethodGet + " /v1/intents/:key":            "intentd.get",
	http.MethodGet + " /v1/intents/:key/audit":      "intentd.audit",
	http.MethodPost + " /v1/tokens/verify":          "intentd.verify_token",
	http.MethodGet + " /v1/intents":                 "intentd.list",
	http.MethodPost + " /v1/admin/snapshot/restore": "intentd.snapshot_restore",
}

// traceContext is the W3C Trace Context propagator.
var traceContext = propagation.TraceContext{}

// KeyHash is AttrKeyHash's value for key: the first 16 hex digits of its
// SHA-256 (printf %s "$key" | sha256sum | cut -c1-16).
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// spanName is the server span's name for the request's route.
func spanName(method, route string) string {
	if name, ok := spanNames[method+" "+route]; ok {
		return name
	}
	if route == "" {
		route = "unmatched"
	}
	return "intentd " + method + " " + route
}

// traced is the middleware that makes every request a server span (only
// installed with a TracerProvider). It runs after routing, so the route's
// template names the span.
func (s *Server) traced(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		route := c.Path()
		if !s.routed(methodLabel(req.Method), route) {
			route = ""
		}
		ctx := traceContext.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		ctx, span := s.tracer.Start(ctx, spanName(req.Method, route),
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", req.Method),
				attribute.String("http.route", route),
				attribute.String(AttrNode, s.nodeID),
			))
		defer span.End()
		if by := req.Header.Get(HeaderForwardedBy); by != "" {
			span.SetAttributes(attribute.String("intentd.forwarded_by", by))
		}
		if key := c.Param("key"); key != "" {
			span.SetAttributes(attribute.String(AttrKeyHash, KeyHash(key)))
		}
		c.SetRequest(req.WithContext(ctx))
		err := next(c)
		if err != nil {
			c.Error(err) // answered here, so the span sees the final status
		}
		status := c.Response().Status
		span.SetAttributes(attribute.Int("http.response.status_code", status),
			attribute.String(AttrNamespace, s.namespaceOf(c)))
		if status >= 500 {
			span.SetStatus(otelcodes.Error, http.StatusText(status))
		}
		return nil
	}
}

// spanOf is the request's server span when it records, else nil: the
// attribute calls below cost nothing when tracing is off.
func spanOf(c echo.Context) trace.Span {
	span := trace.SpanFromContext(c.Request().Context())
	if !span.IsRecording() {
		return nil
	}
	return span
}

// traceResult records a ledger answer on the request's span: the outcome,
// the policy, the tool and the key's hash.
func traceResult(c echo.Context, r *fsm.Result) {
	span := spanOf(c)
	if span == nil || r == nil {
		return
	}
	span.SetAttributes(attribute.String(AttrOutcome, string(r.Status)))
	if in := r.Intent; in != nil {
		span.SetAttributes(attribute.String(AttrKeyHash, KeyHash(in.Key)), attribute.String(AttrTool, in.Tool))
		if in.Policy != "" {
			span.SetAttributes(attribute.String(AttrPolicy, in.Policy))
		}
	}
	if r.Local {
		span.SetAttributes(attribute.Bool(AttrLocalAnswer, true))
	}
}

// traceProblem records a problem answer's code on the request's span.
func traceProblem(c echo.Context, p *problem) {
	if span := spanOf(c); span != nil {
		span.SetAttributes(attribute.String(AttrProblem, p.Code))
	}
}
