package idemproxy

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/intentledger/intentd/internal/probe/probetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsCountEveryAnswer: each way the proxy answers is counted
// under its route and result, and the ledger and upstream steps of
// claimed requests are timed.
func TestMetricsCountEveryAnswer(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	hs := newHarness(t, testRoutes(), func(c *Config) { c.Metrics = m })

	for i, want := range []int{http.StatusCreated, http.StatusCreated} { // executed, then replayed
		if r := hs.send("POST", "/v1/charges", "m-1", `{"amount":1}`); r.code != want {
			t.Fatalf("request %d: %v", i, r)
		}
	}
	if r := hs.send("POST", "/v1/charges", "m-1", `{"amount":2}`); r.code != http.StatusUnprocessableEntity {
		t.Fatalf("mismatch: %v", r)
	}
	if r := hs.send("POST", "/v1/charges", "", `{"amount":1}`); r.code != http.StatusBadRequest {
		t.Fatalf("no key: %v", r)
	}
	if r := hs.send("GET", "/v1/charges", "", ""); r.code >= 500 {
		t.Fatalf("pass-through: %v", r)
	}

	for _, want := range []struct {
		route  string
		result Result
	}{
		{"charges", ResultExecuted}, {"charges", ResultReplayed}, {"charges", ResultMismatch}, {"charges", ResultMissingKey},
	} {
		c := m.requests.WithLabelValues(want.route, string(want.result))
		waitFor(t, fmt.Sprintf("requests{route=%q,result=%q} to be 1", want.route, want.result), func() bool {
			return testutil.ToFloat64(c) == 1
		})
	}
	// A GET passes untouched under the route label "-".
	if n := testutil.ToFloat64(m.requests.WithLabelValues("-", string(ResultPassthrough))); n != 1 {
		t.Errorf("%v pass-throughs counted, want 1", n)
	}
	// Three claims (executed, replayed, mismatch); one grant, so one
	// upstream exchange and one record.
	for _, step := range []struct {
		op   string
		want uint64
	}{{"claim", 3}, {"record", 1}} {
		waitFor(t, fmt.Sprintf("%d %s steps timed", step.want, step.op), func() bool {
			return probetest.SampleCount(t, reg, "intent_proxy_ledger_duration_seconds", map[string]string{"route": "charges", "op": step.op}) == step.want
		})
	}
	if n := probetest.SampleCount(t, reg, "intent_proxy_upstream_duration_seconds", map[string]string{"route": "charges", "code": "2xx"}); n != 1 {
		t.Errorf("%d upstream exchanges timed, want 1", n)
	}
}
