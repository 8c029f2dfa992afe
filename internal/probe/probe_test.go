package probe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestReadyzNeedsALeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leader LeaderFunc
		want   int
	}{
		{"a leader", func(context.Context) (string, error) { return "n1", nil }, http.StatusOK},
		{"no leader", func(context.Context) (string, error) { return "", nil }, http.StatusServiceUnavailable},
		{"unreachable", func(context.Context) (string, error) { return "", errors.New("refused") }, http.StatusServiceUnavailable},
		{"a leader named with an error", func(context.Context) (string, error) { return "n1", errors.New("refused") }, http.StatusServiceUnavailable},
		{"the check is bounded", func(ctx context.Context) (string, error) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("the ledger was asked without a deadline")
			}
			return "n2", nil
		}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Readyz(tc.leader).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d (%s)", rec.Code, tc.want, rec.Body)
			}
		})
	}
}

func TestHealthzAndRegistry(t *testing.T) {
	rec := httptest.NewRecorder()
	Healthz().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("healthz %d %q", rec.Code, rec.Body)
	}
	families, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var goSeries, processSeries bool
	for _, f := range families {
		goSeries = goSeries || strings.HasPrefix(f.GetName(), "go_")
		processSeries = processSeries || strings.HasPrefix(f.GetName(), "process_")
	}
	if !goSeries || !processSeries {
		t.Errorf("registry lacks the runtime's series (go_ %v, process_ %v)", goSeries, processSeries)
	}
}

func TestPprofMuxServesTheIndex(t *testing.T) {
	rec := httptest.NewRecorder()
	PprofMux().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "goroutine") {
		t.Errorf("pprof index %d", rec.Code)
	}
}

func TestMountServesMetricsOnlyWhenGiven(t *testing.T) {
	leader := LeaderFunc(func(context.Context) (string, error) { return "n1", nil })
	for _, withMetrics := range []bool{true, false} {
		mux := http.NewServeMux()
		if withMetrics {
			Mount(mux, leader, NewRegistry())
		} else {
			Mount(mux, leader, nil)
		}
		want := map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusOK, "/metrics": http.StatusNotFound}
		if withMetrics {
			want["/metrics"] = http.StatusOK
		}
		for path, code := range want {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != code {
				t.Errorf("metrics %v: GET %s %d, want %d", withMetrics, path, rec.Code, code)
			}
		}
	}
}
