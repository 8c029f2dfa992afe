// Package probe holds the operational endpoints the ledger's front ends
// (intent-proxy, intent-mcp) and nodes share: liveness, readiness against
// the ledger, a Prometheus registry with the runtime's series, and Go's
// profiling endpoints. It imports no module package: intentd links it,
// and the front ends ask the ledger for readiness through a LeaderFunc
// backed by their SDK client, so the server does not link the SDK.
package probe

import (
	"context"
	"io"
	"net/http"
	"net/http/pprof"
	"time"

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

// LeaderFunc asks the ledger which node leads: the leader's ID, "" when
// the ledger knows none. A front end's is its SDK client's LeaderID.
type LeaderFunc func(ctx context.Context) (leaderID string, err error)

// Readyz answers 200 when the ledger names a leader, 503 otherwise: a
// front end that cannot reach a ledger with a leader cannot gate anything.
func Readyz(leader LeaderFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		id, err := leader(ctx)
		if err != nil || id == "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "the ledger has no leader or cannot be reached\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
}

// Mount serves GET /healthz, GET /readyz (asking leader) and, when
// metrics is not nil, GET /metrics (its series) on mux.
func Mount(mux *http.ServeMux, leader LeaderFunc, metrics prometheus.Gatherer) {
	mux.Handle("GET /healthz", Healthz())
	mux.Handle("GET /readyz", Readyz(leader))
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
