package workload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

// A claim refused for want of disk space (507 ledger_full) is a definite
// refusal: nothing was written. Any other 507, and a 503 on a write other
// than the not-appended ones, is an unknown outcome.
func TestClassifyServerErrors(t *testing.T) {
	cases := []struct {
		name   string
		method string
		code   int
		body   string
		want   history.Outcome
	}{
		{"507 ledger_full", http.MethodPost, 507, `{"code":"ledger_full","detail":"disk"}`, history.OutcomeFail},
		{"507 other", http.MethodPost, 507, `{"code":"something_else"}`, history.OutcomeInfo},
		{"503 outcome_unknown", http.MethodPost, 503, `{"code":"outcome_unknown"}`, history.OutcomeInfo},
		{"503 no_leader", http.MethodPost, 503, `{"code":"no_leader"}`, history.OutcomeFail},
		{"503 on a read", http.MethodGet, 503, `{"code":"outcome_unknown"}`, history.OutcomeFail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(tc.code)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			a := newCaller(5*time.Second, nil).do(context.Background(), tc.method, srv.URL, map[string]string{})
			if a.outcome != tc.want {
				t.Fatalf("outcome %s, want %s (%s)", a.outcome, tc.want, a.err)
			}
			var op history.Op
			a.fill(&op)
			if op.HTTP != tc.code {
				t.Fatalf("recorded HTTP %d, want %d", op.HTTP, tc.code)
			}
		})
	}
}
