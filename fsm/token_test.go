package fsm_test

import (
	"testing"

	"github.com/intentledger/intentd/fsm"
)

func TestUseToken(t *testing.T) {
	grant := func(t *testing.T) (*harness, *fsm.Intent) {
		h := newHarness(t)
		r := h.must(claim("k", "A", payloadA), fsm.StatusGranted)
		return h, r.Intent
	}
	use := func(in *fsm.Intent, presented string, exp int64) *fsm.UseToken {
		return &fsm.UseToken{Namespace: ns, Key: "k", Owner: in.Owner, FencingToken: in.FencingToken,
			Fingerprint: in.Fingerprint, Presented: presented, Expires: exp, Actor: "tool"}
	}
	exp := t0/1e9 + 60
	t.Run("single use", func(t *testing.T) {
		h, in := grant(t)
		r := h.must(use(in, in.Fingerprint, exp), fsm.StatusOK)
		eq(t, "token used", r.Intent.TokenUsed, in.FencingToken)
		r = h.must(use(in, in.Fingerprint, exp), fsm.StatusTokenUsed)
		eq(t, "refusal audited", lastEvent(t, r.Intent).Status, fsm.StatusTokenUsed)
	})
	t.Run("payload mismatch", func(t *testing.T) {
		h, in := grant(t)
		h.must(use(in, mustFP(payloadB), exp), fsm.StatusTokenMismatch)
		h.must(use(in, "", exp), fsm.StatusOK) // not refused for good: the right payload still may use it
	})
	t.Run("token of another fingerprint", func(t *testing.T) {
		h, in := grant(t)
		c := use(in, "", exp)
		c.Fingerprint = mustFP(payloadB)
		h.must(c, fsm.StatusTokenMismatch)
	})
	t.Run("expired", func(t *testing.T) {
		h, in := grant(t)
		h.advance(ms(61_000))
		h.must(use(in, "", exp), fsm.StatusTokenExpired)
	})
	t.Run("stale grant", func(t *testing.T) {
		h, in := grant(t)
		h.must(complete("k", "A", in.FencingToken, fsm.OutcomeFailed, resultNo), fsm.StatusOK)
		h.must(claim("k", "B", payloadA), fsm.StatusGranted)
		h.must(use(in, "", exp), fsm.StatusFenced)
	})
	t.Run("lease passed", func(t *testing.T) {
		h, in := grant(t)
		h.advance(ms(leaseMS + 1))
		h.must(use(in, "", exp), fsm.StatusInDoubt)
	})
	t.Run("finished intent", func(t *testing.T) {
		h, in := grant(t)
		h.must(complete("k", "A", in.FencingToken, fsm.OutcomeExecuted, resultOK), fsm.StatusOK)
		h.must(use(in, "", exp), fsm.StatusInvalidState)
	})
	t.Run("absent", func(t *testing.T) {
		h, in := grant(t)
		c := use(in, "", exp)
		c.Key = "other"
		h.must(c, fsm.StatusNotFound)
	})
}
