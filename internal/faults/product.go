//go:build !faults

package faults

// Built reports whether this binary carries the seeded bugs.
const Built = false

// Set is the seeded bugs one node runs with: in the product build, none.
type Set struct{}

// Has reports whether b is seeded: never in the product build.
func (Set) Has(Bug) bool { return false }

// Parse refuses every bug in the product build (ErrNotBuilt), and an
// unknown name as in the fault build (ErrUnknown).
func Parse(name string) (Set, error) {
	if name == "" {
		return Set{}, nil
	}
	if _, err := lookup(name); err != nil {
		return Set{}, err
	}
	return Set{}, ErrNotBuilt
}
