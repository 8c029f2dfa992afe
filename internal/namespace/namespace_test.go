package namespace_test

import (
	"strings"
	"testing"

	"github.com/intentledger/intentd/internal/namespace"
)

func TestValidNamespace(t *testing.T) {
	for ns, want := range map[string]bool{
		namespace.Default:       true,
		"payments":              true,
		"a":                     true,
		"0-team_b":              true,
		strings.Repeat("n", 63): true,
		"":                      false,
		strings.Repeat("n", 64): false,
		"Payments":              false,
		"-pay":                  false,
		"_system":               false, // fsm.SystemNamespace: no key may act in it
		"pay.ments":             false,
		"pay ments":             false,
		"pay\x00":               false,
		"é":                     false,
	} {
		if got := namespace.Valid(ns); got != want {
			t.Errorf("Valid(%q) = %v, want %v", ns, got, want)
		}
	}
}
