package httpapi

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
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

// getAsyncAs sends a GET with header in the background; its reply
// arrives on the channel.
func getAsyncAs(t *testing.T, base, path string, header ...string) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Error(err)
			ch <- reply{}
			return
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			ch <- reply{}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Error(err)
		}
		ch <- reply{status: resp.StatusCode, header: resp.Header, body: body}
	}()
	return ch
}

// testKeyset is a keyset of keys (name → role, all in namespace alpha)
// and their plaintext keys by name.
func testKeyset(t *testing.T, roles map[string]string) (*auth.Keyset, map[string]string) {
	t.Helper()
	keys := map[string]string{}
	var entries []string
	for name, r := range roles {
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = plain
		entries = append(entries, fmt.Sprintf(`{"name":%q,"namespace":"alpha","roles":[%q],"sha256":%q}`, name, r, sum))
	}
	ks, err := auth.Parse([]byte(`{"keys":[` + strings.Join(entries, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return ks, keys
}

// TestLongPollsAreCappedPerCaller: one API key's long-polls, on intents
// and on the audit log together, hold at most MaxWaitersPerCaller of the
// node's slots, so another key's long-poll still waits instead of getting
// 429 too_many_waiters.
func TestLongPollsAreCappedPerCaller(t *testing.T) {
	ks, keys := testKeyset(t, map[string]string{"hog": "reader", "other": "reader"})
	e, r, svc := envWithLimits(t, ledger.Limits{MaxWaiters: 10, MaxWaitersPerKey: 10, MaxWaitersPerCaller: 2},
		func(c *Config) { c.Auth = ks; c.RateLimits = &RateLimits{} })
	hog, other := bearer(keys["hog"]), bearer(keys["other"])

	reads := r.Count()
	h1 := getAsyncAs(t, e.srv.URL, keyPath("a")+"?wait=30s", hog...)
	h2 := getAsyncAs(t, e.srv.URL, "/v1/audit?since=1&wait=30s", hog...)
	r.Await(t, reads+2)

	for _, path := range []string{keyPath("b") + "?wait=30s", "/v1/audit?since=1&wait=30s"} {
		rep := e.do(t, http.MethodGet, path, nil, hog...)
		p := problemOf(t, rep, http.StatusTooManyRequests, CodeTooManyWaiters)
		if rep.header.Get("Retry-After") == "" || !strings.Contains(p.Detail, "caller") {
			t.Fatalf("the hog's third long-poll %s: %s", path, rep)
		}
	}
	// The node has slots left, and the other key gets one.
	reads = r.Count()
	o := getAsyncAs(t, e.srv.URL, keyPath("b")+"?wait=30s", other...)
	r.Await(t, reads+1)
	if svc.Waiting() != 3 {
		t.Fatalf("Waiting() = %d, want 3", svc.Waiting())
	}

	svc.Close()
	for _, ch := range []<-chan reply{h1, o} {
		problemOf(t, replyOf(t, ch), http.StatusNotFound, string(fsm.StatusNotFound))
	}
	if rep := replyOf(t, h2); rep.status != http.StatusOK {
		t.Fatalf("closed audit poll: %s", rep)
	}
}

// TestKeyLimitIsPerClient: the per-key bucket is per (client, key): a
// reader polling an intent spends its own tokens, never those of the key
// holding the grant, whose renew and complete go through.
func TestKeyLimitIsPerClient(t *testing.T) {
	const burst = 3
	ks, keys := testKeyset(t, map[string]string{"agent": "agent", "reader": "reader"})
	e := newEnv(t, func(c *Config) { c.Auth = ks; c.RateLimits = &RateLimits{PerKey: 0.001, KeyBurst: burst} })
	agent, reader := bearer(keys["agent"]), bearer(keys["reader"])
	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o"), agent...), http.StatusCreated)

	for range burst {
		intentAnswer(t, e.do(t, http.MethodGet, keyPath("k"), nil, reader...))
	}
	problemOf(t, e.do(t, http.MethodGet, keyPath("k"), nil, reader...), http.StatusTooManyRequests, CodeRateLimited)

	report := map[string]any{"owner": "o", "fencing_token": g.FencingToken}
	answer(t, e.do(t, http.MethodPost, keyPath("k", "renew"), report, agent...), http.StatusOK)
	report["outcome"] = "executed"
	answer(t, e.do(t, http.MethodPost, keyPath("k", "complete"), report, agent...), http.StatusOK)
	// The agent's own loop on the key is still limited: its claim, renew
	// and complete spent its burst.
	problemOf(t, e.do(t, http.MethodGet, keyPath("k"), nil, agent...), http.StatusTooManyRequests, CodeRateLimited)
}

// TestAuthFailureLimitNeverRefusesAGoodKey: a client flooding bad keys
// from an address trips the failure limit for its bad keys only; a good
// key from the same address (another client behind the same NAT, or the
// same host) is still served.
func TestAuthFailureLimitNeverRefusesAGoodKey(t *testing.T) {
	const burst = 3
	ks, keys := testKeyset(t, map[string]string{"agent": "agent", "tool": "tool"})
	e := newEnv(t, func(c *Config) { c.Auth = ks; c.RateLimits = &RateLimits{AuthFailures: 0.001, AuthFailureBurst: burst} })
	h := e.api.Handler()
	const addr = "127.0.0.1:5000"
	claim, err := json.Marshal(newClaim("k", "o"))
	if err != nil {
		t.Fatal(err)
	}
	bad := bearer("ik_" + strings.Repeat("B", 43))
	for range burst {
		problemOf(t, serveFrom(t, h, addr, http.MethodPost, "/v1/intents", claim, bad...), http.StatusUnauthorized, CodeUnauthenticated)
	}
	for _, tc := range []struct {
		name   string
		header []string
		status int
		code   string
	}{
		{"a bad key", bad, http.StatusTooManyRequests, CodeRateLimited},
		{"no key", nil, http.StatusTooManyRequests, CodeRateLimited},
		{"a good key", bearer(keys["agent"]), http.StatusCreated, ""},
		{"a good key without the role", bearer(keys["tool"]), http.StatusForbidden, CodeForbidden},
		{"a bad key, still", bad, http.StatusTooManyRequests, CodeRateLimited},
	} {
		rep := serveFrom(t, h, addr, http.MethodPost, "/v1/intents", claim, tc.header...)
		if tc.code == "" {
			answer(t, rep, tc.status)
			continue
		}
		problemOf(t, rep, tc.status, tc.code)
	}
}
