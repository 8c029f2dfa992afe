// Package namespace holds the one rule for namespaces, the tenancy unit of
// the ledger: every API key names one, every intent lives in one. The
// ledger refuses any other, auth refuses a key that names any other, and
// intentctl checks it before writing a key.
package namespace

// Default is the namespace of a caller whose credentials name
// none: every request in development mode (auth off).
const Default = "default"

// MaxBytes bounds a namespace's length.
const MaxBytes = 63

// Valid reports whether s is a valid namespace:
// [a-z0-9][a-z0-9_-]{0,62}. It is the one rule: the Service refuses any
// other namespace, and an API key is refused when it is loaded
// (auth.Parse) unless its namespace passes it.
func Valid(s string) bool {
	if s == "" || len(s) > MaxBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= '0' && b <= '9'
		if !alnum && (i == 0 || (b != '_' && b != '-')) {
			return false
		}
	}
	return true
}
