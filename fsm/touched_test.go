package fsm_test

import (
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

// TestApplyTouchedNamesEveryChangedIntent applies random commands through
// ApplyTouched and, to a twin ledger, through Apply: the answers and states
// are the same, and every intent a command changed (created, changed or
// purged) is among those it reports.
func TestApplyTouchedNamesEveryChangedIntent(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &propModel{l: fsm.New(), clock: t0}
		twin := fsm.New()
		n := rapid.IntRange(1, 60).Draw(t, "commands")
		var touched []fsm.Ref
		for i := 1; i <= n; i++ {
			dt := rapid.SampledFrom(propSteps).Draw(t, "dt")
			at := m.clock + dt
			if dt > 0 {
				m.clock = at
			}
			cmd, data := m.command(t, at)
			if rapid.IntRange(0, 5).Draw(t, "spend a token") == 0 {
				ref := m.key(t)
				if in := m.l.Get(ref.Namespace, ref.Key); in != nil {
					cmd = &fsm.UseToken{Namespace: ref.Namespace, Key: ref.Key, Owner: in.Owner, FencingToken: in.FencingToken,
						Fingerprint: in.Fingerprint, Expires: at/1e9 + 60, Actor: "tool"}
				}
			}
			if cmd != nil {
				var err error
				if data, err = fsm.Encode(at, cmd); err != nil {
					t.Fatalf("encode: %v", err)
				}
			}
			before := map[fsm.Ref]*fsm.Intent{}
			for _, ref := range propRefs {
				before[ref] = m.l.Get(ref.Namespace, ref.Key)
			}
			var r *fsm.Result
			var all bool
			r, touched, all = m.l.ApplyTouched(uint64(i), data, touched[:0])
			if want := twin.Apply(uint64(i), data); !reflect.DeepEqual(r, want) {
				t.Fatalf("entry %d: ApplyTouched answered %+v, Apply %+v", i, r, want)
			}
			if all {
				t.Fatalf("entry %d (%T): a known command reported as touching everything", i, cmd)
			}
			for _, ref := range propRefs {
				if after := m.l.Get(ref.Namespace, ref.Key); !reflect.DeepEqual(after, before[ref]) && !slices.Contains(touched, ref) {
					t.Fatalf("entry %d (%T) changed %v but reported only %v", i, cmd, ref, touched)
				}
			}
		}
		if m.l.Digest() != twin.Digest() {
			t.Fatal("ApplyTouched and Apply ended in different states")
		}
	})
}

func TestTouchedAppendsToDst(t *testing.T) {
	dst := []fsm.Ref{{Namespace: "a", Key: "x"}}
	got, all := fsm.Touched(dst, &fsm.Expire{Keys: []fsm.Ref{{Namespace: ns, Key: "k1"}, {Namespace: ns, Key: "k2"}}})
	want := []fsm.Ref{{Namespace: "a", Key: "x"}, {Namespace: ns, Key: "k1"}, {Namespace: ns, Key: "k2"}}
	if all || !slices.Equal(got, want) {
		t.Fatalf("Touched = %v, %v; want %v", got, all, want)
	}
	for _, cmd := range []fsm.Command{&fsm.PutPolicy{}, &fsm.DeletePolicy{}, &fsm.AddSigningKey{}, &fsm.SetSettings{}} {
		if got, all := fsm.Touched(nil, cmd); all || len(got) != 0 {
			t.Errorf("%T touches %v (all %v), want nothing", cmd, got, all)
		}
	}
}
