package fsm_test

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

// The scaffolding the tests of answers from the state (LocalRefusal,
// LocalDivergent, LocalDuplicate) and of the notes that record them
// (NoteRefusals, NoteDivergent, NoteDuplicates) share.

// declineCase is a claim an answer from the state must leave to the log,
// asked at the harness's time or, with now, at now(h).
type declineCase struct {
	name  string
	claim func() *fsm.Claim
	now   func(h *harness) int64
}

// checkDeclines puts key k in state s and checks that answer (a Local
// method of the machine) declines each case's claim.
func checkDeclines(t *testing.T, s fsm.State, cases []declineCase, answer func(l *fsm.Machine, c *fsm.Claim, now int64) (*fsm.Result, bool)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.run(toState(s))
			now := h.at
			if tc.now != nil {
				now = tc.now(h)
			}
			if r, ok := answer(h.l, tc.claim(), now); ok {
				t.Fatalf("answered from the state: %+v", r)
			}
		})
	}
}

// localHistory is the random history the properties of answers from the
// state drive a harness with: claims, reports, renewals, expiries,
// resolutions and purges of keys by owners with payloads, and with
// approvals claims that wait for one, approved or rejected.
type localHistory struct {
	keys, owners, payloads []string
	// outcomes are what a report may say; a single one is not drawn.
	outcomes  []fsm.Outcome
	approvals bool
}

// step moves the clock and applies one command of the history.
func (hs localHistory) step(rt *rapid.T, h *harness) {
	key := rapid.SampledFrom(hs.keys).Draw(rt, "key")
	h.advance(rapid.SampledFrom([]int64{0, ms(10), ms(leaseMS) / 2, ms(leaseMS) + 1, ms(dedupeMS)}).Draw(rt, "advance"))
	ops := 6
	if hs.approvals {
		ops = 8
	}
	switch rapid.IntRange(0, ops).Draw(rt, "op") {
	case 0, 1:
		h.apply(claim(key, rapid.SampledFrom(hs.owners).Draw(rt, "owner"), rapid.SampledFrom(hs.payloads).Draw(rt, "payload")))
	case 2:
		if in := h.get(key); in != nil {
			outcome := hs.outcomes[0]
			if len(hs.outcomes) > 1 {
				outcome = rapid.SampledFrom(hs.outcomes).Draw(rt, "outcome")
			}
			h.apply(complete(key, in.Owner, in.FencingToken, outcome, resultOK))
		}
	case 3:
		if in := h.get(key); in != nil {
			h.apply(renew(key, in.Owner, in.FencingToken, leaseMS))
		}
	case 4:
		h.apply(expire(key))
	case 5:
		h.apply(resolve(key, fsm.OutcomeFailed, resultNo))
	case 6:
		h.apply(purge(key))
	case 7:
		h.apply(claimApproval(key, rapid.SampledFrom(hs.owners).Draw(rt, "owner"), rapid.SampledFrom(hs.payloads).Draw(rt, "payload")))
	case 8:
		if rapid.Bool().Draw(rt, "approve") {
			h.apply(approve(key))
		} else {
			h.apply(reject(key))
		}
	}
}

// probe draws the claim to ask the state about, and when: now or up to a
// lease later.
func (hs localHistory) probe(rt *rapid.T, h *harness) (*fsm.Claim, int64) {
	c := claim(rapid.SampledFrom(hs.keys).Draw(rt, "probe key"), rapid.SampledFrom(hs.owners).Draw(rt, "probe owner"),
		rapid.SampledFrom(hs.payloads).Draw(rt, "probe payload"))
	return c, h.at + rapid.SampledFrom([]int64{0, ms(leaseMS) / 2, ms(leaseMS)}).Draw(rt, "probe later")
}

// applyToCopy is the answer to cmd proposed at now, applied to a copy of
// h's machine at the next index (h is unchanged).
func applyToCopy(rt *rapid.T, h *harness, cmd fsm.Command, now int64) (*fsm.Result, *fsm.Machine) {
	data, err := fsm.Encode(now, cmd)
	if err != nil {
		rt.Fatal(err)
	}
	l := h.l.Clone()
	return l.Apply(h.idx+1, data), l
}

// sameAsLogged checks that local, what the state answered, is logged, the
// log's answer to the same claim at the same time: status, detail, and
// the intent's fields but for its version and trail; and that the apply
// the local answer stands for recorded no state change.
func sameAsLogged(rt *rapid.T, what string, local, logged *fsm.Result) {
	if logged.Status != local.Status || logged.Detail != local.Detail {
		rt.Fatalf("answered %s (%s) from the state; the log answers %s (%s)", local.Status, local.Detail, logged.Status, logged.Detail)
	}
	if a, b := comparableIntent(local.Intent), comparableIntent(logged.Intent); a != b {
		rt.Fatalf("the state's intent\n%s\nthe log's\n%s", a, b)
	}
	if ev := logged.Intent.Audit[len(logged.Intent.Audit)-1]; ev.ChangesState() {
		rt.Fatalf("the apply %s stands for recorded a state change: %+v", what, ev)
	}
}

// comparableIntent returns in's fields but for its version and trail, the
// ones a note writes otherwise than the claim it stands for.
func comparableIntent(in *fsm.Intent) string {
	a := *in
	a.Version, a.Audit, a.AuditDropped = 0, nil, 0
	return fmt.Sprintf("%+v", a)
}

// mustRefuseMalformed applies cmd, a malformed note, with key k in state
// s: it is refused malformed and changes neither the intent nor the
// namespace's log.
func mustRefuseMalformed(t *testing.T, s fsm.State, cmd fsm.Command) {
	t.Helper()
	h := newHarness(t)
	h.run(toState(s))
	before := fmt.Sprintf("%+v", *h.get("k"))
	seq := h.l.AuditHead(ns).LastSeq
	if r := h.apply(cmd); r.Status != fsm.StatusMalformed {
		t.Fatalf("%s (%s)", r.Status, r.Detail)
	}
	if after := fmt.Sprintf("%+v", *h.get("k")); after != before {
		t.Errorf("the intent changed\n%s\nwas\n%s", after, before)
	}
	eq(t, "namespace log", h.l.AuditHead(ns).LastSeq, seq)
}

// mustNoteTheNamespaceOnly applies note, whose record moved on (or is
// gone), to h: it is recorded on no intent, leaves key's (if any) as it
// was, and goes to the namespace's log alone.
func mustNoteTheNamespaceOnly(t *testing.T, h *harness, key string, note fsm.Command) {
	t.Helper()
	var before string
	if in := h.get(key); in != nil {
		before = fmt.Sprintf("%+v", *in)
	}
	seq := h.l.AuditHead(ns).LastSeq
	eq(t, "recorded", h.must(note, fsm.StatusOK).Count, 0)
	var after string
	if in := h.get(key); in != nil {
		after = fmt.Sprintf("%+v", *in)
	}
	if after != before {
		t.Errorf("the intent changed\n%s\nwas\n%s", after, before)
	}
	eq(t, "namespace log", h.l.AuditHead(ns).LastSeq, seq+1)
}
