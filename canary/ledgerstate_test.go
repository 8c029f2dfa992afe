package canary

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// TestLedgerStateWaitsOutAMomentWithoutALeader: an episode's check reads
// the ledger until it answers, so reads failing for a moment (an election
// on a loaded machine) change neither the state the check sees nor the
// run's digest.
func TestLedgerStateWaitsOutAMomentWithoutALeader(t *testing.T) {
	var failGets atomic.Int32
	mem := clienttest.NewMemory(t, clienttest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if clienttest.Op(r) == "get" && failGets.Add(-1) >= 0 {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"title":"no leader","status":503,"code":"no_leader"}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	cl, err := client.New([]string{mem.URL}, client.WithBackoff(time.Millisecond, 2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cl.Claim(ctx, client.ClaimRequest{Key: "k", Tool: "t", Owner: "o", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	r := &runner{cl: cl}
	// More failures than the client's own retries absorb.
	failGets.Store(40)
	if got := r.ledgerState(ctx, "k"); got != "declared" {
		t.Errorf("state %q after a moment without a leader, want declared", got)
	}
	failGets.Store(40)
	if got := r.ledgerState(ctx, "absent-key"); got != "absent" {
		t.Errorf("state %q of a key never claimed, want absent", got)
	}
	// A ledger that never answers is unreadable once the wait ends.
	failGets.Store(1 << 30)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if got := r.ledgerState(cctx, "k"); got != "unreadable" {
		t.Errorf("state %q of a ledger that never answers, want unreadable", got)
	}
}
