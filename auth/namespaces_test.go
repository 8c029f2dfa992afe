package auth

import (
	"slices"
	"testing"
)

// TestKeysetNamespaces: the namespaces the keys act in, each once, in
// configuration order; the keys of development mode name none.
func TestKeysetNamespaces(t *testing.T) {
	_, ha := testKey(t, 1)
	_, hb := testKey(t, 2)
	_, hc := testKey(t, 3)
	ks, err := ParseEnv("a:payments:agent:" + ha + ",b:ops:reader:" + hb + ",c:payments:admin:" + hc)
	if err != nil {
		t.Fatal(err)
	}
	if got := ks.Namespaces(); !slices.Equal(got, []string{"payments", "ops"}) {
		t.Errorf("Namespaces() = %q", got)
	}
	for ns, want := range map[string]bool{"payments": true, "ops": true, "default": false, "pay": false, "": false} {
		if got := ks.HasNamespace(ns); got != want {
			t.Errorf("HasNamespace(%q) = %v, want %v", ns, got, want)
		}
	}
	if got := Disabled().Namespaces(); len(got) != 0 {
		t.Errorf("development mode names namespaces %q", got)
	}
}
