package fsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

func putPolicy(p fsm.Policy) *fsm.PutPolicy { return &fsm.PutPolicy{Policy: p, Actor: "admin"} }

func approveBy(key, actor, fp string) *fsm.Approve {
	return &fsm.Approve{Namespace: ns, Key: key, Actor: actor, Reason: "ok", Fingerprint: fp}
}

func TestPolicyValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    fsm.Policy
		ok   bool
	}{
		{"default without tools", fsm.Policy{Name: "default", DedupeWindowMS: 3_600_000}, true},
		{"named with a pattern", fsm.Policy{Name: "payments", Tools: []string{"payments.*"}, RequireApproval: true, ApprovalsRequired: 2, Approvers: []string{"a", "b"}}, true},
		{"bad name", fsm.Policy{Name: "Pay ments", Tools: []string{"x"}}, false},
		{"empty name", fsm.Policy{Tools: []string{"x"}}, false},
		{"default with tools", fsm.Policy{Name: "default", Tools: []string{"x"}}, false},
		{"named without tools", fsm.Policy{Name: "p"}, false},
		{"malformed pattern", fsm.Policy{Name: "p", Tools: []string{"pay[ments"}}, false},
		{"empty pattern", fsm.Policy{Name: "p", Tools: []string{""}}, false},
		{"lease too short", fsm.Policy{Name: "p", Tools: []string{"x"}, LeaseMS: 5}, false},
		{"token ttl too long", fsm.Policy{Name: "p", Tools: []string{"x"}, TokenTTLMS: 48 * 3_600_000}, false},
		{"negative payload cap", fsm.Policy{Name: "p", Tools: []string{"x"}, MaxPayloadBytes: -1}, false},
		{"approvals without approval", fsm.Policy{Name: "p", Tools: []string{"x"}, ApprovalsRequired: 2}, false},
		{"more approvals than approvers", fsm.Policy{Name: "p", Tools: []string{"x"}, RequireApproval: true, ApprovalsRequired: 3, Approvers: []string{"a", "b"}}, false},
		{"approver twice", fsm.Policy{Name: "p", Tools: []string{"x"}, RequireApproval: true, Approvers: []string{"a", "a"}}, false},
		{"priority out of range", fsm.Policy{Name: "p", Tools: []string{"x"}, Priority: 5000}, false},
		{"self-approval allowed", fsm.Policy{Name: "p", Tools: []string{"x"}, RequireApproval: true, AllowSelfApproval: true}, true},
		{"self-approval without approval", fsm.Policy{Name: "p", Tools: []string{"x"}, AllowSelfApproval: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%t", err, tc.ok)
			}
			if err != nil && !errors.Is(err, fsm.ErrBadPolicy) {
				t.Fatalf("error %v does not wrap ErrBadPolicy", err)
			}
			// The state machine refuses what Validate refuses, and stores
			// nothing.
			h := newHarness(t)
			r := h.apply(putPolicy(tc.p))
			if tc.ok != (r.Status == fsm.StatusOK) {
				t.Fatalf("PutPolicy: %s %s", r.Status, r.Detail)
			}
			if !tc.ok && tc.p.Name != "default" && h.l.Policy(tc.p.Name) != nil {
				t.Fatal("a refused policy was stored")
			}
		})
	}
}

func TestPolicyLifecycle(t *testing.T) {
	h := newHarness(t)
	if p := h.l.Policy("default"); p == nil || p.Version != 0 {
		t.Fatalf("the default policy must exist from the start: %+v", p)
	}
	r := h.must(putPolicy(fsm.Policy{Name: "payments", Tools: []string{"payments.*"}}), fsm.StatusOK)
	eq(t, "version", r.Policy.Version, uint64(1))
	h.must(&fsm.PutPolicy{Policy: fsm.Policy{Name: "payments", Tools: []string{"payments.*"}, Blocked: true}, ExpectVersion: 7}, fsm.StatusVersionMismatch)
	r = h.must(&fsm.PutPolicy{Policy: fsm.Policy{Name: "payments", Tools: []string{"payments.*"}, LeaseMS: 5000}, ExpectVersion: 1}, fsm.StatusOK)
	eq(t, "version after CAS", r.Policy.Version, uint64(3))
	eq(t, "stored lease", h.l.Policy("payments").LeaseMS, int64(5000))
	h.must(&fsm.DeletePolicy{Name: "default"}, fsm.StatusMalformed)
	h.must(&fsm.DeletePolicy{Name: "nope"}, fsm.StatusUnknownPolicy)
	h.must(&fsm.DeletePolicy{Name: "payments"}, fsm.StatusOK)
	if h.l.Policy("payments") != nil {
		t.Fatal("deleted policy still there")
	}
	// Every accepted change is on the system audit log.
	page, _ := h.l.AuditEvents(fsm.SystemNamespace, 0, 100)
	var ops []string
	for _, e := range page {
		var b fsm.ChainBody
		if err := json.Unmarshal(e.Body, &b); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, b.Op)
	}
	eq(t, "system audit ops", strings.Join(ops, ","), "policy.put,policy.put,policy.delete")
}

func TestClaimUnderPolicies(t *testing.T) {
	setup := func(t *testing.T) *harness {
		h := newHarness(t)
		h.must(putPolicy(fsm.Policy{Name: "default", DedupeWindowMS: 3_600_000, TokenTTLMS: 60_000}), fsm.StatusOK)
		h.must(putPolicy(fsm.Policy{Name: "payments", Tools: []string{"payments.*"}, LeaseMS: 7000, TokenTTLMS: 120_000, MaxPayloadBytes: 40}), fsm.StatusOK)
		h.must(putPolicy(fsm.Policy{Name: "charges", Tools: []string{"payments.charge"}, Priority: 10, RequireApproval: true, ApprovalsRequired: 2, Approvers: []string{"alice", "bob", "carol"}}), fsm.StatusOK)
		h.must(putPolicy(fsm.Policy{Name: "deploys", Tools: []string{"deploy.*"}, Blocked: true}), fsm.StatusOK)
		return h
	}
	withTool := func(c *fsm.Claim, tl string) *fsm.Claim {
		canonical, fp, err := fsm.Fingerprint(tl, []byte(payloadA))
		if err != nil {
			t.Fatal(err)
		}
		c.Tool, c.Payload, c.Fingerprint = tl, canonical, fp
		return c
	}

	t.Run("the higher priority pattern wins and approval is N of M", func(t *testing.T) {
		h := setup(t)
		c := claim("k", "A", payloadA) // tool payments.charge
		r := h.must(c, fsm.StatusPendingApproval)
		eq(t, "policy", r.Intent.Policy, "charges")
		eq(t, "policy version", r.Intent.PolicyVersion, uint64(3))
		eq(t, "approvals required", r.Intent.ApprovalsRequired, 2)
		h.must(approveBy("k", "mallory", ""), fsm.StatusNotAnApprover)
		h.must(approveBy("k", "alice", mustFP(payloadB)), fsm.StatusDivergent)
		r = h.must(approveBy("k", "alice", c.Fingerprint), fsm.StatusOK)
		eq(t, "still pending after 1 of 2", r.Intent.State, fsm.StatePendingApproval)
		h.must(approveBy("k", "alice", ""), fsm.StatusAlreadyApproved)
		h.must(claim("k", "A", payloadA), fsm.StatusPendingApproval)
		r = h.must(approveBy("k", "bob", ""), fsm.StatusOK)
		eq(t, "approved after 2 of 2", r.Intent.State, fsm.StateApproved)
		h.must(claim("k", "A", payloadB), fsm.StatusDivergent) // approving X never lets Y run
		r = h.must(claim("k", "A", payloadA), fsm.StatusGranted)
		eq(t, "token ttl falls back to the default policy", r.Intent.TokenTTLMS, int64(60_000))
		h.must(approveBy("k", "carol", ""), fsm.StatusNotPending)
	})
	t.Run("reject is single and bound to the fingerprint", func(t *testing.T) {
		h := setup(t)
		h.must(claim("k", "A", payloadA), fsm.StatusPendingApproval)
		h.must(&fsm.Reject{Namespace: ns, Key: "k", Actor: "bob", Fingerprint: mustFP(payloadB)}, fsm.StatusDivergent)
		h.must(&fsm.Reject{Namespace: ns, Key: "k", Actor: "mallory"}, fsm.StatusNotAnApprover)
		h.must(&fsm.Reject{Namespace: ns, Key: "k", Actor: "bob", Reason: "no"}, fsm.StatusOK)
		h.must(&fsm.Reject{Namespace: ns, Key: "k", Actor: "bob", Reason: "no"}, fsm.StatusOK) // a retry
		h.must(claim("k", "A", payloadA), fsm.StatusRejected)
	})
	t.Run("pattern policy sets lease, token ttl and payload cap", func(t *testing.T) {
		h := setup(t)
		r := h.must(withTool(&fsm.Claim{Namespace: ns, Key: "r", Owner: "A", DedupeWindowMS: dedupeMS}, "payments.refund"), fsm.StatusGranted)
		eq(t, "policy", r.Intent.Policy, "payments")
		eq(t, "lease from the policy", r.Intent.LeaseMS, int64(7000))
		eq(t, "token ttl", r.Intent.TokenTTLMS, int64(120_000))
		eq(t, "dedupe from the default policy", r.Intent.DedupeWindowMS, int64(3_600_000))
		eq(t, "granted at", r.Intent.GrantedAt, t0)
		big := withTool(&fsm.Claim{Namespace: ns, Key: "big", Owner: "A", LeaseMS: 1000}, "payments.refund")
		big.Payload = json.RawMessage(`{"memo":"` + strings.Repeat("x", 64) + `"}`)
		h.must(big, fsm.StatusTooLarge)
		if h.l.Get(ns, "big") != nil {
			t.Fatal("a too-large claim created a record")
		}
	})
	t.Run("named and unknown policies", func(t *testing.T) {
		h := setup(t)
		c := withTool(&fsm.Claim{Namespace: ns, Key: "n", Owner: "A", LeaseMS: 1000, Policy: "payments"}, "other.tool")
		eq(t, "named policy", h.must(c, fsm.StatusGranted).Intent.Policy, "payments")
		c = withTool(&fsm.Claim{Namespace: ns, Key: "u", Owner: "A", LeaseMS: 1000, Policy: "nope"}, "other.tool")
		h.must(c, fsm.StatusUnknownPolicy)
		if h.l.Get(ns, "u") != nil {
			t.Fatal("a claim under an unknown policy created a record")
		}
		c = withTool(&fsm.Claim{Namespace: ns, Key: "d", Owner: "A", LeaseMS: 1000}, "other.tool")
		eq(t, "fallback", h.must(c, fsm.StatusGranted).Intent.Policy, "default")
	})
	t.Run("blocked tools are refused and audited", func(t *testing.T) {
		h := setup(t)
		before := h.l.AuditHead(ns).LastSeq
		h.must(withTool(&fsm.Claim{Namespace: ns, Key: "dep", Owner: "A", LeaseMS: 1000}, "deploy.prod"), fsm.StatusBlocked)
		if h.l.Get(ns, "dep") != nil {
			t.Fatal("a blocked claim created a record")
		}
		head := h.l.AuditHead(ns)
		eq(t, "audit events added", head.LastSeq-before, uint64(1))
		page, _ := h.l.AuditEvents(ns, head.LastSeq, 1)
		if len(page) != 1 || !bytes.Contains(page[0].Body, []byte(`"status":"blocked"`)) {
			t.Fatalf("blocked attempt not on the audit log: %s", page[0].Body)
		}
	})
}
