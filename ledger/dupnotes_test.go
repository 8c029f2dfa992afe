package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// executedKey grants key to owner with payload and reports it executed.
func executedKey(t *testing.T, s *ledger.Service, payload string) uint64 {
	t.Helper()
	r := mustClaim(t, s, claimReq(key, owner, payload), fsm.StatusGranted)
	if _, err := s.Complete(context.Background(), ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: r.Intent.FencingToken,
		Outcome: fsm.OutcomeExecuted, Result: []byte(`{"id":"ch_1"}`)}); err != nil {
		t.Fatal(err)
	}
	return r.Intent.FencingToken
}

// sameAnswer checks that local, a duplicate answered from the leader's
// state, is applied's answer but for what the note adds later: the
// duplicate's count and audit event, the version and the log index.
func sameAnswer(t *testing.T, local, applied *fsm.Result) {
	t.Helper()
	if applied.Status != fsm.StatusDuplicate || local.Status != applied.Status || local.Detail != applied.Detail ||
		local.Fingerprint != applied.Fingerprint || local.Created != applied.Created || local.Attempt != applied.Attempt {
		t.Fatalf("local answer %+v, the state machine's %+v", local, applied)
	}
	eq(t, "index", local.Index+1, applied.Index)
	want := *applied.Intent
	want.Duplicates--
	want.Audit = want.Audit[:len(want.Audit)-1]
	want.Version = local.Intent.Version
	if !reflect.DeepEqual(local.Intent, &want) {
		t.Fatalf("local intent\n%+v\nthe state machine's, less the duplicate\n%+v", local.Intent, &want)
	}
	a, _ := json.Marshal(local.Intent)
	b, _ := json.Marshal(&want)
	if string(a) != string(b) {
		t.Fatalf("local intent %s, the state machine's %s", a, b)
	}
}

// TestDuplicateStormCostsOneEntry: the first duplicate of an executed key
// goes through the log; the next hundred are answered from the leader's
// state, each as the state machine would but for the count, and one
// NoteDuplicates entry records them all.
func TestDuplicateStormCostsOneEntry(t *testing.T) {
	m := ledgertest.NewMemory(start)
	s := refusalSetup(t, m, m)
	fence := executedKey(t, s, `{"amount":5}`)
	m.Advance(time.Second)

	first := mustClaim(t, s, claimReq(key, "first", `{"amount":5}`), fsm.StatusDuplicate)
	eq(t, "first local", first.Local, false)
	eq(t, "first counted", first.Intent.Duplicates, uint64(1))
	proposed := m.Proposed()

	const storm = 100
	for i := range storm {
		req := claimReq(key, fmt.Sprintf("retrier-%d", i), `{"amount":5}`)
		applied := applyClaim(t, s, m, m.Ledger(), req)
		r := mustClaim(t, s, req, fsm.StatusDuplicate)
		eq(t, "local", r.Local, true)
		eq(t, "fencing token", r.Intent.FencingToken, fence)
		eq(t, "result", string(r.Intent.Result), `{"id":"ch_1"}`)
		sameAnswer(t, r, applied)
		if i%10 == 0 {
			m.Advance(time.Millisecond)
		}
	}
	eq(t, "entries during the storm", m.Proposed(), proposed)
	eq(t, "answered", s.RefusalStats().DuplicatesAnswered, uint64(storm))

	s.Close() // proposes what was queued
	eq(t, "entries after the storm", m.Proposed(), proposed+1)
	st := s.RefusalStats()
	if st.DuplicatesNoted != storm || st.DuplicatesLost != 0 || st.Entries != 1 || st.Answered != 0 {
		t.Fatalf("stats %+v", st)
	}
	in := m.Ledger().Get("default", key)
	eq(t, "duplicates", in.Duplicates, uint64(1+storm))
	eq(t, "state", in.State, fsm.StateExecuted)
	ev := in.Audit[len(in.Audit)-1]
	if ev.Status != fsm.StatusDuplicate || ev.Owner != fmt.Sprintf("retrier-%d", storm-1) || !strings.Contains(ev.Reason, "answered by node n1") {
		t.Fatalf("last event %+v", ev)
	}
}

// TestDuplicatesThatAreNotGoThroughTheLog: a divergent claim (it counts)
// goes through the log and leaves the duplicates to the state; past the
// dedupe window, and on a new grant of the key, the first duplicate goes
// through the log again.
func TestDuplicatesThatAreNotGoThroughTheLog(t *testing.T) {
	m := ledgertest.NewMemory(start)
	s := refusalSetup(t, m, m)
	executedKey(t, s, `{"amount":5}`)
	window := s.Limits().DedupeWindow
	runSteps(t, s, m, []logStep{
		{"first duplicate", 0, claimReq(key, "other", `{"amount":5}`), fsm.StatusDuplicate, false},
		{"duplicate", 0, claimReq(key, "other", `{"amount":5}`), fsm.StatusDuplicate, true},
		{"divergent", 0, claimReq(key, "other", `{"amount":6}`), fsm.StatusDivergent, false},
		{"duplicate after divergent", 0, claimReq(key, "third", `{"amount":5}`), fsm.StatusDuplicate, true},
		{"window passed, not purged", window, claimReq(key, "other", `{"amount":5}`), fsm.StatusDuplicate, false},
	})
	eq(t, "divergent counted", m.Ledger().Get("default", key).Divergent, uint64(1))
}

// countingFollower is notLeading that counts its linearizable reads.
type countingFollower struct {
	notLeading
	linearizable *int
}

func (f countingFollower) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	if c == ledger.Linearizable {
		*f.linearizable++
	}
	return f.notLeading.Read(ctx, c, fn)
}

// TestFollowerProposesDuplicates: a follower proposes duplicates (the
// leader answers them), and after one failed confirmation it stops asking
// for a second.
func TestFollowerProposesDuplicates(t *testing.T) {
	m := ledgertest.NewMemory(start)
	var reads int
	s := refusalSetup(t, countingFollower{notLeading{Memory: m, leader: "http://10.0.0.2:8080"}, &reads}, m)
	executedKey(t, s, `{"amount":5}`)
	for i := range 5 {
		before := m.Proposed()
		r, err := s.Claim(ledger.WithForwardableClaim(context.Background()), claimReq(key, fmt.Sprintf("other-%d", i), `{"amount":5}`))
		if err != nil || r.Status != fsm.StatusDuplicate || r.Local {
			t.Fatalf("claim %d: %+v, %v", i, r, err)
		}
		eq(t, "proposed", m.Proposed()-before, 1)
	}
	eq(t, "confirmations tried", reads, 1)
	m.Advance(2 * time.Second)
	mustClaim(t, s, claimReq(key, "later", `{"amount":5}`), fsm.StatusDuplicate)
	eq(t, "confirmations tried after the pause", reads, 2)
	eq(t, "duplicates", m.Ledger().Get("default", key).Duplicates, uint64(6))
}
