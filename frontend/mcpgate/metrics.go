package mcpgate

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Result is how the gate answered a tools/call: the result label of
// intent_mcp_calls_total, from a fixed set.
type Result string

// The results.
const (
	ResultPassthrough         Result = "passthrough"          // not gated: read-only, pass, or a repeatable tool without a key
	ResultExecuted            Result = "executed"             // granted, the upstream answered (isError and tool errors too), recorded
	ResultUnrecorded          Result = "unrecorded"           // granted, the upstream answered, the ledger did not record it
	ResultFailed              Result = "failed"               // granted, the upstream refused before running it: recorded failed
	ResultUpstreamUnavailable Result = "upstream_unavailable" // granted, nothing reached the upstream: recorded failed
	ResultUpstreamNoAnswer    Result = "upstream_no_answer"   // granted, sent, no answer: the key is in doubt
	ResultNeedsInput          Result = "needs_input"          // granted, the upstream asked for input: recorded failed
	ResultReplayed            Result = "replayed"
	ResultInFlight            Result = "in_flight" // still running after the wait
	ResultInDoubt             Result = "in_doubt"
	ResultDivergent           Result = "divergent"
	ResultPendingApproval     Result = "pending_approval"
	ResultRejected            Result = "rejected"
	ResultBlocked             Result = "blocked"
	ResultBadRequest          Result = "bad_request" // bad arguments or a bad explicit key
	ResultLedgerUnavailable   Result = "ledger_unavailable"
	ResultOutcomeUnknown      Result = "outcome_unknown"
	ResultLedgerRefused       Result = "ledger_refused"
	ResultUnknownTool         Result = "unknown_tool"
)

// unknownToolLabel is the tool label of calls naming no tool the gate
// lists: the caller chose the name, so it is not a label value.
const unknownToolLabel = "(unknown)"

// Metrics are the gate's Prometheus series. A nil *Metrics records
// nothing.
type Metrics struct {
	calls     *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	ledger    *prometheus.HistogramVec
	upstream  *prometheus.HistogramVec
	leaseLost prometheus.Counter
}

// latencyBuckets run from 0.5 ms to about 16 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

// NewMetrics registers the gate's series with reg:
// intent_mcp_calls_total{tool,result},
// intent_mcp_call_duration_seconds{result} (a tools/call from arrival to
// answer), intent_mcp_ledger_duration_seconds{op} (the claim, waits for
// a holder included, and the record of a gated call),
// intent_mcp_upstream_duration_seconds{upstream} (the upstream call of a
// granted one) and intent_mcp_lease_lost_total (a renewal refused while
// the upstream worked).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intent_mcp_calls_total", Help: "tools/call requests by tool and how the gate answered them.",
		}, []string{"tool", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "intent_mcp_call_duration_seconds", Help: "tools/call requests from arrival to answer, by result.",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		ledger: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "intent_mcp_ledger_duration_seconds", Help: "Ledger steps of gated calls: claim (waits for a holder included) and record.",
			Buckets: latencyBuckets,
		}, []string{"op"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "intent_mcp_upstream_duration_seconds", Help: "Upstream calls of granted tools/call requests, by upstream.",
			Buckets: latencyBuckets,
		}, []string{"upstream"}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "intent_mcp_lease_lost_total", Help: "Lease renewals the ledger refused while the upstream worked (the call was cut).",
		}),
	}
	reg.MustRegister(m.calls, m.duration, m.ledger, m.upstream, m.leaseLost)
	return m
}

func (m *Metrics) call(tool string, r Result, d time.Duration) {
	if m == nil {
		return
	}
	if tool == "" {
		tool = unknownToolLabel
	}
	m.calls.WithLabelValues(tool, string(r)).Inc()
	m.duration.WithLabelValues(string(r)).Observe(d.Seconds())
}

func (m *Metrics) ledgerStep(op string, d time.Duration) {
	if m != nil {
		m.ledger.WithLabelValues(op).Observe(d.Seconds())
	}
}

func (m *Metrics) upstreamCall(upstream string, d time.Duration) {
	if m != nil {
		m.upstream.WithLabelValues(upstream).Observe(d.Seconds())
	}
}

func (m *Metrics) lostLease() {
	if m != nil {
		m.leaseLost.Inc()
	}
}
