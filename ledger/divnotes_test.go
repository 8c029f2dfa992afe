package ledger_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// sameIntent checks that a and b are the same intent but for the version
// and trail, which a note writes later and otherwise than a claim.
func sameIntent(t *testing.T, what string, a, b *fsm.Intent) {
	t.Helper()
	x, y := *a, *b
	x.Version, x.Audit, x.AuditDropped = 0, nil, 0
	y.Version, y.Audit, y.AuditDropped = 0, nil, 0
	if fmt.Sprintf("%+v", x) != fmt.Sprintf("%+v", y) {
		t.Fatalf("%s\n%+v\nwant\n%+v", what, x, y)
	}
}

// TestDivergentStormCostsOneEntry: the first divergent claim on a held key
// goes through the log; the next hundred (ten other payloads, a hundred
// owners) are answered from the leader's state, each exactly as the log
// would answer it after the ones before (Divergent counting them all), and
// one NoteDivergent entry records them: the counter ends at 1+100 and the
// grant stays in the trail.
func TestDivergentStormCostsOneEntry(t *testing.T) {
	m := ledgertest.NewMemory(start)
	s := refusalSetup(t, m, m)
	mustClaim(t, s, claimReq(key, owner, `{"a":1}`), fsm.StatusGranted)
	first := mustClaim(t, s, claimReq(key, "first", `{"a":2}`), fsm.StatusDivergent)
	eq(t, "first local", first.Local, false)
	eq(t, "first counted", first.Intent.Divergent, uint64(1))
	proposed := m.Proposed()
	// The log's answers to the same claims, applied in order.
	shadow := m.Ledger()

	const storm = 100
	for i := range storm {
		req := claimReq(key, fmt.Sprintf("retrier-%d", i), fmt.Sprintf(`{"a":%d}`, 2+i%10))
		applied := applyClaim(t, s, m, shadow, req)
		r := mustClaim(t, s, req, fsm.StatusDivergent)
		eq(t, "local", r.Local, true)
		if r.Status != applied.Status || r.Detail != applied.Detail || r.Fingerprint != applied.Fingerprint || r.Created != applied.Created {
			t.Fatalf("claim %d: answered %+v, the log answers %+v", i, r, applied)
		}
		eq(t, "divergent", r.Intent.Divergent, uint64(2+i))
		sameIntent(t, fmt.Sprintf("claim %d: the state's intent", i), r.Intent, applied.Intent)
		eq(t, "version", r.Intent.Version, first.Intent.Version)
		if i%10 == 0 {
			m.Advance(time.Millisecond)
		}
	}
	eq(t, "entries during the storm", m.Proposed(), proposed)
	eq(t, "answered", s.RefusalStats().DivergentAnswered, uint64(storm))

	s.Close() // proposes what was counted
	eq(t, "entries after the storm", m.Proposed(), proposed+1)
	st := s.RefusalStats()
	if st.DivergentNoted != storm || st.DivergentLost != 0 || st.Entries != 1 {
		t.Fatalf("stats %+v", st)
	}
	in := m.Ledger().Get("default", key)
	eq(t, "divergent", in.Divergent, uint64(1+storm))
	sameIntent(t, "after the note", in, shadow.Get("default", key))
	eq(t, "grant still in the trail", in.Audit[0].Status, fsm.StatusGranted)
	ev := lastAudit(t, m, key)
	eq(t, "status", ev.Status, fsm.StatusDivergent)
	eq(t, "owner", ev.Owner, "retrier-0")
	if !strings.Contains(ev.Reason, fmt.Sprintf("%d divergent claims", storm)) || !strings.Contains(ev.Reason, "owners retrier-0, ") ||
		!strings.Contains(ev.Reason, "and 92 more") || !strings.Contains(ev.Reason, "and 2 more by owners") {
		t.Fatalf("reason %q", ev.Reason)
	}
}

// TestDivergentThatChangesSomethingGoesThroughTheLog: on a key whose
// divergent claims are answered from the state, the owner's repeat
// (granted again) and the first divergent claim after the lease passed
// (it expires the grant first) still go through the log, and divergent
// claims after each are answered from the state again; every one counts.
func TestDivergentThatChangesSomethingGoesThroughTheLog(t *testing.T) {
	m := ledgertest.NewMemory(start)
	s := refusalSetup(t, m, m)
	req := claimReq(key, owner, `{"a":1}`)
	req.Lease = time.Second
	mustClaim(t, s, req, fsm.StatusGranted)
	steps := []logStep{
		{"first divergent", 0, claimReq(key, "other", `{"a":2}`), fsm.StatusDivergent, false},
		{"divergent", 0, claimReq(key, "other", `{"a":3}`), fsm.StatusDivergent, true},
		{"owner's repeat", 0, req, fsm.StatusGranted, false},
		{"divergent after the repeat", 0, claimReq(key, "third", `{"a":2}`), fsm.StatusDivergent, true},
		{"lease passed: the divergent claim expires it", 2 * time.Second, claimReq(key, "other", `{"a":2}`), fsm.StatusDivergent, false},
		{"divergent on in_doubt", 0, claimReq(key, "other", `{"a":2}`), fsm.StatusDivergent, true},
		{"first in_doubt refusal", 0, claimReq(key, "other", `{"a":1}`), fsm.StatusInDoubt, false},
		{"divergent after it", 0, claimReq(key, "fourth", `{"a":4}`), fsm.StatusDivergent, true},
	}
	runSteps(t, s, m, steps)
	divergent := uint64(0)
	for _, st := range steps {
		if st.want == fsm.StatusDivergent {
			divergent++
		}
	}
	in := m.Ledger().Get("default", key)
	eq(t, "state", in.State, fsm.StateInDoubt)
	var expired bool
	for _, ev := range in.Audit {
		expired = expired || ev.Status == fsm.StatusExpired
	}
	eq(t, "expiry in the trail", expired, true)
	s.Close()
	eq(t, "divergent counted", m.Ledger().Get("default", key).Divergent, divergent)
}

// TestDivergentNoteOfAPurgedRecord: divergent claims answered against a
// record that was purged and claimed again before their note went in are
// recorded in the namespace's audit log only, never counted on the new
// record.
func TestDivergentNoteOfAPurgedRecord(t *testing.T) {
	m := ledgertest.NewMemory(start)
	s := refusalSetup(t, m, m)
	fence := executedKey(t, s, `{"a":1}`)
	mustClaim(t, s, claimReq(key, "other", `{"a":2}`), fsm.StatusDivergent)
	mustClaim(t, s, claimReq(key, "other", `{"a":2}`), fsm.StatusDivergent) // from the state
	m.Advance(s.Limits().DedupeWindow + time.Second)
	if r, err := m.Propose(t.Context(), &fsm.Purge{Keys: []fsm.Ref{{Namespace: "default", Key: key}}}); err != nil || r.Count != 1 {
		t.Fatalf("purge: %+v, %v", r, err)
	}
	m.Advance(time.Millisecond)
	again := mustClaim(t, s, claimReq(key, owner, `{"a":1}`), fsm.StatusGranted)
	if again.Intent.FencingToken == fence {
		t.Fatal("the key was not granted again")
	}
	head := m.Ledger().AuditHead("default").LastSeq
	s.Close()
	in := m.Ledger().Get("default", key)
	eq(t, "divergent on the new record", in.Divergent, uint64(0))
	eq(t, "namespace log", m.Ledger().AuditHead("default").LastSeq, head+1)
	eq(t, "noted", s.RefusalStats().DivergentNoted, uint64(1))
}
