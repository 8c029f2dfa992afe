package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// TestGateWalkthrough is the walk-through of docs/gate.md end to end: policy →
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
	// audited attempt is one), made once it waits.
	woke := make(chan reply, 1)
	go func() {
		woke <- e.do(t, http.MethodGet, fmt.Sprintf("%s?wait=30s&after_version=%d", keyPath(key), pending.Intent.Version), nil)
	}()
	ledgertest.AwaitWaiting(t, e.api.svc, 1)

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
