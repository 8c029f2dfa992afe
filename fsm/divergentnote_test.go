package fsm_test

import (
	"bytes"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

// TestLocalDivergentByState: a divergent claim is answered from the state
// in every state the key can be in, as the log answers it.
func TestLocalDivergentByState(t *testing.T) {
	for _, s := range fsm.States {
		t.Run(string(s), func(t *testing.T) {
			h := newHarness(t)
			h.run(toState(s))
			r, ok := h.l.LocalDivergent(claim("k", "B", payloadB), h.at)
			if !ok {
				t.Fatal("not answered from the state")
			}
			logged := h.apply(claim("k", "B", payloadB))
			eq(t, "status", r.Status, logged.Status)
			eq(t, "detail", r.Detail, logged.Detail)
			eq(t, "fingerprint", r.Fingerprint, logged.Fingerprint)
			eq(t, "divergent", r.Intent.Divergent, logged.Intent.Divergent)
			eq(t, "local", r.Local, true)
		})
	}
}

func TestLocalDivergentDeclines(t *testing.T) {
	checkDeclines(t, fsm.StateDeclared, []declineCase{
		{"no record", func() *fsm.Claim { return claim("other", "B", payloadB) }, nil},
		{"same payload: not divergent", func() *fsm.Claim { return claim("k", "B", payloadA) }, nil},
		{"the owner's repeat", func() *fsm.Claim { return claim("k", "A", payloadA) }, nil},
		{"lease passed: the claim expires it", func() *fsm.Claim { return claim("k", "B", payloadB) },
			func(h *harness) int64 { return h.at + ms(leaseMS) + 1 }},
		{"unknown policy", func() *fsm.Claim { c := claim("k", "B", payloadB); c.Policy = "nope"; return c }, nil},
		{"no owner", func() *fsm.Claim { return claim("k", "", payloadB) }, nil},
		{"no lease anywhere", func() *fsm.Claim { c := claim("k", "B", payloadB); c.LeaseMS = 0; return c }, nil},
		{"no fingerprint", func() *fsm.Claim { c := claim("k", "B", payloadB); c.Fingerprint = ""; return c }, nil},
		{"bad window", func() *fsm.Claim { c := claim("k", "B", payloadB); c.DedupeWindowMS = -1; return c }, nil},
		{"payload not JSON", func() *fsm.Claim { c := claim("k", "B", payloadB); c.Payload = []byte("{"); return c }, nil},
	}, (*fsm.Machine).LocalDivergent)
	// Positive control: the harness's declared key does answer a
	// divergent claim from the state.
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	if _, ok := h.l.LocalDivergent(claim("k", "B", payloadB), h.at); !ok {
		t.Fatal("the control claim was not answered from the state")
	}
}

// divergentNoteFor is the note that records the local answer r to c,
// answered at now.
func divergentNoteFor(r *fsm.Result, c *fsm.Claim, now int64) fsm.DivergentNote {
	return fsm.DivergentNote{Namespace: c.Namespace, Key: c.Key, Fingerprint: r.Intent.Fingerprint,
		FencingToken: r.Intent.FencingToken, CreatedAt: r.Intent.CreatedAt, Count: 1, Owners: []string{c.Owner},
		Fingerprints: []string{c.Fingerprint}, First: now, Last: now}
}

// TestLocalDivergentProperty: after any history, a divergent claim
// answered from the state is exactly the state machine's answer to the
// same claim at the same time (status, detail, the claim's fingerprint,
// and the intent's fields but for its version and trail, Divergent
// included), and the note that records it, applied at that time, leaves
// the intent as the claim's apply does but for the version and trail.
func TestLocalDivergentProperty(t *testing.T) {
	answered := 0
	hs := localHistory{keys: []string{"k0", "k1"}, owners: []string{"A", "B", "C"},
		payloads: []string{payloadA, payloadB, `{"amount":300,"currency":"EUR"}`}, outcomes: []fsm.Outcome{fsm.OutcomeExecuted, fsm.OutcomeFailed},
		approvals: true}
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(t)
		for step := 0; step < 40; step++ {
			hs.step(rt, h)
			probe, now := hs.probe(rt, h)
			local, ok := h.l.LocalDivergent(probe, now)
			if !ok {
				continue
			}
			answered++
			r, _ := applyToCopy(rt, h, probe, now)
			if r.Fingerprint != local.Fingerprint {
				rt.Fatalf("answered fingerprint %s from the state; the log answers %s", local.Fingerprint, r.Fingerprint)
			}
			sameAsLogged(rt, "a local divergent answer", local, r)
			nr, noted := applyToCopy(rt, h, &fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{divergentNoteFor(local, probe, now)}}, now)
			if nr.Status != fsm.StatusOK || nr.Count != 1 {
				rt.Fatalf("the note: %s (%s), %d recorded", nr.Status, nr.Detail, nr.Count)
			}
			if a, b := comparableIntent(noted.Get(probe.Namespace, probe.Key)), comparableIntent(r.Intent); a != b {
				rt.Fatalf("after the note\n%s\nafter the claim\n%s", a, b)
			}
		}
	})
	if answered == 0 {
		t.Fatal("no history gave a divergent answer from the state: the property checked nothing")
	}
	t.Logf("%d divergent answers from the state checked", answered)
}

func divergentNote(key string, fence uint64, createdAt int64, count uint64, owners ...string) fsm.DivergentNote {
	return fsm.DivergentNote{Namespace: ns, Key: key, Fingerprint: mustFP(payloadA), FencingToken: fence, CreatedAt: createdAt,
		Count: count, Owners: owners, Fingerprints: []string{mustFP(payloadB)}, First: t0, Last: t0 + ms(900)}
}

func TestNoteDivergent(t *testing.T) {
	t.Run("counted and recorded on the record it was refused against", func(t *testing.T) {
		h := newHarness(t)
		h.run(toState(fsm.StateDeclared))
		h.must(claim("k", "B", payloadB), fsm.StatusDivergent) // the first, through the log
		before := h.get("k")
		r := h.must(&fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{divergentNote("k", 1, before.CreatedAt, 250, "B", "C")}}, fsm.StatusOK)
		eq(t, "recorded", r.Count, 1)
		after := h.get("k")
		ev := lastEvent(t, after)
		eq(t, "status", ev.Status, fsm.StatusDivergent)
		eq(t, "owner", ev.Owner, "B")
		eq(t, "fingerprint", ev.Fingerprint, mustFP(payloadB))
		if !strings.Contains(ev.Reason, "250 divergent claims") || !strings.Contains(ev.Reason, "owners B, C") ||
			!strings.Contains(ev.Reason, mustFP(payloadB)) {
			t.Errorf("reason %q", ev.Reason)
		}
		eq(t, "divergent", after.Divergent, before.Divergent+250)
		eq(t, "state", after.State, before.State)
		eq(t, "lease", after.LeaseDeadline, before.LeaseDeadline)
		eq(t, "duplicates", after.Duplicates, before.Duplicates)
		eq(t, "version", after.Version, h.idx)
		eq(t, "namespace log events", h.l.AuditHead(ns).LastSeq, uint64(len(after.Audit)))
	})
	t.Run("recorded across a re-grant of the record, as the claims would have counted", func(t *testing.T) {
		h := newHarness(t)
		h.run(toState(fsm.StateFailed))
		created := h.get("k").CreatedAt
		h.must(claim("k", "B", payloadA), fsm.StatusGranted) // fencing token 3
		eq(t, "recorded", h.must(&fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{divergentNote("k", 1, created, 3, "C")}},
			fsm.StatusOK).Count, 1)
		eq(t, "divergent", h.get("k").Divergent, 3)
	})
	t.Run("recorded whatever the state now", func(t *testing.T) {
		h := newHarness(t)
		h.run(toState(fsm.StateExecuted))
		in := h.get("k")
		eq(t, "recorded", h.must(&fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{divergentNote("k", 1, in.CreatedAt, 3, "B")}},
			fsm.StatusOK).Count, 1)
		eq(t, "divergent", h.get("k").Divergent, 3)
	})
	moved := []struct {
		name  string
		setup func(h *harness) fsm.DivergentNote
	}{
		{"a note from the future: a grant the record never had", func(h *harness) fsm.DivergentNote {
			h.run(toState(fsm.StateDeclared))
			return divergentNote("k", 99, h.get("k").CreatedAt, 3, "C")
		}},
		{"another creation time", func(h *harness) fsm.DivergentNote {
			h.run(toState(fsm.StateDeclared))
			return divergentNote("k", 1, h.get("k").CreatedAt-1, 3, "C")
		}},
		{"purged and claimed again", func(h *harness) fsm.DivergentNote {
			h.run(toState(fsm.StateExecuted))
			created := h.get("k").CreatedAt
			h.advance(ms(dedupeMS) + 1)
			h.must(purge("k"), fsm.StatusOK)
			h.advance(1)
			h.must(claim("k", "B", payloadA), fsm.StatusGranted)
			return divergentNote("k", h.get("k").FencingToken, created, 3, "C")
		}},
		{"no record", func(h *harness) fsm.DivergentNote { return divergentNote("gone", 1, t0, 3, "C") }},
	}
	for _, tc := range moved {
		t.Run("moved on: "+tc.name+": the namespace's log alone", func(t *testing.T) {
			h := newHarness(t)
			note := tc.setup(h)
			mustNoteTheNamespaceOnly(t, h, note.Key, &fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{note}})
		})
	}
	t.Run("malformed", func(t *testing.T) {
		ok := divergentNote("k", 1, t0, 1, "B")
		tooMany := &fsm.NoteDivergent{Node: "n1"}
		for range fsm.MaxDivergentNotes + 1 {
			tooMany.Notes = append(tooMany.Notes, ok)
		}
		bad := func(change func(n *fsm.DivergentNote)) *fsm.NoteDivergent {
			n := divergentNote("k", 1, t0, 1, "B")
			change(&n)
			return &fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{n}}
		}
		cases := []struct {
			name string
			cmd  *fsm.NoteDivergent
		}{
			{"no node", &fsm.NoteDivergent{Notes: []fsm.DivergentNote{ok}}},
			{"no notes", &fsm.NoteDivergent{Node: "n1"}},
			{"too many notes", tooMany},
			{"no owner", bad(func(n *fsm.DivergentNote) { n.Owners = nil })},
			{"empty owner", bad(func(n *fsm.DivergentNote) { n.Owners = []string{""} })},
			{"too many owners", bad(func(n *fsm.DivergentNote) { n.Owners = strings.Split("a b c d e f g h i", " ") })},
			{"no count", bad(func(n *fsm.DivergentNote) { n.Count = 0 })},
			{"count over the bound", bad(func(n *fsm.DivergentNote) { n.Count = fsm.MaxDivergentCount + 1 })},
			{"no fingerprints", bad(func(n *fsm.DivergentNote) { n.Fingerprints = nil })},
			{"the record's fingerprint", bad(func(n *fsm.DivergentNote) { n.Fingerprints = []string{n.Fingerprint} })},
			{"too many fingerprints", bad(func(n *fsm.DivergentNote) { n.Fingerprints = strings.Split("a b c d e f g h i", " ") })},
			{"no record fingerprint", bad(func(n *fsm.DivergentNote) { n.Fingerprint = "" })},
			{"no key", bad(func(n *fsm.DivergentNote) { n.Key = "" })},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { mustRefuseMalformed(t, fsm.StateDeclared, tc.cmd) })
		}
		// Positive control: the note the cases spoil is recorded.
		h := newHarness(t)
		h.run(toState(fsm.StateDeclared))
		good := divergentNote("k", 1, h.get("k").CreatedAt, 1, "B")
		h.must(&fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{good}}, fsm.StatusOK)
	})
}

// TestNoteDivergentSparesTheGrant: divergent notes, however many, never
// push the grant out of the key's trail, and a snapshot of the counters
// they leave restores.
func TestNoteDivergentSparesTheGrant(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	created := h.get("k").CreatedAt
	var total uint64
	for i := range 3 * fsm.MaxAuditEvents {
		n := divergentNote("k", 1, created, fsm.MaxDivergentCount, "B")
		if i%2 == 1 {
			n.Count = uint64(i + 1)
		}
		total += n.Count
		h.must(&fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{n}}, fsm.StatusOK)
	}
	in := h.get("k")
	eq(t, "divergent", in.Divergent, total)
	const most = fsm.MaxAuditEvents - 16
	eq(t, "trail", len(in.Audit), most)
	eq(t, "first event", in.Audit[0].Status, fsm.StatusGranted)
	h.must(complete("k", "A", 1, fsm.OutcomeExecuted, resultOK), fsm.StatusOK)
	in = h.get("k")
	eq(t, "grant kept after the report", in.Audit[0].Status, fsm.StatusGranted)

	// A full batch of notes on one key, at the count bound each, restores.
	full := &fsm.NoteDivergent{Node: "n1"}
	for range fsm.MaxDivergentNotes {
		full.Notes = append(full.Notes, divergentNote("k", 1, created, fsm.MaxDivergentCount, "B"))
	}
	h.must(full, fsm.StatusOK)
	var buf bytes.Buffer
	if err := h.l.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored, err := fsm.Restore(&buf)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	eq(t, "restored divergent", restored.Get(ns, "k").Divergent, h.get("k").Divergent)
}

// TestNoteDivergentIsNotIgnorable: a replica that does not know type 17
// stops on it instead of skipping it (it changes counters and trails), as
// on NoteRefusals; this version decodes and applies it.
func TestNoteDivergentIsNotIgnorable(t *testing.T) {
	eq(t, "type", fsm.TypeNoteDivergent, fsm.CommandType(17))
	eq(t, "ignorable", fsm.TypeNoteDivergent&fsm.IgnorableFlag, 0)
	data, err := fsm.Encode(t0, &fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{divergentNote("k", 1, t0, 1, "B")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsm.Decode(data); err != nil {
		t.Fatalf("this version: %v", err)
	}
}
