package httpapi

import (
	"net/http"
	"testing"
)

func TestRateLimits(t *testing.T) {
	t.Run("per client", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.RateLimits = &RateLimits{PerClient: 0.001, ClientBurst: 2} })
		for i := 0; i < 2; i++ {
			e.do(t, http.MethodGet, keyPath("k"), nil)
		}
		r := e.do(t, http.MethodGet, keyPath("k"), nil)
		p := problemOf(t, r, http.StatusTooManyRequests, CodeRateLimited)
		if r.header.Get("Retry-After") == "" || p.RetryAfterMS <= 0 {
			t.Fatalf("429 without Retry-After: %s", r)
		}
		for _, path := range []string{"/healthz", "/metrics", "/v1/keys"} {
			if r := e.do(t, http.MethodGet, path, nil); r.status != http.StatusOK {
				t.Fatalf("public %s limited: %s", path, r)
			}
		}
		before := proposed(e.mem)
		problemOf(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("x", "o")), http.StatusTooManyRequests, CodeRateLimited)
		if proposed(e.mem) != before {
			t.Fatal("a limited request reached the ledger")
		}
	})
	t.Run("per key", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.RateLimits = &RateLimits{PerKey: 0.001, KeyBurst: 1} })
		e.claimOK(t, "hot", "o")
		problemOf(t, e.do(t, http.MethodGet, keyPath("hot"), nil), http.StatusTooManyRequests, CodeRateLimited)
		problemOf(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("hot", "o")), http.StatusTooManyRequests, CodeRateLimited)
		e.claimOK(t, "cold", "o") // other keys are not affected
	})
	t.Run("off", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.RateLimits = &RateLimits{} })
		for i := 0; i < 50; i++ {
			if r := e.do(t, http.MethodGet, keyPath("k"), nil); r.status == http.StatusTooManyRequests {
				t.Fatalf("limited with limits off: %s", r)
			}
		}
	})
}
