package httpapi

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the API's Prometheus collectors.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	claims   *prometheus.CounterVec
	// namespaceClaims counts claims by namespace (bounded: see
	// Server.namespaceLabel) and status, quota refusals among them.
	namespaceClaims *prometheus.CounterVec
	forwarded       prometheus.Counter
	// untrustedForwards counts requests whose forwarding headers no node
	// signed (dropped).
	untrustedForwards prometheus.Counter
	// tokenVerifies counts execution token verifications by status.
	tokenVerifies *prometheus.CounterVec
	// rateLimited counts 429 answers by limit (client, key or
	// auth_failures).
	rateLimited *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	return &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intentd_http_requests_total",
			Help: "HTTP requests answered, by route template (or unmatched), method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other) and status code.",
		}, []string{"route", "method", "code"})),
		duration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "intentd_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route template (or unmatched), method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or other) and status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method", "code"})),
		claims: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intentd_claims_total",
			Help: "Claims answered by the ledger, by status (granted, duplicate, in_flight, divergent ..., ledger_full).",
		}, []string{"status"})),
		namespaceClaims: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intentd_namespace_claims_total",
			Help: "Claims answered by this node, by namespace (those not configured as _other) and status (granted, duplicate, in_flight ..., namespace_rate_limited, namespace_full, ledger_full).",
		}, []string{"namespace", "status"})),
		rateLimited: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intentd_http_rate_limited_total",
			Help: "Requests answered 429 rate_limited, by the limit that was hit (client, key or auth_failures).",
		}, []string{"limit"})),
		tokenVerifies: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "intentd_token_verifications_total",
			Help: "Execution token verifications answered by the ledger, by status (ok, token_used, token_expired ...).",
		}, []string{"status"})),
		forwarded: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "intentd_http_forwarded_total",
			Help: "Requests this node forwarded to the leader.",
		})),
		untrustedForwards: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "intentd_http_untrusted_forward_headers_total",
			Help: "Requests that carried forwarding headers no node of the cluster signed; the headers were dropped.",
		})),
	}
}

// register registers c on reg, or returns the equal collector already
// registered there (so a second Server on one registry shares them).
// Conflicting registrations are programming errors and panic.
func register[T prometheus.Collector](reg *prometheus.Registry, c T) T {
	if err := reg.Register(c); err != nil {
		var exists prometheus.AlreadyRegisteredError
		if errors.As(err, &exists) {
			if prev, ok := exists.ExistingCollector.(T); ok {
				return prev
			}
		}
		panic("httpapi: registering metrics: " + err.Error())
	}
	return c
}
