package faults

import (
	"errors"
	"testing"
)

// TestParse runs in both builds: go test ./internal/faults (the product
// build: every bug refused, none seeded) and go test -tags faults (each bug
// seeds itself and no other).
func TestParse(t *testing.T) {
	if s, err := Parse(""); err != nil || s != (Set{}) {
		t.Fatalf(`Parse("") = %v, %v; want the empty set`, s, err)
	}
	if _, err := Parse("no-such-bug"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("an unknown bug: %v, want ErrUnknown", err)
	}
	for _, b := range All() {
		s, err := Parse(string(b))
		if !Built {
			if !errors.Is(err, ErrNotBuilt) || s.Has(b) {
				t.Errorf("product build: Parse(%s) = %v, %v; want ErrNotBuilt and nothing seeded", b, s, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Parse(%s): %v", b, err)
		}
		for _, other := range All() {
			if s.Has(other) != (other == b) {
				t.Errorf("Parse(%s).Has(%s) = %v", b, other, s.Has(other))
			}
		}
	}
	if (Set{}).Has(StaleReads) {
		t.Error("the empty set seeds a bug")
	}
}
