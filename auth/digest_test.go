package auth

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// mustParseFile parses a keys file of the JSON entries given.
func mustParseFile(t *testing.T, entries ...string) *Keyset {
	t.Helper()
	ks, err := Parse([]byte(`{"keys":[` + strings.Join(entries, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestDigest(t *testing.T) {
	_, h1 := testKey(t, 1)
	_, h2 := testKey(t, 2)
	_, h3 := testKey(t, 3)
	a := fmt.Sprintf(`{"name":"a","namespace":"payments","roles":["agent","approver"],"sha256":%q}`, h1)
	aRolesSwapped := fmt.Sprintf(`{"name":"a","namespace":"payments","roles":["approver","agent"],"sha256":%q}`, h1)
	aUpper := fmt.Sprintf(`{"name":"a","namespace":"payments","roles":["agent","approver"],"sha256":%q}`, strings.ToUpper(h1))
	aOtherHash := fmt.Sprintf(`{"name":"a","namespace":"payments","roles":["agent","approver"],"sha256":%q}`, h3)
	aOtherNS := fmt.Sprintf(`{"name":"a","namespace":"refunds","roles":["agent","approver"],"sha256":%q}`, h1)
	aOtherRoles := fmt.Sprintf(`{"name":"a","namespace":"payments","roles":["agent"],"sha256":%q}`, h1)
	b := fmt.Sprintf(`{"name":"b","namespace":"payments","roles":["tool"],"sha256":%q,"tools":["x.*","a.*"]}`, h2)
	bToolsSwapped := fmt.Sprintf(`{"name":"b","namespace":"payments","roles":["tool"],"sha256":%q,"tools":["a.*","x.*"]}`, h2)
	bOtherTools := fmt.Sprintf(`{"name":"b","namespace":"payments","roles":["tool"],"sha256":%q,"tools":["a.*"]}`, h2)
	bPrefix := fmt.Sprintf(`{"name":"b","namespace":"payments","roles":["tool"],"sha256":%q,"tools":["x.*","a.*"],"key_prefixes":["idem:"]}`, h2)

	base := mustParseFile(t, a, b).Digest()
	if len(base) != 64 {
		t.Fatalf("digest %q is not 64 hex digits", base)
	}
	cases := []struct {
		name    string
		entries []string
		same    bool
	}{
		{"same file", []string{a, b}, true},
		{"other order", []string{b, a}, true},
		{"roles in another order", []string{aRolesSwapped, b}, true},
		{"tools in another order", []string{a, bToolsSwapped}, true},
		{"hash in upper case", []string{aUpper, b}, true},
		{"other hash", []string{aOtherHash, b}, false},
		{"other namespace", []string{aOtherNS, b}, false},
		{"other roles", []string{aOtherRoles, b}, false},
		{"other tools", []string{a, bOtherTools}, false},
		{"a key prefix more", []string{a, bPrefix}, false},
		{"a key fewer", []string{a}, false},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustParseFile(t, tt.entries...).Digest(); (got == base) != tt.same {
				t.Fatalf("digest %s vs %s: want same=%v", got, base, tt.same)
			}
		})
	}
	if d := Disabled().Digest(); d != "off" {
		t.Fatalf("development mode digest %q", d)
	}
	// The digest of what Load merges from a file and the environment is
	// the digest of the same keys from one file.
	env, err := ParseEnv("a:payments:approver+agent:" + h1)
	if err != nil {
		t.Fatal(err)
	}
	if env.Digest() != mustParseFile(t, a).Digest() {
		t.Fatal("the compact form and the JSON form of one key digest differently")
	}
}

func TestCompareAndSnapshot(t *testing.T) {
	_, h1 := testKey(t, 1)
	_, h2 := testKey(t, 2)
	_, h3 := testKey(t, 3)
	entry := func(name, roles, hash string) string {
		return fmt.Sprintf(`{"name":%q,"namespace":"default","roles":[%s],"sha256":%q}`, name, roles, hash)
	}
	old := mustParseFile(t, entry("keep", `"agent"`, h1), entry("gone", `"agent"`, h2))
	next := mustParseFile(t, entry("keep", `"agent","approver"`, h1), entry("new", `"agent"`, h3))
	c := Compare(old, next)
	if !slices.Equal(c.Added, []string{"new"}) || !slices.Equal(c.Removed, []string{"gone"}) || !slices.Equal(c.Changed, []string{"keep"}) {
		t.Fatalf("compare: %+v", c)
	}
	if !Compare(old, old).Empty() || Compare(old, next).Empty() {
		t.Fatal("Empty")
	}
	// A snapshot keeps the keys it was taken with across a Replace.
	live := mustParseFile(t, entry("keep", `"agent"`, h1))
	snap := live.Snapshot()
	live.Replace(next)
	if !slices.Equal(snap.Names(), []string{"keep"}) || snap.Digest() == live.Digest() || live.Digest() != next.Digest() {
		t.Fatalf("snapshot %v (%s), live %v (%s)", snap.Names(), snap.Digest(), live.Names(), live.Digest())
	}
}
