package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/frontend/mcpgate"
	"github.com/intentledger/intentd/internal/probe"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestMetricsListenServesTheGatesSeries: --metrics-listen (the only way to
// reach the metrics of a gate on stdio) serves /metrics with the gate's
// series, /healthz, and a /readyz that says no while no ledger answers.
func TestMetricsListenServesTheGatesSeries(t *testing.T) {
	reg := probe.NewRegistry()
	mcpgate.NewMetrics(reg)
	ledger, err := client.New([]string{"http://" + nodetest.FreePort(t)}) // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	addr := nodetest.FreePort(t)
	stop, err := serveMetrics(addr, reg, ledger, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "intent_mcp_lease_lost_total 0") ||
		!strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics %d:\n%s", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d", code)
	}
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz %d with no ledger, want 503", code)
	}
	if _, err := serveMetrics(addr, reg, ledger, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Errorf("a second listener on %s: %v", addr, err)
	}
}
