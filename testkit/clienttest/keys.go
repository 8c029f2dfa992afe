package clienttest

import (
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/intentledger/intentd/auth"
)

// AgentKeys makes a keyset of agent keys of namespace default, one per
// name with the key_prefixes it maps to, for WithAuth; it returns the
// keyset with each key's plaintext by name.
func AgentKeys(t testing.TB, prefixes map[string][]string) (*auth.Keyset, map[string]string) {
	t.Helper()
	plain := map[string]string{}
	var fc auth.FileConfig
	for name, pre := range prefixes {
		p, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		plain[name] = p
		fc.Keys = append(fc.Keys, auth.KeyConfig{Name: name, Namespace: "default", Roles: []auth.Role{auth.RoleAgent}, SHA256: sum, KeyPrefixes: pre})
	}
	b, err := json.Marshal(fc)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := auth.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return ks, plain
}
