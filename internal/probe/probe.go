// Package probe holds the operational endpoints the ledger's front ends
// (intent-proxy, intent-mcp) and nodes share: liveness, readiness against
// the ledger, a Prometheus registry with the runtime's series, and Go's
// profiling endpoints.
package probe

import (
	"context"
	"io"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyTimeout bounds one readiness check's question to the ledger.
const readyTimeout = 2 * time.Second

// Healthz answers 200 "ok" while the process serves.
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
}

// LeaderFinder is the part of *client.Client a readiness check needs.
type LeaderFinder interface {
	Cluster(ctx context.Context) (*client.ClusterStatus, error)
}

// Readyz answers 200 when the ledger names a leader, 503 otherwise: a
// front end that cannot reach a ledger with a leader cannot gate anything.
func Readyz(ledger LeaderFinder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		st, err := ledger.Cluster(ctx)
		if err != nil || st == nil || st.LeaderID == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "the ledger has no leader or cannot be reached\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
}

// Mount serves GET /healthz, GET /readyz (asking ledger for a leader) and,
// when metrics is not nil, GET /metrics (its series) on mux.
func Mount(mux *http.ServeMux, ledger LeaderFinder, metrics prometheus.Gatherer) {
	mux.Handle("GET /healthz", Healthz())
	mux.Handle("GET /readyz", Readyz(ledger))
	if metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{}))
	}
}

// NewRegistry is a Prometheus registry with the Go runtime's and the
// process's series.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// PprofMux serves Go's profiling endpoints (/debug/pprof/...). Profiles
// reveal internals and cost CPU while taken: serve it only on its own,
// private listener.
func PprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
