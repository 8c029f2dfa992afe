package fsm_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

// TestLocalRefusalByState: only a key held by another owner with a live
// lease, or in_doubt, is refused from the state; the log refuses it the
// same way.
func TestLocalRefusalByState(t *testing.T) {
	for _, s := range fsm.States {
		t.Run(string(s), func(t *testing.T) {
			h := newHarness(t)
			h.run(toState(s))
			r, ok := h.l.LocalRefusal(claim("k", "B", payloadA), h.at)
			want := s == fsm.StateDeclared || s == fsm.StateInDoubt
			if ok != want {
				t.Fatalf("answered from the state: %v, want %v", ok, want)
			}
			if !ok {
				return
			}
			logged := h.apply(claim("k", "B", payloadA))
			eq(t, "status", r.Status, logged.Status)
			eq(t, "detail", r.Detail, logged.Detail)
			eq(t, "local", r.Local, true)
		})
	}
}

func TestLocalRefusalDeclines(t *testing.T) {
	checkDeclines(t, fsm.StateDeclared, []declineCase{
		{"no record", func() *fsm.Claim { return claim("other", "B", payloadA) }, nil},
		{"other payload: divergent counts, through the log", func() *fsm.Claim { return claim("k", "B", payloadB) }, nil},
		{"the owner's repeat: granted again", func() *fsm.Claim { return claim("k", "A", payloadA) }, nil},
		{"lease passed: the claim expires it", func() *fsm.Claim { return claim("k", "B", payloadA) },
			func(h *harness) int64 { return h.at + ms(leaseMS) + 1 }},
		{"unknown policy", func() *fsm.Claim { c := claim("k", "B", payloadA); c.Policy = "nope"; return c }, nil},
		{"no owner", func() *fsm.Claim { return claim("k", "", payloadA) }, nil},
		{"no lease anywhere", func() *fsm.Claim { c := claim("k", "B", payloadA); c.LeaseMS = 0; return c }, nil},
		{"no fingerprint", func() *fsm.Claim { c := claim("k", "B", payloadA); c.Fingerprint = ""; return c }, nil},
		{"bad window", func() *fsm.Claim { c := claim("k", "B", payloadA); c.DedupeWindowMS = -1; return c }, nil},
	}, (*fsm.Machine).LocalRefusal)
}

// TestLocalRefusalProperty: after any history, a refusal answered from
// the state is exactly the state machine's answer to the same claim at the
// same time (status, detail, and the intent's fields but for its version
// and trail), and the apply it stands for changed nothing else.
func TestLocalRefusalProperty(t *testing.T) {
	answered := 0
	hs := localHistory{keys: []string{"k0", "k1"}, owners: []string{"A", "B", "C"}, payloads: []string{payloadA, payloadB},
		outcomes: []fsm.Outcome{fsm.OutcomeExecuted}}
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(t)
		for step := 0; step < 40; step++ {
			hs.step(rt, h)
			probe, now := hs.probe(rt, h)
			local, ok := h.l.LocalRefusal(probe, now)
			if !ok {
				continue
			}
			answered++
			r, _ := applyToCopy(rt, h, probe, now)
			sameAsLogged(rt, "a local refusal", local, r)
		}
	})
	if answered == 0 {
		t.Fatal("no history gave a refusal from the state: the property checked nothing")
	}
	t.Logf("%d refusals from the state checked", answered)
}

func refusalNote(key string, fence uint64, count uint64, owners ...string) fsm.RefusalNote {
	return fsm.RefusalNote{Namespace: ns, Key: key, Status: fsm.StatusInFlight, FencingToken: fence, Count: count,
		Owners: owners, First: t0, Last: t0 + ms(900)}
}

func TestNoteRefusals(t *testing.T) {
	t.Run("recorded on the grant it was refused against", func(t *testing.T) {
		h := newHarness(t)
		h.run(toState(fsm.StateDeclared))
		before := h.get("k")
		r := h.must(&fsm.NoteRefusals{Node: "n1", Notes: []fsm.RefusalNote{refusalNote("k", 1, 250, "B", "C")}}, fsm.StatusOK)
		eq(t, "recorded", r.Count, 1)
		after := h.get("k")
		ev := lastEvent(t, after)
		eq(t, "status", ev.Status, fsm.StatusInFlight)
		eq(t, "owner", ev.Owner, "B")
		if !strings.Contains(ev.Reason, "250 in_flight refusals") || !strings.Contains(ev.Reason, "owners B, C") {
			t.Errorf("reason %q", ev.Reason)
		}
		eq(t, "state", after.State, before.State)
		eq(t, "lease", after.LeaseDeadline, before.LeaseDeadline)
		eq(t, "divergent", after.Divergent, before.Divergent)
		eq(t, "duplicates", after.Duplicates, before.Duplicates)
		eq(t, "version", after.Version, h.idx)
		head := h.l.AuditHead(ns)
		eq(t, "namespace log events", head.LastSeq, uint64(len(after.Audit)))
	})
	t.Run("a later grant: the namespace's log alone", func(t *testing.T) {
		h := newHarness(t)
		h.run(toState(fsm.StateFailed))
		h.must(claim("k", "B", payloadA), fsm.StatusGranted) // fencing token 3
		mustNoteTheNamespaceOnly(t, h, "k", &fsm.NoteRefusals{Node: "n1", Notes: []fsm.RefusalNote{refusalNote("k", 1, 3, "C")}})
	})
	t.Run("malformed", func(t *testing.T) {
		tooMany := &fsm.NoteRefusals{Node: "n1"}
		for range fsm.MaxRefusalNotes + 1 {
			tooMany.Notes = append(tooMany.Notes, refusalNote("k", 1, 1, "B"))
		}
		badStatus := refusalNote("k", 1, 1, "B")
		badStatus.Status = fsm.StatusDivergent
		for _, tc := range []struct {
			name string
			cmd  *fsm.NoteRefusals
		}{
			{"no node", &fsm.NoteRefusals{Node: "", Notes: []fsm.RefusalNote{refusalNote("k", 1, 1, "B")}}},
			{"no notes", &fsm.NoteRefusals{Node: "n1"}},
			{"too many notes", tooMany},
			{"no owner", &fsm.NoteRefusals{Node: "n1", Notes: []fsm.RefusalNote{refusalNote("k", 1, 1)}}},
			{"no count", &fsm.NoteRefusals{Node: "n1", Notes: []fsm.RefusalNote{refusalNote("k", 1, 0, "B")}}},
			{"not a refusal's status", &fsm.NoteRefusals{Node: "n1", Notes: []fsm.RefusalNote{badStatus}}},
		} {
			t.Run(tc.name, func(t *testing.T) { mustRefuseMalformed(t, fsm.StateDeclared, tc.cmd) })
		}
		// Positive control: the note the cases spoil is recorded.
		h := newHarness(t)
		h.run(toState(fsm.StateDeclared))
		h.must(&fsm.NoteRefusals{Node: "n1", Notes: []fsm.RefusalNote{refusalNote("k", 1, 1, "B")}}, fsm.StatusOK)
	})
}

// TestNoteRefusalsSpareTheGrant: a storm's notes, however many, never push
// the grant (or any state change) out of the key's trail; refusals the log
// answered still push out the oldest events, as they always have.
func TestNoteRefusalsSpareTheGrant(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	h.must(renew("k", "A", 1, leaseMS), fsm.StatusOK)
	for i := range 3 * fsm.MaxAuditEvents {
		h.must(&fsm.NoteRefusals{Node: "n1", Notes: []fsm.RefusalNote{refusalNote("k", 1, uint64(i+1), "B")}}, fsm.StatusOK)
	}
	in := h.get("k")
	const most = fsm.MaxAuditEvents - 16 // the room notes leave to the other commands
	eq(t, "trail", len(in.Audit), most)
	eq(t, "first event", in.Audit[0].Status, fsm.StatusGranted)
	eq(t, "dropped", in.AuditDropped, uint64(3*fsm.MaxAuditEvents+2-most))
	// A snapshot of the trail the notes left (48 events, some dropped)
	// restores: a follower sent it must be able to install it.
	var spared bytes.Buffer
	if err := h.l.WriteSnapshot(&spared); err != nil {
		t.Fatal(err)
	}
	if _, err := fsm.Restore(&spared); err != nil {
		t.Fatalf("restore of the spared trail: %v", err)
	}
	for range 15 {
		h.must(claim("k", "B", payloadA), fsm.StatusInFlight) // through the log, as from an old node
	}
	h.must(complete("k", "A", 1, fsm.OutcomeExecuted, resultOK), fsm.StatusOK)
	in = h.get("k")
	eq(t, "grant kept after the report", in.Audit[0].Status, fsm.StatusGranted)
	eq(t, "report", in.Audit[len(in.Audit)-1].Op, "complete")

	// The old ring, for commands that are not notes: the oldest goes.
	old := newHarness(t)
	old.run(toState(fsm.StateDeclared))
	for range fsm.MaxAuditEvents {
		old.must(claim("k", "B", payloadA), fsm.StatusInFlight)
	}
	eq(t, "old ring's first event", old.get("k").Audit[0].Status, fsm.StatusInFlight)

	// A snapshot of the spared trail restores.
	var buf bytes.Buffer
	if err := h.l.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := fsm.Restore(&buf); err != nil {
		t.Fatalf("restore: %v", err)
	}
}

func TestChangesState(t *testing.T) {
	cases := []struct {
		ev   fsm.AuditEvent
		want bool
	}{
		{fsm.AuditEvent{Op: "claim", Status: fsm.StatusGranted}, true},
		{fsm.AuditEvent{Op: "claim", Status: fsm.StatusGranted, Reason: "repeated by owner"}, false},
		{fsm.AuditEvent{Op: "claim", Status: fsm.StatusInFlight}, false},
		{fsm.AuditEvent{Op: "claim", Status: fsm.StatusInDoubt}, false},
		{fsm.AuditEvent{Op: "claim", Status: fsm.StatusDuplicate}, false},
		{fsm.AuditEvent{Op: "claim", Status: fsm.StatusDivergent}, false},
		{fsm.AuditEvent{Op: "claim", Status: fsm.StatusPendingApproval, Reason: "policy p version 1 requires 1 approval(s)"}, true},
		{fsm.AuditEvent{Op: "claim", Status: fsm.StatusPendingApproval}, false},
		{fsm.AuditEvent{Op: "complete", Status: fsm.StatusOK}, true},
		{fsm.AuditEvent{Op: "renew", Status: fsm.StatusOK}, false},
		{fsm.AuditEvent{Op: "approve", Status: fsm.StatusOK}, true},
		{fsm.AuditEvent{Op: "expire", Status: fsm.StatusExpired}, true},
		{fsm.AuditEvent{Op: "complete", Status: fsm.StatusFenced}, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/%s/%q", tc.ev.Op, tc.ev.Status, tc.ev.Reason), func(t *testing.T) {
			eq(t, "changes state", tc.ev.ChangesState(), tc.want)
		})
	}
}
