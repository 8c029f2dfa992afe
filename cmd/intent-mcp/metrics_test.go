package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
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

// TestLedgerLeaderAsksTheCluster: readiness names the leader the ledger's
// GET /v1/cluster names, "" when it names none, and fails with the
// ledger's refusal; /readyz answers 200 in the first case only.
func TestLedgerLeaderAsksTheCluster(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
		err    error
		ready  int
	}{
		{"a leader", http.StatusOK, `{"node_id":"n2","leader_id":"n1","nodes":[]}`, "n1", nil, http.StatusOK},
		{"no leader", http.StatusOK, `{"node_id":"n2","leader_id":"","nodes":[]}`, "", nil, http.StatusServiceUnavailable},
		{"refused", http.StatusUnauthorized, `{"code":"unauthenticated","title":"no API key","status":401}`, "", client.ErrUnauthorized, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/cluster" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if tc.status != http.StatusOK {
					w.Header().Set("Content-Type", "application/problem+json")
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			ln, err := net.Listen("tcp", nodetest.FreePort(t))
			if err != nil {
				t.Fatal(err)
			}
			srv.Listener.Close()
			srv.Listener = ln
			srv.Start()
			defer srv.Close()
			ledger, err := client.New([]string{srv.URL}, client.WithDiscovery(false), client.WithRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			leader := ledgerLeader(ledger)
			got, err := leader(context.Background())
			if got != tc.want || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Errorf("leader %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
			rec := httptest.NewRecorder()
			probe.Readyz(leader).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != tc.ready {
				t.Errorf("/readyz %d, want %d", rec.Code, tc.ready)
			}
		})
	}
}
