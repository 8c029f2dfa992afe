package httpapi

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

func TestInFlightRetryAfter(t *testing.T) {
	now := epoch
	lease := func(left time.Duration) *fsm.Intent { return &fsm.Intent{LeaseDeadline: now.Add(left).UnixNano()} }
	cases := []struct {
		name    string
		attempt uint64
		left    time.Duration
		want    time.Duration
	}{
		{"answered by the log", 0, 30 * time.Second, time.Second},
		{"first attempt", 1, 30 * time.Second, time.Second},
		{"second", 2, 30 * time.Second, 2 * time.Second},
		{"fourth", 4, 30 * time.Second, 8 * time.Second},
		{"capped at 32 s", 40, time.Hour, 32 * time.Second},
		{"never past the lease", 5, 3 * time.Second, 3 * time.Second},
		{"lease at its end", 1, 0, 100 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := inFlightRetryAfter(&fsm.Result{Status: fsm.StatusInFlight, Attempt: tc.attempt, Intent: lease(tc.left)}, now)
			if got != tc.want {
				t.Fatalf("Retry-After %v, want %v", got, tc.want)
			}
		})
	}
}

// TestInFlightStormOverHTTP: refused claims on a held key are answered
// without a proposal each (but the first), with a Retry-After that grows per owner, and
// the holder's own report still goes through.
func TestInFlightStormOverHTTP(t *testing.T) {
	e := newEnvWith(t, ledger.Config{Node: "n1", RefusalNotes: ledger.RefusalNotes{Interval: time.Hour}})
	g := e.claimOK(t, "k", "holder")
	before := proposed(e.mem)
	for attempt, want := range []int64{1000, 2000, 4000, 8000} {
		for i := range 5 {
			r := e.do(t, http.MethodPost, "/v1/intents", newClaim("k", fmt.Sprintf("retrier-%d", i)))
			p := problemOf(t, r, http.StatusConflict, "in_flight")
			if p.RetryAfterMS != want {
				t.Fatalf("attempt %d of retrier-%d: retry_after_ms %d, want %d", attempt+1, i, p.RetryAfterMS, want)
			}
		}
	}
	// The first refusal went through the log and marked the key; the
	// other 19 were answered from the state.
	if n := proposed(e.mem) - before; n != 1 {
		t.Fatalf("20 refusals proposed %d commands, want 1", n)
	}
	answer(t, e.do(t, http.MethodPost, keyPath("k", "complete"), map[string]any{
		"owner": "holder", "fencing_token": g.FencingToken, "outcome": "executed"}), http.StatusOK)
}

// TestHolderNotLimitedByAStormOnItsKey: with auth on, other keys' callers
// hammering a held intent spend their own per-(caller, intent) buckets,
// never the holder's: its renew and complete go through (a 429 there
// could let the lease lapse into in_doubt).
func TestHolderNotLimitedByAStormOnItsKey(t *testing.T) {
	const burst = 3
	ks, keys := testKeyset(t, map[string]string{"holder": "agent", "storm-1": "agent", "storm-2": "agent"})
	e := newEnvWith(t, ledger.Config{Node: "n1", RefusalNotes: ledger.RefusalNotes{Interval: time.Hour}}, func(c *Config) {
		c.Auth = ks
		c.RateLimits = &RateLimits{PerKey: 0.001, KeyBurst: burst}
	})
	holder := bearer(keys["holder"])
	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o"), holder...), http.StatusCreated)
	for _, name := range []string{"storm-1", "storm-2"} {
		for i := range 4 * burst {
			r := e.do(t, http.MethodPost, "/v1/intents", newClaim("k", fmt.Sprintf("%s/%d", name, i)), bearer(keys[name])...)
			if i < burst {
				problemOf(t, r, http.StatusConflict, "in_flight")
			} else {
				problemOf(t, r, http.StatusTooManyRequests, CodeRateLimited)
			}
		}
	}
	report := map[string]any{"owner": "o", "fencing_token": g.FencingToken}
	answer(t, e.do(t, http.MethodPost, keyPath("k", "renew"), report, holder...), http.StatusOK)
	report["outcome"] = "executed"
	answer(t, e.do(t, http.MethodPost, keyPath("k", "complete"), report, holder...), http.StatusOK)
}
