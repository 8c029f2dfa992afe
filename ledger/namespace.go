package ledger

// DefaultNamespace is the namespace of a caller whose credentials name
// none: every request in development mode (auth off).
const DefaultNamespace = "default"

// MaxNamespaceBytes bounds a namespace's length.
const MaxNamespaceBytes = 63

// ValidNamespace reports whether s is a valid namespace:
// [a-z0-9][a-z0-9_-]{0,62}. It is the one rule: the Service refuses any
// other namespace, and an API key is refused when it is loaded
// (auth.Parse) unless its namespace passes it.
func ValidNamespace(s string) bool {
	if s == "" || len(s) > MaxNamespaceBytes {
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
