package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"
)

// TestCheckedStableDetectsAFlippedVote: on both stores, a vote whose bytes
// changed on disk stops the node at open (ErrUnrestorable,
// ErrCorruptStable); a sound one reads back.
func TestCheckedStableDetectsAFlippedVote(t *testing.T) {
	for _, flip := range []bool{false, true} {
		t.Run(fmt.Sprintf("flip=%v", flip), func(t *testing.T) {
			forEachLogStore(t, func(t *testing.T, kind, dir string, store logStore) {
				s, err := openCheckedStable(store, dir)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
					t.Fatal(err)
				}
				if err := s.Set([]byte("LastVoteCand"), []byte("candidate-n2")); err != nil {
					t.Fatal(err)
				}
				if err := store.Close(); err != nil {
					t.Fatal(err)
				}
				if flip && flipIn(t, dir, []byte("candidate-n2"), len("candidate-n")) == 0 {
					t.Fatal("the vote was not found on disk")
				}
				s, err = openCheckedStable(openTestLogStore(t, dir, kind), dir)
				if flip {
					if !errors.Is(err, ErrUnrestorable) || !errors.Is(err, ErrCorruptStable) {
						t.Fatalf("open = %v, want ErrUnrestorable and ErrCorruptStable", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				term, err := s.GetUint64([]byte("CurrentTerm"))
				cand, err2 := s.Get([]byte("LastVoteCand"))
				if term != 7 || string(cand) != "candidate-n2" || err != nil || err2 != nil {
					t.Fatalf("read term %d (%v), vote %q (%v)", term, err, cand, err2)
				}
			})
		})
	}
}

// TestCheckedStableRewritesLegacyValues: values a node wrote before
// checksums (in the store's own encoding) are accepted once, rewritten in
// the envelope, and after that a value without it is refused.
func TestCheckedStableRewritesLegacyValues(t *testing.T) {
	forEachLogStore(t, func(t *testing.T, _, dir string, store logStore) {
		if err := store.SetUint64([]byte("CurrentTerm"), 9); err != nil {
			t.Fatal(err)
		}
		if err := store.SetUint64([]byte("LastVoteTerm"), 8); err != nil {
			t.Fatal(err)
		}
		if err := store.Set([]byte("LastVoteCand"), []byte("n3")); err != nil {
			t.Fatal(err)
		}
		s, err := openCheckedStable(store, dir)
		if err != nil {
			t.Fatal(err)
		}
		for key, want := range map[string]uint64{"CurrentTerm": 9, "LastVoteTerm": 8} {
			if got, err := s.GetUint64([]byte(key)); got != want || err != nil {
				t.Fatalf("%s = %d, %v; want %d", key, got, err, want)
			}
			if raw, _ := store.Get([]byte(key)); !bytes.HasPrefix(raw, stableMagic) {
				t.Fatalf("%s was not rewritten with a checksum: %x", key, raw)
			}
		}
		if got, err := s.Get([]byte("LastVoteCand")); string(got) != "n3" || err != nil {
			t.Fatalf("LastVoteCand = %q, %v", got, err)
		}
		// A value without the envelope after the migration is corrupt.
		if err := store.Set([]byte("LastVoteCand"), []byte("n1")); err != nil {
			t.Fatal(err)
		}
		if _, err := openCheckedStable(store, dir); !errors.Is(err, ErrCorruptStable) {
			t.Fatalf("reopen with a bare vote = %v, want ErrCorruptStable", err)
		}
	})
}

// TestCheckedStableRoundTrip: whatever raft sets comes back; an unset key
// reads as the inner store answers it.
func TestCheckedStableRoundTrip(t *testing.T) {
	s, err := openCheckedStable(raft.NewInmemStore(), "inmem")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetUint64([]byte("unset")); v != 0 || err != nil {
		t.Fatalf("unset = %d, %v", v, err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		key := []byte(rapid.StringMatching(`[A-Za-z]{1,12}`).Draw(rt, "key"))
		if rapid.Bool().Draw(rt, "uint64") {
			v := rapid.Uint64().Draw(rt, "v")
			if err := s.SetUint64(key, v); err != nil {
				rt.Fatal(err)
			}
			if got, err := s.GetUint64(key); got != v || err != nil {
				rt.Fatalf("GetUint64 = %d, %v; want %d", got, err, v)
			}
			return
		}
		v := rapid.SliceOfN(rapid.Byte(), 1, 32).Draw(rt, "val")
		if err := s.Set(key, v); err != nil {
			rt.Fatal(err)
		}
		if got, err := s.Get(key); !bytes.Equal(got, v) || err != nil {
			rt.Fatalf("Get = %x, %v; want %x", got, err, v)
		}
	})
}
