package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkClaimHandler is one unique claim through the whole handler
// chain (middleware, decode, validation, fingerprint, proposal to the
// in-memory ledger, token, answer), without a network: the per-claim CPU
// and allocations the receiving node spends besides HTTP I/O and Raft.
func BenchmarkClaimHandler(b *testing.B) {
	benchmarkClaims(b, nil)
}

// BenchmarkClaimHandlerTraced is BenchmarkClaimHandler with tracing on:
// every claim records its server span (sampled, then dropped: no
// exporter), the cost a traced node adds per claim on top of the export.
func BenchmarkClaimHandlerTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(b.Context()) })
	benchmarkClaims(b, tp)
}

func benchmarkClaims(b *testing.B, tp trace.TracerProvider) {
	e := newEnv(b, func(c *Config) { c.RateLimits, c.TracerProvider = &RateLimits{}, tp })
	h := e.api.Handler()
	const payload = `{"d":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		key := "bench/00001/" + strconv.Itoa(i)
		body := `{"key":"` + key + `","tool":"bench","owner":"bench/1/` + strconv.Itoa(i) + `","payload":` + payload + `}`
		req := httptest.NewRequest(http.MethodPost, "/v1/intents", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("claim: %d %s", rec.Code, rec.Body)
		}
	}
}
