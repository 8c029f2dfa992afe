package idemproxy

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Result is how the proxy answered a request: the result label of
// intent_proxy_requests_total, from a fixed set.
type Result string

// The results.
const (
	ResultPassthrough         Result = "passthrough"
	ResultExecuted            Result = "executed"
	ResultFailed              Result = "failed"     // upstream 5xx recorded failed (on_5xx retry)
	ResultUnrecorded          Result = "unrecorded" // upstream 5xx left to go in_doubt (on_5xx in_doubt)
	ResultReplayed            Result = "replayed"
	ResultInFlight            Result = "in_flight"
	ResultInDoubt             Result = "in_doubt"
	ResultMismatch            Result = "fingerprint_mismatch"
	ResultPendingApproval     Result = "pending_approval"
	ResultRejected            Result = "rejected"
	ResultMissingKey          Result = "missing_key"
	ResultInvalidKey          Result = "invalid_key"
	ResultBodyTooLarge        Result = "body_too_large"
	ResultBadRequest          Result = "bad_request"
	ResultLedgerUnavailable   Result = "ledger_unavailable"
	ResultOutcomeUnknown      Result = "outcome_unknown"
	ResultLedgerRefused       Result = "ledger_refused"
	ResultUpstreamNoAnswer    Result = "upstream_no_answer"
	ResultUpstreamUnreachable Result = "upstream_unreachable"
	ResultNoRecordedResponse  Result = "no_recorded_response"
)

// Metrics are the proxy's Prometheus series. A nil *Metrics records
// nothing.
type Metrics struct {
	requests     *prometheus.CounterVec
	upstream     *prometheus.HistogramVec
	ledger       *prometheus.HistogramVec
	recordErrors *prometheus.CounterVec
	leaseLost    *prometheus.CounterVec
}

// NewMetrics registers the proxy's series with reg:
// intent_proxy_requests_total{route,result},
// intent_proxy_upstream_duration_seconds{route,code},
// intent_proxy_ledger_duration_seconds{route,op} (op claim: the claim, a
// wait for another request's holder included; op record: the complete
// that records the upstream's answer),
// intent_proxy_record_errors_total{route} (an upstream answer the ledger
// did not record: the key turns in_doubt) and
// intent_proxy_lease_lost_total{route} (a renewal refused while the
// upstream worked).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intent_proxy_requests_total", Help: "Requests by route and how the proxy answered them.",
		}, []string{"route", "result"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "intent_proxy_upstream_duration_seconds", Help: "Upstream exchanges of claimed requests, headers to end of body, by route and status class.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"route", "code"}),
		ledger: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "intent_proxy_ledger_duration_seconds", Help: "Ledger steps of claimed requests by route: claim (waits for a holder included) and record.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"route", "op"}),
		recordErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intent_proxy_record_errors_total", Help: "Upstream answers the ledger did not record (the key turns in_doubt).",
		}, []string{"route"}),
		leaseLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intent_proxy_lease_lost_total", Help: "Lease renewals the ledger refused while the upstream worked.",
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.upstream, m.ledger, m.recordErrors, m.leaseLost)
	return m
}

func (m *Metrics) request(route string, r Result) {
	if m != nil {
		m.requests.WithLabelValues(route, string(r)).Inc()
	}
}

func (m *Metrics) upstreamDone(route string, status int, d time.Duration) {
	if m != nil {
		code := "none" // no answer
		if status > 0 {
			code = strconv.Itoa(status/100) + "xx"
		}
		m.upstream.WithLabelValues(route, code).Observe(d.Seconds())
	}
}

func (m *Metrics) ledgerStep(route, op string, d time.Duration) {
	if m != nil {
		m.ledger.WithLabelValues(route, op).Observe(d.Seconds())
	}
}

func (m *Metrics) recordError(route string) {
	if m != nil {
		m.recordErrors.WithLabelValues(route).Inc()
	}
}

func (m *Metrics) lostLease(route string) {
	if m != nil {
		m.leaseLost.WithLabelValues(route).Inc()
	}
}
