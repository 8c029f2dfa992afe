package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/clusterview"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/namespace"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

func TestClaimGrantedThenSameOwnerAgain(t *testing.T) {
	e := newEnv(t)
	first := e.claimOK(t, "refund:ord_1", "agent-1")
	if first.Status != "granted" || first.FencingToken == 0 || first.Intent == nil {
		t.Fatalf("first claim = %+v", first)
	}
	claims := e.verifyOffline(t, first.ExecutionToken)
	if claims.Key != "refund:ord_1" || claims.Owner != "agent-1" || claims.FencingToken != first.FencingToken ||
		claims.Fingerprint != first.Intent.Fingerprint || claims.Namespace != namespace.Default {
		t.Errorf("token claims = %+v, want the grant's", claims)
	}
	in := first.Intent
	if in.Key != "refund:ord_1" || in.Namespace != namespace.Default || in.State != "declared" ||
		in.Owner != "agent-1" || in.FencingToken != first.FencingToken || in.Generation != 1 || in.Fingerprint == "" {
		t.Errorf("intent = %+v", in)
	}
	if string(in.Payload) != `{"amount":100,"order":"ord_1"}` {
		t.Errorf("payload = %s, want the canonical form", in.Payload)
	}
	wantDeadline := epoch.Add(30 * time.Second).Format(time.RFC3339Nano)
	if in.LeaseDeadline != wantDeadline || in.CreatedAt != epoch.Format(time.RFC3339Nano) {
		t.Errorf("lease_deadline = %q created_at = %q, want %q and %q", in.LeaseDeadline, in.CreatedAt,
			wantDeadline, epoch.Format(time.RFC3339Nano))
	}

	again := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("refund:ord_1", "agent-1")), http.StatusOK)
	if again.Status != "granted" || again.FencingToken != first.FencingToken || again.ExecutionToken == "" {
		t.Errorf("repeated claim = %+v, want the same grant", again)
	}
}

func TestClaimKeyFromHeader(t *testing.T) {
	e := newEnv(t)
	c := newClaim("", "agent-1")
	a := answer(t, e.do(t, http.MethodPost, "/v1/intents", c, HeaderIdempotencyKey, "email:ticket_1"), http.StatusCreated)
	if a.Intent.Key != "email:ticket_1" {
		t.Errorf("key = %q", a.Intent.Key)
	}
	// The same key in both places is fine.
	c.Key = "email:ticket_1"
	answer(t, e.do(t, http.MethodPost, "/v1/intents", c, HeaderIdempotencyKey, "email:ticket_1"), http.StatusOK)
}

func TestClaimDuplicateCarriesResult(t *testing.T) {
	e := newEnv(t)
	g := e.claimOK(t, "k", "agent-1")
	answer(t, e.do(t, http.MethodPost, keyPath("k", "complete"), map[string]any{
		"owner": "agent-1", "fencing_token": g.FencingToken, "outcome": "executed", "result": map[string]any{"refund_id": "re_1"},
	}), http.StatusOK)

	dup := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "agent-2")), http.StatusOK)
	if dup.Status != "duplicate" || dup.ExecutionToken != "" || dup.FencingToken != 0 {
		t.Errorf("duplicate answer = %+v", dup)
	}
	if string(dup.Intent.Result) != `{"refund_id":"re_1"}` || dup.Intent.Duplicates != 1 {
		t.Errorf("duplicate intent = %+v", dup.Intent)
	}
}

func TestClaimInFlightHasRetryAfter(t *testing.T) {
	e := newEnv(t)
	e.claimOK(t, "k", "agent-1")
	e.mem.Advance(10 * time.Second)
	r := e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "agent-2"))
	p := problemOf(t, r, http.StatusConflict, "in_flight")
	// The lease has 20 s left on the server's clock; the owner's first
	// refusal is told 1 s (the hint grows with its attempts, up to the
	// lease's end: TestInFlightRetryAfter).
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	if p.RetryAfterMS != 1000 {
		t.Errorf("retry_after_ms = %d, want 1000", p.RetryAfterMS)
	}
	if p.Intent == nil || p.Intent.Owner != "agent-1" {
		t.Errorf("problem intent = %+v, want the holder's", p.Intent)
	}
}

func TestClaimInFlightRetryAfterAtLeastOneSecond(t *testing.T) {
	e := newEnv(t)
	e.claimOK(t, "k", "agent-1")
	e.mem.Advance(30 * time.Second) // exactly at the deadline: not yet passed
	r := e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "agent-2"))
	problemOf(t, r, http.StatusConflict, "in_flight")
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
}

func TestClaimInDoubt(t *testing.T) {
	e := newEnv(t)
	c := newClaim("k", "agent-1")
	c.LeaseMS = 1000
	answer(t, e.do(t, http.MethodPost, "/v1/intents", c), http.StatusCreated)
	e.mem.Advance(2 * time.Second)
	p := problemOf(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "agent-2")), http.StatusConflict, "in_doubt")
	if p.Intent == nil || p.Intent.State != "in_doubt" {
		t.Errorf("intent = %+v, want in_doubt", p.Intent)
	}
	// Even the original owner is not granted again.
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", c), http.StatusConflict, "in_doubt")
}

func TestClaimDivergentShowsBothFingerprints(t *testing.T) {
	e := newEnv(t)
	g := e.claimOK(t, "k", "agent-1")
	c := newClaim("k", "agent-1")
	c.Payload = json.RawMessage(`{"order":"ord_1","amount":999}`)
	p := problemOf(t, e.do(t, http.MethodPost, "/v1/intents", c), http.StatusUnprocessableEntity, "divergent")
	if p.Fingerprint != g.Intent.Fingerprint {
		t.Errorf("fingerprint = %q, want the recorded %q", p.Fingerprint, g.Intent.Fingerprint)
	}
	if p.RequestFingerprint == "" || p.RequestFingerprint == p.Fingerprint {
		t.Errorf("request_fingerprint = %q, want a different non-empty one", p.RequestFingerprint)
	}
	if p.Intent == nil || p.Intent.Divergent != 1 {
		t.Errorf("intent = %+v, want divergent=1", p.Intent)
	}
}

func TestEqualPayloadsInAnyFormAreNotDivergent(t *testing.T) {
	e := newEnv(t)
	e.claimOK(t, "k", "agent-1")
	c := newClaim("k", "agent-1")
	c.Payload = json.RawMessage("{ \"amount\": 1.00e2, \"order\": \"ord_1\" }")
	answer(t, e.do(t, http.MethodPost, "/v1/intents", c), http.StatusOK)
}

func TestCompleteFenced(t *testing.T) {
	e := newEnv(t)
	g := e.claimOK(t, "k", "agent-1")
	for _, body := range []map[string]any{
		{"owner": "agent-1", "fencing_token": g.FencingToken + 7, "outcome": "executed"},
		{"owner": "agent-2", "fencing_token": g.FencingToken, "outcome": "executed"},
	} {
		p := problemOf(t, e.do(t, http.MethodPost, keyPath("k", "complete"), body), http.StatusConflict, "fenced")
		if p.Intent == nil || p.Intent.State != "declared" {
			t.Errorf("intent = %+v", p.Intent)
		}
	}
	problemOf(t, e.do(t, http.MethodPost, keyPath("k", "renew"), map[string]any{
		"owner": "agent-2", "fencing_token": g.FencingToken, "lease_ms": 5000}), http.StatusConflict, "fenced")
}

func TestNotFound(t *testing.T) {
	e := newEnv(t)
	problemOf(t, e.do(t, http.MethodGet, keyPath("nope"), nil), http.StatusNotFound, "not_found")
	problemOf(t, e.do(t, http.MethodGet, keyPath("nope", "audit"), nil), http.StatusNotFound, "not_found")
	problemOf(t, e.do(t, http.MethodPost, keyPath("nope", "complete"), map[string]any{
		"owner": "o", "fencing_token": 1, "outcome": "executed"}), http.StatusNotFound, "not_found")
	problemOf(t, e.do(t, http.MethodPost, keyPath("nope", "commit"), map[string]any{"owner": "o"}), http.StatusNotFound, "not_found")
}

func TestInvalidStateAndNotPending(t *testing.T) {
	e := newEnv(t)
	e.claimOK(t, "k", "agent-1")
	problemOf(t, e.do(t, http.MethodPost, keyPath("k", "commit"), map[string]any{"owner": "agent-1"}),
		http.StatusConflict, "invalid_state")
	problemOf(t, e.do(t, http.MethodPost, keyPath("k", "resolve"), map[string]any{
		"outcome": "executed", "actor": "ops", "reason": "checked"}), http.StatusConflict, "invalid_state")
	problemOf(t, e.do(t, http.MethodPost, keyPath("k", "approve"), map[string]any{"actor": "ops"}),
		http.StatusConflict, "not_pending_approval")
	problemOf(t, e.do(t, http.MethodPost, keyPath("k", "reject"), map[string]any{"actor": "ops", "reason": "no"}),
		http.StatusConflict, "not_pending_approval")
}

func TestBadInputIs400AndWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.claimOK(t, "k", "agent-1")
	before := proposed(e.mem)
	cases := []struct {
		name, method, path string
		body               string
		header             []string
		detail             string // a word the detail must contain
	}{
		{"malformed JSON", "POST", "/v1/intents", `{"key": "x",`, nil, "malformed"},
		{"not JSON", "POST", "/v1/intents", `key=x`, nil, "malformed"},
		{"empty body", "POST", "/v1/intents", ``, nil, "empty"},
		{"array", "POST", "/v1/intents", `[1,2]`, nil, "object"},
		{"trailing data", "POST", "/v1/intents", `{"key":"x","tool":"t","owner":"o"} {}`, nil, "after"},
		{"unknown field", "POST", "/v1/intents", `{"key":"x","tool":"t","owner":"o","payload":{},"ownr":"o"}`, nil, "ownr"},
		{"wrong type", "POST", "/v1/intents", `{"key":"x","tool":"t","owner":"o","lease_ms":"30s"}`, nil, "lease_ms"},
		{"missing key", "POST", "/v1/intents", `{"tool":"t","owner":"o","payload":{}}`, nil, "key"},
		{"missing owner", "POST", "/v1/intents", `{"key":"x","tool":"t","payload":{}}`, nil, "owner"},
		{"key and header differ", "POST", "/v1/intents", `{"key":"x","tool":"t","owner":"o","payload":{}}`,
			[]string{HeaderIdempotencyKey, "y"}, "Idempotency-Key"},
		{"unprintable key", "POST", "/v1/intents", `{"key":"a\u0007b","tool":"t","owner":"o","payload":{}}`, nil, "printable"},
		{"negative token", "POST", keyPath("k", "complete"), `{"owner":"agent-1","fencing_token":-1,"outcome":"executed"}`, nil, "fencing_token"},
		{"missing token", "POST", keyPath("k", "complete"), `{"owner":"agent-1","outcome":"executed"}`, nil, "fencing_token"},
		{"bad result JSON", "POST", keyPath("k", "complete"), `{"owner":"agent-1","fencing_token":1,"outcome":"executed","result":}`, nil, "malformed"},
		{"missing actor", "POST", keyPath("k", "resolve"), `{"outcome":"executed","reason":"r"}`, nil, "actor"},
		{"bad consistency", "GET", keyPath("k") + "?consistency=eventual", ``, nil, "consistency"},
		{"bad limit", "GET", "/v1/intents?limit=ten", ``, nil, "limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.method == "POST" {
				body = tc.body
			}
			p := problemOf(t, e.do(t, tc.method, tc.path, body, tc.header...), http.StatusBadRequest, CodeBadRequest)
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail %q does not mention %q", p.Detail, tc.detail)
			}
		})
	}
	if got := proposed(e.mem); got != before {
		t.Errorf("bad input proposed %d commands", got-before)
	}
}

func TestTooLargeIs413(t *testing.T) {
	e := newEnv(t)
	big := `"` + strings.Repeat("x", 64<<10+1) + `"`
	p := problemOf(t, e.do(t, http.MethodPost, "/v1/intents",
		fmt.Sprintf(`{"key":"k","tool":"t","owner":"o","payload":%s}`, big)), http.StatusRequestEntityTooLarge, CodeTooLarge)
	if p.Field != "payload" {
		t.Errorf("field = %q, want payload", p.Field)
	}

	huge := `"` + strings.Repeat("x", int(bodyLimit(ledger.DefaultLimits))) + `"`
	body := fmt.Sprintf(`{"key":"k","tool":"t","owner":"o","payload":%s}`, huge)
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", body), http.StatusRequestEntityTooLarge, CodeTooLarge)
	problemOf(t, e.do(t, http.MethodPost, keyPath("k", "complete"), body), http.StatusRequestEntityTooLarge, CodeTooLarge)

	if got := proposed(e.mem); got != 0 {
		t.Errorf("oversize requests proposed %d commands", got)
	}
}

// TestBodyLimitFollowsTheServiceLimits: the body cap is derived from the
// ledger service's limits, so a node configured for larger payloads takes
// them and one configured for smaller ones refuses larger bodies early.
func TestBodyLimitFollowsTheServiceLimits(t *testing.T) {
	if got, want := bodyLimit(ledger.DefaultLimits), int64(2*64<<10+16<<10); got != want {
		t.Fatalf("bodyLimit(DefaultLimits) = %d, want %d", got, want)
	}
	claimOf := func(payloadBytes int) string {
		return fmt.Sprintf(`{"key":"k","tool":"t","owner":"o","payload":"%s"}`, strings.Repeat("x", payloadBytes))
	}
	t.Run("larger", func(t *testing.T) {
		limits := ledger.Limits{MaxPayloadBytes: 1 << 20}
		e, _, _ := envWithLimits(t, limits)
		if e.api.maxBody != bodyLimit(e.api.svc.Limits()) || e.api.maxBody <= bodyLimit(ledger.DefaultLimits) {
			t.Fatalf("maxBody = %d for limits %+v", e.api.maxBody, e.api.svc.Limits())
		}
		answer(t, e.do(t, http.MethodPost, "/v1/intents", claimOf(512<<10)), http.StatusCreated)
	})
	t.Run("smaller", func(t *testing.T) {
		limits := ledger.Limits{MaxPayloadBytes: 1 << 10, MaxResultBytes: 1 << 10}
		e, mem, _ := envWithLimits(t, limits)
		limit := bodyLimit(e.api.svc.Limits())
		if limit != 2<<10+16<<10 {
			t.Fatalf("bodyLimit = %d", limit)
		}
		p := problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claimOf(int(limit))), http.StatusRequestEntityTooLarge, CodeTooLarge)
		if p.Field != "" || !strings.Contains(p.Detail, fmt.Sprintf("limit of %d bytes", limit)) {
			t.Errorf("problem %+v, want the body limit's", p)
		}
		if n := mem.Proposed(); n != 0 {
			t.Errorf("an oversize body proposed %d commands", n)
		}
	})
}

func TestTooLargeWithoutContentLength(t *testing.T) {
	e := newEnv(t)
	// An unknown length (chunked) body is cut at the limit, still a 413.
	body := strings.NewReader(`{"key":"k","payload":"` + strings.Repeat("x", int(bodyLimit(ledger.DefaultLimits))) + `"}`)
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/intents", struct{ *strings.Reader }{body})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status = %d, want 413", resp.StatusCode)
	}
}

func TestUnprocessableIs422(t *testing.T) {
	e := newEnv(t)
	g := e.claimOK(t, "k", "agent-1")
	before := proposed(e.mem)
	for name, tc := range map[string]struct {
		path string
		body any
	}{
		"lease too short": {"/v1/intents", claimJSON{Key: "x", Tool: "t", Owner: "o", LeaseMS: 10}},
		"lease too long":  {"/v1/intents", claimJSON{Key: "x", Tool: "t", Owner: "o", LeaseMS: 1 << 62}},
		"negative lease":  {"/v1/intents", claimJSON{Key: "x", Tool: "t", Owner: "o", LeaseMS: -5}},
		"bad outcome":     {keyPath("k", "complete"), map[string]any{"owner": "agent-1", "fencing_token": g.FencingToken, "outcome": "done"}},
		"renew lease":     {keyPath("k", "renew"), map[string]any{"owner": "agent-1", "fencing_token": g.FencingToken, "lease_ms": 1}},
		"resolve outcome": {keyPath("k", "resolve"), map[string]any{"outcome": "maybe", "actor": "ops"}},
		"list state":      {"/v1/intents?state=sleeping", nil},
		"list neg. limit": {"/v1/intents?limit=-1", nil},
	} {
		t.Run(name, func(t *testing.T) {
			method := http.MethodPost
			if tc.body == nil {
				method = http.MethodGet
			}
			problemOf(t, e.do(t, method, tc.path, tc.body), http.StatusUnprocessableEntity, CodeUnprocessable)
		})
	}
	if got := proposed(e.mem); got != before {
		t.Errorf("unprocessable input proposed %d commands", got-before)
	}
}

func TestReplicationErrorsAre503(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
	}{
		{ledger.ErrNoLeader, CodeNoLeader},
		{fmt.Errorf("apply: %w", ledger.ErrOutcomeUnknown), CodeOutcomeUnknown},
		{ledger.ErrShuttingDown, CodeShuttingDown},
		{&ledger.NotLeaderError{}, CodeNoLeader},
		{context.DeadlineExceeded, CodeOutcomeUnknown},
	} {
		t.Run(tc.code+"/"+tc.err.Error(), func(t *testing.T) {
			e := newEnv(t)
			e.mem.FailNext(tc.err)
			r := e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "agent-1"))
			p := problemOf(t, r, http.StatusServiceUnavailable, tc.code)
			if r.header.Get("Retry-After") != "1" || p.RetryAfterMS != 1000 {
				t.Errorf("Retry-After = %q, retry_after_ms = %d, want 1 s", r.header.Get("Retry-After"), p.RetryAfterMS)
			}
			// The same request goes through once the cluster is back.
			e.claimOK(t, "k", "agent-1")
		})
	}
}

func TestOutcomeUnknownTitleSaysSafeToRetry(t *testing.T) {
	e := newEnv(t)
	e.mem.FailNext(ledger.ErrOutcomeUnknown)
	p := problemOf(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o")), http.StatusServiceUnavailable, CodeOutcomeUnknown)
	for _, want := range []string{"unknown", "safe to retry", "same key, owner and payload"} {
		if !strings.Contains(p.Title, want) {
			t.Errorf("title %q does not say %q", p.Title, want)
		}
	}
}

func TestReadErrorsAre503Unavailable(t *testing.T) {
	e := newEnv(t)
	e.claimOK(t, "k", "agent-1")
	for _, err := range []error{ledger.ErrOutcomeUnknown, context.Canceled} {
		e.mem.FailNext(err)
		problemOf(t, e.do(t, http.MethodGet, keyPath("k"), nil), http.StatusServiceUnavailable, CodeUnavailable)
	}
	e.mem.FailNext(ledger.ErrNoLeader)
	problemOf(t, e.do(t, http.MethodGet, "/v1/intents", nil), http.StatusServiceUnavailable, CodeNoLeader)
}

func TestUnexpectedErrorIs500(t *testing.T) {
	e := newEnv(t)
	e.mem.FailNext(errors.New("disk on fire"))
	p := problemOf(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o")), http.StatusInternalServerError, CodeInternal)
	if strings.Contains(p.Detail, "disk") {
		t.Errorf("detail %q leaks the internal error", p.Detail)
	}
}

func TestTokenIssueFailureIs503(t *testing.T) {
	e := newEnv(t)
	e.reads.fail.Store(true)
	r := e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o"))
	problemOf(t, r, http.StatusServiceUnavailable, CodeUnavailable)
	e.reads.fail.Store(false)
	a := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "o")), http.StatusOK)
	if a.Status != "granted" || a.ExecutionToken == "" {
		t.Errorf("retried claim = %+v, want the grant with a token", a)
	}
}

func TestHappyPath(t *testing.T) {
	e := newEnv(t)
	key := "charge:order-91"
	g := e.claimOK(t, key, "agent-7/host-a/41ab")

	e.mem.Advance(time.Second)
	rn := answer(t, e.do(t, http.MethodPost, keyPath(key, "renew"), map[string]any{
		"owner": "agent-7/host-a/41ab", "fencing_token": g.FencingToken, "lease_ms": 60000}), http.StatusOK)
	if want := epoch.Add(61 * time.Second).Format(time.RFC3339Nano); rn.Status != "ok" || rn.Intent.LeaseDeadline != want {
		t.Errorf("renew = %+v, want lease_deadline %s", rn.Intent, want)
	}

	c := answer(t, e.do(t, http.MethodPost, keyPath(key, "complete"), map[string]any{
		"owner": "agent-7/host-a/41ab", "fencing_token": g.FencingToken, "outcome": "executed",
		"result": map[string]any{"charge_id": "ch_1"}}), http.StatusOK)
	if c.Status != "ok" || c.Intent.State != "executed" {
		t.Errorf("complete = %+v", c)
	}
	cm := answer(t, e.do(t, http.MethodPost, keyPath(key, "commit"), map[string]any{"owner": "agent-7/host-a/41ab"}), http.StatusOK)
	if cm.Intent.State != "committed" {
		t.Errorf("commit state = %q", cm.Intent.State)
	}
	got := intentAnswer(t, e.do(t, http.MethodGet, keyPath(key), nil))
	if got.State != "committed" || string(got.Result) != `{"charge_id":"ch_1"}` ||
		got.Version == 0 || got.UpdatedAt == "" {
		t.Errorf("get = %+v", got)
	}

	var audit struct {
		Key       string `json:"key"`
		Namespace string `json:"namespace"`
		Events    []struct {
			Index uint64 `json:"index"`
			At    string `json:"at"`
			Op    string `json:"op"`
			State string `json:"state"`
		} `json:"events"`
		Dropped uint64 `json:"dropped"`
	}
	r := e.do(t, http.MethodGet, keyPath(key, "audit"), nil)
	if r.status != http.StatusOK {
		t.Fatalf("audit: %s", r)
	}
	if err := json.Unmarshal(r.body, &audit); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, ev := range audit.Events {
		ops = append(ops, ev.Op)
		if _, err := time.Parse(time.RFC3339Nano, ev.At); err != nil {
			t.Errorf("event time %q: %v", ev.At, err)
		}
	}
	if audit.Key != key || audit.Namespace != "default" || strings.Join(ops, ",") != "claim,renew,complete,commit" {
		t.Errorf("audit = %s", r.body)
	}
}

func TestResolveInDoubt(t *testing.T) {
	e := newEnv(t)
	c := newClaim("k", "agent-1")
	c.LeaseMS = 1000
	answer(t, e.do(t, http.MethodPost, "/v1/intents", c), http.StatusCreated)
	e.mem.Advance(2 * time.Second)
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "agent-2")), http.StatusConflict, "in_doubt")
	a := answer(t, e.do(t, http.MethodPost, keyPath("k", "resolve"), map[string]any{
		"outcome": "failed", "actor": "ops@example", "reason": "no refund in the PSP"}), http.StatusOK)
	if a.Intent.State != "failed" {
		t.Fatalf("resolved state = %q", a.Intent.State)
	}
	// A failed intent is granted again, in a new generation.
	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "agent-2")), http.StatusCreated)
	if g.Intent.Generation != 2 {
		t.Errorf("generation = %d, want 2", g.Intent.Generation)
	}
}

func TestListPaging(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		e.claimOK(t, fmt.Sprintf("page:%d", i), "o")
	}
	e.claimOK(t, "other", "o")
	var keys []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		r := e.do(t, http.MethodGet, "/v1/intents?prefix=page:&limit=2&cursor="+cursor, nil)
		var page struct {
			Intents    []wireIntent `json:"intents"`
			NextCursor *string      `json:"next_cursor"`
		}
		if r.status != http.StatusOK {
			t.Fatalf("list: %s", r)
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		if page.NextCursor == nil || len(page.Intents) > 2 {
			t.Fatalf("page = %s", r.body)
		}
		for _, in := range page.Intents {
			keys = append(keys, in.Key)
		}
		if *page.NextCursor == "" {
			break
		}
		cursor = *page.NextCursor
	}
	if strings.Join(keys, ",") != "page:0,page:1,page:2,page:3,page:4" {
		t.Errorf("keys = %v", keys)
	}

	r := e.do(t, http.MethodGet, "/v1/intents?state=executed", nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"intents":[]`) {
		t.Errorf("empty list = %s, want an empty array", r)
	}
}

// recordingReplicator notes the consistency of each read.
type recordingReplicator struct {
	ledger.Replicator
	reads chan ledger.Consistency
}

func (r *recordingReplicator) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	r.reads <- c
	return r.Replicator.Read(ctx, c, fn)
}

func TestGetConsistency(t *testing.T) {
	mem := ledgertest.NewMemory(epoch)
	rec := &recordingReplicator{Replicator: mem, reads: make(chan ledger.Consistency, 10)}
	e2 := newEnvOver(t, mem, rec)
	e2.claimOK(t, "k", "o")
	for len(rec.reads) > 0 {
		<-rec.reads // the claim's own reads (the signing key)
	}
	for query, want := range map[string]ledger.Consistency{
		"":                          ledger.Linearizable,
		"?consistency=linearizable": ledger.Linearizable,
		"?consistency=stale":        ledger.Stale,
	} {
		answer(t, e2.do(t, http.MethodGet, keyPath("k")+query, nil), http.StatusOK)
		if got := <-rec.reads; got != want {
			t.Errorf("GET %q read with %v, want %v", query, got, want)
		}
	}
	answer(t, e2.do(t, http.MethodGet, "/v1/intents?consistency=stale", nil), http.StatusOK)
	if got := <-rec.reads; got != ledger.Stale {
		t.Errorf("list read with %v, want stale", got)
	}
}

func TestEscapedKeys(t *testing.T) {
	e := newEnv(t)
	for _, key := range []string{"a/b", "50%", "refund:ord_1", "é x", "a%2Fb", "x/audit", "q?x=1#f", "+plus"} {
		t.Run(key, func(t *testing.T) {
			g := e.claimOK(t, key, "o")
			if g.Intent.Key != key {
				t.Fatalf("claimed key = %q", g.Intent.Key)
			}
			got := intentAnswer(t, e.do(t, http.MethodGet, keyPath(key), nil))
			if got.Key != key {
				t.Errorf("get key = %q, want %q", got.Key, key)
			}
			c := answer(t, e.do(t, http.MethodPost, keyPath(key, "complete"), map[string]any{
				"owner": "o", "fencing_token": g.FencingToken, "outcome": "executed"}), http.StatusOK)
			if c.Intent.Key != key || c.Intent.State != "executed" {
				t.Errorf("complete = %+v", c.Intent)
			}
			r := e.do(t, http.MethodGet, keyPath(key, "audit"), nil)
			if r.status != http.StatusOK || !strings.Contains(string(r.body), `"op":"complete"`) {
				t.Errorf("audit = %s", r)
			}
		})
	}
}

func TestHealthReadyCluster(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, http.MethodGet, "/healthz", nil)
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
		t.Errorf("healthz = %s", r)
	}
	if r := e.do(t, http.MethodGet, "/readyz", nil); r.status != http.StatusOK {
		t.Errorf("readyz = %s", r)
	}
	e.cluster.setReady(false)
	r = e.do(t, http.MethodGet, "/readyz", nil)
	problemOf(t, r, http.StatusServiceUnavailable, CodeNotReady)
	if r.header.Get("Retry-After") == "" {
		t.Error("not ready without Retry-After")
	}
	// Liveness does not depend on readiness.
	if r := e.do(t, http.MethodGet, "/healthz", nil); r.status != http.StatusOK {
		t.Errorf("healthz while not ready = %s", r)
	}

	r = e.do(t, http.MethodGet, "/v1/cluster", nil)
	var st clusterview.Status
	if err := json.Unmarshal(r.body, &st); err != nil || r.status != http.StatusOK {
		t.Fatalf("cluster = %s (%v)", r, err)
	}
	if st.NodeID != "n1" || len(st.Nodes) != 1 || !st.Nodes[0].Leader {
		t.Errorf("cluster = %+v", st)
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newEnv(t)
	problemOf(t, e.do(t, http.MethodGet, "/v2/nothing", nil), http.StatusNotFound, CodeNoRoute)
	r := e.do(t, http.MethodDelete, keyPath("k"), nil)
	problemOf(t, r, http.StatusMethodNotAllowed, CodeMethodNotAllowed)
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.claimOK(t, "k", "o")
	e.do(t, http.MethodPost, "/v1/intents", newClaim("k", "p"))
	e.do(t, http.MethodGet, "/v2/x", nil)
	r := e.do(t, http.MethodGet, "/metrics", nil)
	if r.status != http.StatusOK {
		t.Fatalf("metrics: %s", r)
	}
	body := string(r.body)
	for _, want := range []string{
		`intentd_http_requests_total{code="201",method="POST",route="/v1/intents"} 1`,
		`intentd_http_requests_total{code="409",method="POST",route="/v1/intents"} 1`,
		`intentd_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`intentd_http_request_duration_seconds_count{code="201",method="POST",route="/v1/intents"} 1`,
		`intentd_http_request_duration_seconds_count{code="409",method="POST",route="/v1/intents"} 1`,
		`intentd_claims_total{status="granted"} 1`,
		`intentd_claims_total{status="in_flight"} 1`,
		`intentd_http_forwarded_total 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// A second server on the same registry shares the collectors.
	New(Config{Service: ledgertest.NewService(t, e.mem, ledger.Config{}), Registry: e.reg})
}

func TestRetryAfterHeaderRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "1", time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", time.Minute: "60",
	} {
		p := &problem{}
		p.setRetryAfter(d)
		p.retryAfter = d
		if got := p.retryAfterHeader(); got != want {
			t.Errorf("Retry-After for %v = %s, want %s", d, got, want)
		}
	}
}

func TestEveryCodeIsDocumented(t *testing.T) {
	doc := readProblemsDoc(t)
	for code, spec := range codes {
		if spec.status < 400 {
			continue
		}
		if !strings.Contains(doc, "\n### "+code+"\n") {
			t.Errorf("docs/problems.md has no section for %q", code)
		}
		if !strings.Contains(doc, "**"+strconv.Itoa(spec.status)+".**") {
			t.Errorf("docs/problems.md never mentions status %d", spec.status)
		}
	}
}

func readProblemsDoc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../docs/problems.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestPayloadIsNotHTMLEscaped(t *testing.T) {
	e := newEnv(t)
	c := newClaim("k", "o")
	c.Payload = json.RawMessage(`{"html":"<b>&</b>"}`)
	r := e.do(t, http.MethodPost, "/v1/intents", c)
	answer(t, r, http.StatusCreated)
	if !strings.Contains(string(r.body), `"payload":{"html":"<b>&</b>"}`) {
		t.Errorf("payload escaped: %s", r.body)
	}
}

func TestStatusTable(t *testing.T) {
	for _, tc := range []struct {
		r    fsm.Result
		want int
	}{
		{fsm.Result{Status: fsm.StatusGranted, Created: true}, http.StatusCreated},
		{fsm.Result{Status: fsm.StatusGranted}, http.StatusOK},
		{fsm.Result{Status: fsm.StatusDuplicate}, http.StatusOK},
		{fsm.Result{Status: fsm.StatusPendingApproval}, http.StatusAccepted},
		{fsm.Result{Status: fsm.StatusOK}, http.StatusOK},
	} {
		code, ok := successCode(&tc.r)
		if !ok || codes[code].status != tc.want {
			t.Errorf("%s (created %v) → %q %d, want %d", tc.r.Status, tc.r.Created, code, codes[code].status, tc.want)
		}
	}
	for status, want := range map[fsm.Status]int{
		fsm.StatusInFlight: 409, fsm.StatusInDoubt: 409, fsm.StatusDivergent: 422, fsm.StatusFenced: 409,
		fsm.StatusRejected: 403, fsm.StatusNotFound: 404, fsm.StatusInvalidState: 409, fsm.StatusNotPending: 409,
		fsm.StatusPurged: 500,
	} {
		r := &fsm.Result{Status: status}
		if _, ok := successCode(r); ok {
			t.Errorf("%s counted as a success", status)
		}
		if p := refusalProblem(r, epoch); p.Status != want {
			t.Errorf("%s → %d, want %d", status, p.Status, want)
		}
	}
}
