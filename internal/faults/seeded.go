//go:build faults

package faults

// Built reports whether this binary carries the seeded bugs.
const Built = true

// Set is the seeded bugs one node runs with; the zero Set has none.
type Set struct{ bug Bug }

// Has reports whether b is seeded.
func (s Set) Has(b Bug) bool { return s.bug != "" && s.bug == b }

// Parse returns the Set that seeds the bug named name (none when name is
// empty).
func Parse(name string) (Set, error) {
	if name == "" {
		return Set{}, nil
	}
	b, err := lookup(name)
	if err != nil {
		return Set{}, err
	}
	return Set{bug: b}, nil
}
