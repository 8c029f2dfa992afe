package fsm_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

const localMargin = int64(2_000_000_000) // 2 s

func TestLocalDuplicateByState(t *testing.T) {
	for _, s := range fsm.States {
		t.Run(string(s), func(t *testing.T) {
			h := newHarness(t)
			h.run(toState(s))
			in, ok := h.l.LocalDuplicate(claim("k", "B", payloadA), h.at, localMargin)
			want := s == fsm.StateExecuted || s == fsm.StateCommitted
			if ok != want {
				t.Fatalf("answered locally: %v, want %v", ok, want)
			}
			if !ok {
				return
			}
			if in.State != s || !bytes.Equal(in.Result, h.get("k").Result) {
				t.Errorf("local answer %+v", in)
			}
			// The leader's answer to the same claim is a duplicate too.
			h.must(claim("k", "B", payloadA), fsm.StatusDuplicate)
		})
	}
}

func TestLocalDuplicateRefusals(t *testing.T) {
	cases := []struct {
		name   string
		claim  func() *fsm.Claim
		now    func(h *harness) int64
		margin int64
	}{
		{"no record", func() *fsm.Claim { return claim("other", "B", payloadA) }, nil, localMargin},
		{"other payload", func() *fsm.Claim { return claim("k", "B", payloadB) }, nil, localMargin},
		{"window passes within the margin", func() *fsm.Claim { return claim("k", "B", payloadA) },
			func(h *harness) int64 { return h.at + ms(dedupeMS) - localMargin }, localMargin},
		{"window passed", func() *fsm.Claim { return claim("k", "B", payloadA) },
			func(h *harness) int64 { return h.at + ms(dedupeMS) }, 0},
		{"negative margin", func() *fsm.Claim { return claim("k", "B", payloadA) }, nil, -1},
		{"unknown policy", func() *fsm.Claim { c := claim("k", "B", payloadA); c.Policy = "nope"; return c }, nil, localMargin},
		{"no owner", func() *fsm.Claim { c := claim("k", "", payloadA); return c }, nil, localMargin},
		{"no lease anywhere", func() *fsm.Claim { c := claim("k", "B", payloadA); c.LeaseMS = 0; return c }, nil, localMargin},
		{"no fingerprint", func() *fsm.Claim { c := claim("k", "B", payloadA); c.Fingerprint = ""; return c }, nil, localMargin},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.run(toState(fsm.StateExecuted))
			now := h.at
			if tc.now != nil {
				now = tc.now(h)
			}
			if in, ok := h.l.LocalDuplicate(tc.claim(), now, tc.margin); ok {
				t.Fatalf("answered locally: %+v", in)
			}
		})
	}
}

func TestLocalDuplicateUsesTheLedgersTimeWhenLater(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateExecuted))
	h.advance(ms(dedupeMS) - 1)
	h.must(renew("unrelated", "A", 1, leaseMS), fsm.StatusNotFound) // the ledger's time moves on
	// A node clock far behind must not stretch the window.
	if _, ok := h.l.LocalDuplicate(claim("k", "B", payloadA), t0, 0); !ok {
		t.Fatal("1 ns before the window ends, with no margin: not answered")
	}
	if _, ok := h.l.LocalDuplicate(claim("k", "B", payloadA), t0, 1); ok {
		t.Fatal("answered although the window ends within the margin by the ledger's own time")
	}
}

// duplicateNoteFor is a note for key with payloadA's fingerprint.
func duplicateNoteFor(key, id string) fsm.DuplicateNote {
	return fsm.DuplicateNote{Namespace: ns, Key: key, Owner: "B", Fingerprint: mustFP(payloadA), FencingToken: 1, Note: id, AnsweredAt: t0}
}

func TestNoteDuplicates(t *testing.T) {
	note := func(fp, n string) *fsm.NoteDuplicates {
		return &fsm.NoteDuplicates{Node: "n2", Notes: []fsm.DuplicateNote{{Namespace: ns, Key: "k", Owner: "B", Fingerprint: fp, FencingToken: 1,
			Note: n, AnsweredAt: t0}}}
	}
	t.Run("recorded on the intent once per note", func(t *testing.T) {
		h := newHarness(t)
		h.run(toState(fsm.StateExecuted))
		before := h.get("k")
		r := h.must(note(mustFP(payloadA), "n2/1"), fsm.StatusOK)
		eq(t, "recorded", r.Count, 1)
		eq(t, "Duplicates", h.get("k").Duplicates, before.Duplicates+1)
		ev := lastEvent(t, h.get("k"))
		if ev.Op != "claim" || ev.Status != fsm.StatusDuplicate || ev.Owner != "B" || !strings.Contains(ev.Reason, "node n2") ||
			!strings.Contains(ev.Reason, "note n2/1") {
			t.Errorf("event %+v", ev)
		}
		h.must(note(mustFP(payloadA), "n2/1"), fsm.StatusOK) // a retried proposal
		eq(t, "Duplicates after the retry", h.get("k").Duplicates, before.Duplicates+1)
		eq(t, "events after the retry", len(h.get("k").Audit), len(before.Audit)+1)
		h.must(note(mustFP(payloadA), "n2/2"), fsm.StatusOK)
		eq(t, "Duplicates after another note", h.get("k").Duplicates, before.Duplicates+2)
		if in := h.get("k"); in.State != fsm.StateExecuted || !bytes.Equal(in.Result, before.Result) || in.UpdatedAt != before.UpdatedAt {
			t.Errorf("the note changed more than the count and the trail: %+v", in)
		}
	})
	t.Run("a batch records each of its notes", func(t *testing.T) {
		h := newHarness(t)
		h.run(toState(fsm.StateExecuted))
		b := note(mustFP(payloadA), "n2/1")
		b.Notes = append(b.Notes, b.Notes[0], duplicateNoteFor("absent", "n2/3"), b.Notes[0])
		b.Notes[1].Note = "n2/2"
		r := h.must(b, fsm.StatusOK)
		eq(t, "recorded", r.Count, 2) // n2/1 and n2/2; the absent key's goes to the namespace log; n2/1 again is a no-op
		eq(t, "Duplicates", h.get("k").Duplicates, 2)
	})
	t.Run("a note of another grant of the key goes to the namespace log", func(t *testing.T) {
		h := newHarness(t)
		h.run(toState(fsm.StateExecuted))
		other := note(mustFP(payloadA), "n2/1")
		other.Notes[0].FencingToken = 7
		mustNoteTheNamespaceOnly(t, h, "k", other)
	})
	t.Run("a large batch for one key survives a snapshot", func(t *testing.T) {
		h := newHarness(t)
		h.run(toState(fsm.StateExecuted))
		b := &fsm.NoteDuplicates{Node: "n2"}
		for i := range fsm.MaxDuplicateNotes {
			b.Notes = append(b.Notes, duplicateNoteFor("k", fmt.Sprintf("n2/%d", i)))
		}
		eq(t, "recorded", h.must(b, fsm.StatusOK).Count, fsm.MaxDuplicateNotes)
		var buf bytes.Buffer
		if err := h.l.WriteSnapshot(&buf); err != nil {
			t.Fatal(err)
		}
		l, err := fsm.Restore(&buf)
		if err != nil {
			t.Fatalf("restore after a batch of %d notes: %v", fsm.MaxDuplicateNotes, err)
		}
		eq(t, "duplicates after restore", l.Get(ns, "k").Duplicates, uint64(fsm.MaxDuplicateNotes))
	})
	t.Run("the record moved on: the namespace log keeps it", func(t *testing.T) {
		for _, s := range []fsm.State{fsm.StateDeclared, fsm.StateFailed, fsm.StateInDoubt} {
			t.Run(string(s), func(t *testing.T) {
				h := newHarness(t)
				h.run(toState(s))
				mustNoteTheNamespaceOnly(t, h, "k", note(mustFP(payloadA), "n2/1"))
			})
		}
		t.Run("no record at all", func(t *testing.T) {
			mustNoteTheNamespaceOnly(t, newHarness(t), "k", note(mustFP(payloadA), "n2/1"))
		})
	})
	t.Run("malformed", func(t *testing.T) {
		good := note(mustFP(payloadA), "n2/9").Notes[0]
		tooMany := &fsm.NoteDuplicates{Node: "n2"}
		for range fsm.MaxDuplicateNotes + 1 {
			tooMany.Notes = append(tooMany.Notes, good)
		}
		for _, tc := range []struct {
			name string
			cmd  *fsm.NoteDuplicates
		}{
			{"no fingerprint", note("", "n")},
			{"no note id", note(mustFP(payloadA), "")},
			{"no node", &fsm.NoteDuplicates{Node: "", Notes: []fsm.DuplicateNote{good}}},
			{"no notes", &fsm.NoteDuplicates{Node: "n2"}},
			{"too many notes", tooMany},
			{"a bad note after a good one", &fsm.NoteDuplicates{Node: "n2", Notes: []fsm.DuplicateNote{good, {Namespace: ns, Key: "k", Fingerprint: "f"}}}},
		} {
			t.Run(tc.name, func(t *testing.T) { mustRefuseMalformed(t, fsm.StateExecuted, tc.cmd) })
		}
		// Positive control: the note the cases spoil is recorded.
		h := newHarness(t)
		h.run(toState(fsm.StateExecuted))
		eq(t, "recorded", h.must(&fsm.NoteDuplicates{Node: "n2", Notes: []fsm.DuplicateNote{good}}, fsm.StatusOK).Count, 1)
	})
}

// TestLocalDuplicateProperty drives random histories and asks copies of
// the ledger that lag behind (a replica) for local answers at node clocks
// up to the margin behind the leader's: every answer given must be the
// answer the leader gives to the same claim now, with the same result.
func TestLocalDuplicateProperty(t *testing.T) {
	answered := 0
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(t)
		var copies []*fsm.Machine // copies[i]: the ledger after i+1 commands
		keys := []string{"k0", "k1"}
		payloads := []string{payloadA, payloadB}
		owners := []string{"A", "B"}
		for step := 0; step < 40; step++ {
			key := rapid.SampledFrom(keys).Draw(rt, "key")
			h.advance(rapid.SampledFrom([]int64{0, ms(10), ms(leaseMS) + 1, ms(dedupeMS) / 3, ms(dedupeMS)}).Draw(rt, "advance"))
			var cmd fsm.Command
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1:
				cmd = claim(key, rapid.SampledFrom(owners).Draw(rt, "owner"), rapid.SampledFrom(payloads).Draw(rt, "payload"))
			case 2:
				in := h.get(key)
				if in == nil {
					continue
				}
				cmd = complete(key, in.Owner, in.FencingToken, rapid.SampledFrom([]fsm.Outcome{fsm.OutcomeExecuted, fsm.OutcomeFailed}).Draw(rt, "outcome"), resultOK)
			case 3:
				in := h.get(key)
				if in == nil {
					continue
				}
				cmd = commit(key, in.Owner)
			case 4:
				cmd = expire(key)
			case 5:
				cmd = purge(key)
			}
			h.apply(cmd)
			copies = append(copies, h.l.Clone())

			// A replica lagging lag commands behind, whose clock is
			// behind the leader's by up to the margin, or ahead.
			lag := rapid.IntRange(0, min(5, len(copies)-1)).Draw(rt, "lag")
			replica := copies[len(copies)-1-lag]
			skew := rapid.Int64Range(-localMargin, localMargin).Draw(rt, "skew")
			probe := claim(rapid.SampledFrom(keys).Draw(rt, "probe key"), "C", rapid.SampledFrom(payloads).Draw(rt, "probe payload"))
			in, ok := replica.LocalDuplicate(probe, h.at-skew, localMargin)
			if !ok {
				continue
			}
			answered++
			leader := h.l.Clone()
			data, err := fsm.Encode(h.at, probe)
			if err != nil {
				rt.Fatal(err)
			}
			r := leader.Apply(h.idx+1, data)
			if r.Status != fsm.StatusDuplicate || !bytes.Equal(r.Intent.Result, in.Result) || r.Intent.FencingToken != in.FencingToken {
				rt.Fatalf("replica %d behind, skew %d: answered duplicate %s (token %d), the leader answers %s %s (token %d)",
					lag, skew, in.Result, in.FencingToken, r.Status, r.Detail, r.Intent.FencingToken)
			}
			// The replica's note reaches the leader, as in the cluster.
			h.apply(&fsm.NoteDuplicates{Node: "r", Notes: []fsm.DuplicateNote{{Namespace: probe.Namespace, Key: probe.Key,
				Owner: probe.Owner, Fingerprint: probe.Fingerprint, FencingToken: in.FencingToken, Note: fmt.Sprintf("r/%d", step)}}})
			copies = append(copies, h.l.Clone())
		}
		// Whatever the notes did, the state still makes a snapshot that
		// restores.
		var buf bytes.Buffer
		if err := h.l.WriteSnapshot(&buf); err != nil {
			rt.Fatal(err)
		}
		if _, err := fsm.Restore(&buf); err != nil {
			rt.Fatalf("restore: %v", err)
		}
	})
	if answered == 0 {
		t.Fatal("no history gave a local answer: the property checked nothing")
	}
	t.Logf("%d local answers checked", answered)
}
