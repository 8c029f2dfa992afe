package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/fsm"
)

type wirePolicy struct {
	Status string     `json:"status"`
	Policy fsm.Policy `json:"policy"`
}

func (e *testEnv) putPolicy(t *testing.T, name string, body string, want int) reply {
	t.Helper()
	r := e.do(t, http.MethodPut, "/v1/policies/"+name, body)
	if r.status != want {
		t.Fatalf("PUT policy %s = %s, want %d", name, r, want)
	}
	return r
}

func TestPolicyEndpoints(t *testing.T) {
	e := newEnv(t)
	r := e.putPolicy(t, "payments", `{"tools":["payments.*"],"require_approval":true,"approvals_required":2,"approvers":["alice","bob"]}`, http.StatusOK)
	var p wirePolicy
	if err := json.Unmarshal(r.body, &p); err != nil || p.Policy.Version == 0 || p.Policy.Name != "payments" {
		t.Fatalf("put answered %s", r.body)
	}
	// Compare-and-set.
	problemOf(t, e.do(t, http.MethodPut, "/v1/policies/payments", fmt.Sprintf(`{"tools":["x"],"expect_version":%d}`, p.Policy.Version+5)),
		http.StatusConflict, string(fsm.StatusVersionMismatch))
	// Bad input changes nothing and writes nothing.
	before := proposed(e.mem)
	for _, bad := range []struct{ name, body, code string }{
		{"payments", `{"tools":["pay[ments"]}`, CodeUnprocessable},
		{"payments", `{"tools":[]}`, CodeUnprocessable},
		{"Bad Name", `{"tools":["x"]}`, CodeUnprocessable},
		{"payments", `{"name":"other","tools":["x"]}`, CodeBadRequest},
		{"payments", `{"tools":["x"],"lease_ms":5}`, CodeUnprocessable},
		{"payments", `{"tools":["x"],"nope":1}`, CodeBadRequest},
	} {
		status := http.StatusUnprocessableEntity
		if bad.code == CodeBadRequest {
			status = http.StatusBadRequest
		}
		problemOf(t, e.do(t, http.MethodPut, "/v1/policies/"+strings.ReplaceAll(bad.name, " ", "%20"), bad.body), status, bad.code)
	}
	if n := proposed(e.mem) - before; n != 0 {
		t.Fatalf("bad policies proposed %d commands", n)
	}
	var list struct {
		Policies []fsm.Policy `json:"policies"`
	}
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/v1/policies", nil).body, &list); err != nil ||
		len(list.Policies) != 2 || list.Policies[0].Name != "default" || list.Policies[1].Name != "payments" {
		t.Fatalf("list = %+v (%v)", list, err)
	}
	problemOf(t, e.do(t, http.MethodGet, "/v1/policies/nope", nil), http.StatusNotFound, CodePolicyNotFound)
	problemOf(t, e.do(t, http.MethodDelete, "/v1/policies/default", nil), http.StatusUnprocessableEntity, CodeUnprocessable)
	answer(t, e.do(t, http.MethodDelete, "/v1/policies/payments", nil), http.StatusOK)
	problemOf(t, e.do(t, http.MethodDelete, "/v1/policies/payments", nil), http.StatusNotFound, CodePolicyNotFound)
}

// TestGateWalkthrough is the README's Gate section end to end: policy →
// pending → approvals (N of M, bound to the fingerprint) → granted with a
// token → the tool verifies it once → complete → the audit chain verifies.
func TestGateWalkthrough(t *testing.T) {
	e := newEnv(t)
	e.putPolicy(t, "charges", `{"tools":["payments.*"],"require_approval":true,"approvals_required":2,"approvers":["alice","bob","carol"],"token_ttl_ms":60000}`, http.StatusOK)
	e.putPolicy(t, "deploys", `{"tools":["deploy.*"],"blocked":true}`, http.StatusOK)

	key := "refund:ord_1"
	claim := newClaim(key, "agent-1")
	pending := answer(t, e.do(t, http.MethodPost, "/v1/intents", claim), http.StatusAccepted)
	if pending.Status != "pending_approval" || pending.Intent.Policy != "charges" || pending.Intent.ApprovalsRequired != 2 {
		t.Fatalf("claim under the approval policy = %+v", pending)
	}
	fp := pending.Intent.Fingerprint

	// The queue shows it.
	var queue listWire
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/v1/intents?state=pending_approval", nil).body, &queue); err != nil || len(queue.Intents) != 1 {
		t.Fatalf("pending queue = %+v (%v)", queue, err)
	}

	// A long-poll on the key wakes up with the next change (every
	// audited attempt is one).
	woke := make(chan reply, 1)
	go func() {
		woke <- e.do(t, http.MethodGet, fmt.Sprintf("%s?wait=30s&after_version=%d", keyPath(key), pending.Intent.Version), nil)
	}()

	decide := func(action, actor, fingerprint string) reply {
		return e.do(t, http.MethodPost, keyPath(key, action), map[string]string{"actor": actor, "reason": "ok", "fingerprint": fingerprint})
	}
	otherFP := strings.Repeat("0", 64)
	problemOf(t, decide("approve", "alice", otherFP), http.StatusUnprocessableEntity, string(fsm.StatusDivergent))
	problemOf(t, decide("approve", "mallory", fp), http.StatusForbidden, string(fsm.StatusNotAnApprover))
	problemOf(t, decide("approve", "alice", "not-hex"), http.StatusBadRequest, CodeBadRequest)
	a1 := answer(t, decide("approve", "alice", fp), http.StatusOK)
	if a1.Intent.State != "pending_approval" || len(a1.Intent.Approvals) != 1 {
		t.Fatalf("after 1 of 2 approvals: %+v", a1.Intent)
	}
	r := <-woke
	if in := intentAnswer(t, r); in.Version <= pending.Intent.Version {
		t.Fatalf("long-poll woke with %s", r.body)
	}
	problemOf(t, decide("approve", "alice", fp), http.StatusConflict, string(fsm.StatusAlreadyApproved))
	// A different payload under the key is refused, approved or not.
	other := claim
	other.Payload = json.RawMessage(`{"order":"ord_1","amount":999}`)
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", other), http.StatusUnprocessableEntity, string(fsm.StatusDivergent))
	a2 := answer(t, decide("approve", "bob", ""), http.StatusOK)
	if a2.Intent.State != "approved" {
		t.Fatalf("after 2 of 2 approvals: %+v", a2.Intent)
	}

	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", claim), http.StatusCreated)
	if g.Status != "granted" || g.ExecutionToken == "" {
		t.Fatalf("claim after approval = %+v", g)
	}
	again := answer(t, e.do(t, http.MethodPost, "/v1/intents", claim), http.StatusOK)
	if again.ExecutionToken != g.ExecutionToken {
		t.Fatalf("the same grant answered twice carries two tokens:\n%s\n%s", g.ExecutionToken, again.ExecutionToken)
	}

	// The tool side.
	verify := func(body any) reply { return e.do(t, http.MethodPost, "/v1/tokens/verify", body) }
	problemOf(t, verify(map[string]any{"execution_token": g.ExecutionToken, "payload": other.Payload}),
		http.StatusUnprocessableEntity, string(fsm.StatusTokenMismatch))
	forged := g.ExecutionToken[:len(g.ExecutionToken)-4] + "AAAA"
	problemOf(t, verify(map[string]any{"execution_token": forged}), http.StatusUnprocessableEntity, CodeTokenInvalid)
	problemOf(t, verify(map[string]any{"execution_token": "gex_garbage"}), http.StatusUnprocessableEntity, CodeTokenInvalid)
	problemOf(t, verify(map[string]any{"execution_token": ""}), http.StatusBadRequest, CodeBadRequest)
	ok := verify(map[string]any{"execution_token": g.ExecutionToken, "payload": claim.Payload})
	if ok.status != http.StatusOK || !strings.Contains(string(ok.body), `"valid":true`) {
		t.Fatalf("first verify = %s", ok)
	}
	problemOf(t, verify(map[string]any{"execution_token": g.ExecutionToken, "payload": claim.Payload}), http.StatusConflict, string(fsm.StatusTokenUsed))

	answer(t, e.do(t, http.MethodPost, keyPath(key, "complete"), map[string]any{
		"owner": "agent-1", "fencing_token": g.FencingToken, "outcome": "executed", "result": map[string]string{"refund": "re_1"}}), http.StatusOK)

	// Blocked tools are refused and audited; nothing is created.
	blocked := newClaim("deploy:prod", "agent-1")
	blocked.Tool = "deploy.prod"
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", blocked), http.StatusForbidden, string(fsm.StatusBlocked))
	problemOf(t, e.do(t, http.MethodGet, keyPath("deploy:prod"), nil), http.StatusNotFound, string(fsm.StatusNotFound))

	// An expired token: 410, audited.
	k2 := newClaim("refund:ord_2", "agent-1")
	answer(t, e.do(t, http.MethodPost, "/v1/intents", k2), http.StatusAccepted)
	answer(t, e.do(t, http.MethodPost, keyPath("refund:ord_2", "approve"), map[string]string{"actor": "alice"}), http.StatusOK)
	answer(t, e.do(t, http.MethodPost, keyPath("refund:ord_2", "approve"), map[string]string{"actor": "carol"}), http.StatusOK)
	g2 := answer(t, e.do(t, http.MethodPost, "/v1/intents", map[string]any{
		"key": k2.Key, "tool": k2.Tool, "payload": k2.Payload, "owner": k2.Owner, "lease_ms": 3_600_000}), http.StatusCreated)
	e.mem.Advance(2 * time.Minute)
	problemOf(t, verify(map[string]any{"execution_token": g2.ExecutionToken}), http.StatusGone, string(fsm.StatusTokenExpired))

	// The audit log holds every attempt, and its chain verifies.
	events := verifyAuditChain(t, e, "")
	ops := map[string]int{}
	for _, ev := range events {
		ops[ev.Op+"/"+string(ev.Status)]++
	}
	for _, want := range []string{"claim/pending_approval", "approve/divergent", "approve/not_an_approver", "approve/ok",
		"approve/already_approved", "claim/divergent", "claim/granted", "token.use/token_mismatch", "token.use/ok",
		"token.use/token_used", "complete/ok", "claim/blocked", "token.use/token_expired"} {
		if ops[want] == 0 {
			t.Errorf("the audit log has no %s event (has %v)", want, ops)
		}
	}
	// The export streams the same chain as JSON lines.
	exp := e.do(t, http.MethodGet, "/v1/audit?format=jsonl", nil)
	if lines := strings.Count(string(exp.body), "\n"); exp.status != http.StatusOK || lines != len(events)+1 {
		t.Fatalf("export: %d lines for %d events: %s", lines, len(events), exp)
	}
}

type listWire struct {
	Intents []wireIntent `json:"intents"`
}

// verifyAuditChain pages through a namespace's audit log over HTTP and
// checks it like an external verifier would; it returns the events.
func verifyAuditChain(t *testing.T, e *testEnv, namespace string, header ...string) []fsm.ChainBody {
	t.Helper()
	var out []fsm.ChainBody
	var prev string
	since, first := uint64(0), true
	for {
		path := fmt.Sprintf("/v1/audit?since=%d&limit=5", since)
		if namespace != "" {
			path += "&namespace=" + namespace
		}
		r := e.do(t, http.MethodGet, path, nil, header...)
		var page struct {
			Head   fsm.ChainHead     `json:"head"`
			Events []*fsm.ChainEvent `json:"events"`
			Next   uint64            `json:"next"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("GET %s = %s", path, r)
		}
		if first {
			prev, first = page.Head.Anchor, false
		}
		for _, ev := range page.Events {
			sum := sha256.Sum256(ev.Body)
			var b fsm.ChainBody
			if err := json.Unmarshal(ev.Body, &b); err != nil || b.Prev != prev || hex.EncodeToString(sum[:]) != ev.Hash {
				t.Fatalf("chain breaks at seq %d: %s", ev.Seq, ev.Body)
			}
			prev = ev.Hash
			out = append(out, b)
		}
		if page.Next == 0 {
			return out
		}
		since = page.Next
	}
}

func TestWaitTimesOutWithTheIntentAsItIs(t *testing.T) {
	e := newEnv(t)
	g := e.claimOK(t, "k", "o")
	start := time.Now()
	in := intentAnswer(t, e.do(t, http.MethodGet, fmt.Sprintf("%s?wait=200ms&after_version=%d", keyPath("k"), g.Intent.Version), nil))
	if in.Version != g.Intent.Version || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("wait answered %+v after %v", in, time.Since(start))
	}
	problemOf(t, e.do(t, http.MethodGet, keyPath("absent")+"?wait=50ms", nil), http.StatusNotFound, string(fsm.StatusNotFound))
	for _, bad := range []string{"?wait=forever", "?wait=2m", "?wait=-1s", "?wait=1s&after_version=x"} {
		problemOf(t, e.do(t, http.MethodGet, keyPath("k")+bad, nil), http.StatusBadRequest, CodeBadRequest)
	}
	// A change wakes every waiter.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := intentAnswer(t, e.do(t, http.MethodGet, fmt.Sprintf("%s?wait=30s&after_version=%d", keyPath("k"), g.Intent.Version), nil))
			if in.State != "executed" {
				t.Errorf("woke with %s", in.State)
			}
		}()
	}
	answer(t, e.do(t, http.MethodPost, keyPath("k", "complete"), map[string]any{"owner": "o", "fencing_token": g.FencingToken, "outcome": "executed"}), http.StatusOK)
	wg.Wait()
}

// authEnv is a node with API keys: agents in two namespaces, an
// approver, a tool and an admin.
func authEnv(t *testing.T) (*testEnv, map[string]string) {
	t.Helper()
	keys := map[string]string{}
	var cfg strings.Builder
	cfg.WriteString(`{"keys":[`)
	for i, k := range []struct{ name, ns, roles string }{
		{"agent-a", "alpha", `["agent"]`}, {"agent-b", "beta", `["agent"]`}, {"approver-a", "alpha", `["approver"]`},
		{"approver-a2", "alpha", `["approver"]`}, {"tool-a", "alpha", `["tool"]`}, {"admin", "alpha", `["admin"]`},
	} {
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[k.name] = plain
		if i > 0 {
			cfg.WriteString(",")
		}
		fmt.Fprintf(&cfg, `{"name":%q,"namespace":%q,"roles":%s,"sha256":%q}`, k.name, k.ns, k.roles, sum)
	}
	cfg.WriteString(`]}`)
	ks, err := auth.Parse([]byte(cfg.String()))
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(c *Config) { c.Auth = ks }), keys
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

func TestAuthRolesAndNamespaces(t *testing.T) {
	e, keys := authEnv(t)
	claim := newClaim("k", "o")

	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claim), http.StatusUnauthorized, auth.CodeUnauthenticated)
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claim, bearer("ik_wrong")...), http.StatusUnauthorized, auth.CodeUnauthenticated)
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claim, bearer(keys["tool-a"])...), http.StatusForbidden, auth.CodeForbidden)
	problemOf(t, e.do(t, http.MethodPut, "/v1/policies/p", `{"tools":["x"]}`, bearer(keys["agent-a"])...), http.StatusForbidden, auth.CodeForbidden)
	if n := proposed(e.mem); n != 0 {
		t.Fatalf("refused requests proposed %d commands", n)
	}
	// Public endpoints need no key.
	for _, p := range []string{"/healthz", "/v1/keys", "/metrics"} {
		if r := e.do(t, http.MethodGet, p, nil); r.status != http.StatusOK {
			t.Fatalf("GET %s = %s", p, r)
		}
	}

	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", claim, bearer(keys["agent-a"])...), http.StatusCreated)
	if g.Intent.Namespace != "alpha" {
		t.Fatalf("namespace = %q, want the key's", g.Intent.Namespace)
	}
	// The same key in another namespace is another intent; alpha's is
	// invisible from beta.
	problemOf(t, e.do(t, http.MethodGet, keyPath("k"), nil, bearer(keys["agent-b"])...), http.StatusNotFound, string(fsm.StatusNotFound))
	gb := answer(t, e.do(t, http.MethodPost, "/v1/intents", claim, bearer(keys["agent-b"])...), http.StatusCreated)
	if gb.Intent.Namespace != "beta" || gb.FencingToken == g.FencingToken {
		t.Fatalf("beta's claim = %+v", gb.Intent)
	}
	var page listWire
	_ = json.Unmarshal(e.do(t, http.MethodGet, "/v1/intents", nil, bearer(keys["agent-b"])...).body, &page)
	if len(page.Intents) != 1 || page.Intents[0].Namespace != "beta" {
		t.Fatalf("beta lists %+v", page.Intents)
	}

	// A tool of alpha cannot spend beta's token.
	problemOf(t, e.do(t, http.MethodPost, "/v1/tokens/verify", map[string]string{"execution_token": gb.ExecutionToken}, bearer(keys["tool-a"])...),
		http.StatusUnprocessableEntity, CodeTokenInvalid)
	answer(t, e.do(t, http.MethodPost, "/v1/tokens/verify", map[string]string{"execution_token": g.ExecutionToken}, bearer(keys["tool-a"])...), http.StatusOK)

	// The actor is the key's name, whatever the body says: an approver
	// cannot approve twice by changing the actor field.
	admin := bearer(keys["admin"])
	answer(t, e.do(t, http.MethodPut, "/v1/policies/gate", `{"tools":["gated.*"],"require_approval":true,"approvals_required":2}`, admin...), http.StatusOK)
	gc := newClaim("g", "o")
	gc.Tool = "gated.tool"
	answer(t, e.do(t, http.MethodPost, "/v1/intents", gc, bearer(keys["agent-a"])...), http.StatusAccepted)
	a := answer(t, e.do(t, http.MethodPost, keyPath("g", "approve"), map[string]string{"actor": "someone-else"}, bearer(keys["approver-a"])...), http.StatusOK)
	if len(a.Intent.Approvals) != 1 || a.Intent.Approvals[0].Actor != "approver-a" {
		t.Fatalf("approvals = %+v, want the key's name", a.Intent.Approvals)
	}
	problemOf(t, e.do(t, http.MethodPost, keyPath("g", "approve"), map[string]string{"actor": "third"}, bearer(keys["approver-a"])...),
		http.StatusConflict, string(fsm.StatusAlreadyApproved))
	a = answer(t, e.do(t, http.MethodPost, keyPath("g", "approve"), map[string]string{}, bearer(keys["approver-a2"])...), http.StatusOK)
	if a.Intent.State != "approved" {
		t.Fatalf("after two approvers: %s", a.Intent.State)
	}

	// Audit logs: each namespace reads its own; only an admin reads
	// another's.
	problemOf(t, e.do(t, http.MethodGet, "/v1/audit?namespace=beta", nil, bearer(keys["agent-a"])...), http.StatusForbidden, CodeForbidden)
	if evs := verifyAuditChain(t, e, "beta", admin...); len(evs) != 1 {
		t.Fatalf("beta's audit log holds %d events, want its one claim", len(evs))
	}
	if evs := verifyAuditChain(t, e, fsm.SystemNamespace, admin...); len(evs) == 0 {
		t.Fatal("the system audit log does not show the policy change")
	}
}

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
