package auth

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestToolsAndKeyPrefixesParse: a key's tools and key_prefixes are read,
// validated and kept through Load's round trip.
func TestToolsAndKeyPrefixesParse(t *testing.T) {
	_, h1 := testKey(t, 1)
	_, h2 := testKey(t, 2)
	for _, tc := range []struct {
		name, entry string
		wantErr     string
	}{
		{"tool key with tools", `{"name":"verifier","namespace":"payments","roles":["tool"],"sha256":"H","tools":["payments.*"]}`, ""},
		{"tools without the tool role", `{"name":"agent","namespace":"payments","roles":["agent"],"sha256":"H","tools":["payments.*"]}`, "no tool role"},
		{"bad tool pattern", `{"name":"verifier","namespace":"payments","roles":["tool"],"sha256":"H","tools":["pay[ments"]}`, "pattern"},
		{"empty tool pattern", `{"name":"verifier","namespace":"payments","roles":["tool"],"sha256":"H","tools":[""]}`, "1 to 256 bytes"},
		{"front end with a prefix", `{"name":"proxy","namespace":"payments","roles":["agent"],"sha256":"H","key_prefixes":["idem:"]}`, ""},
		{"empty prefix", `{"name":"proxy","namespace":"payments","roles":["agent"],"sha256":"H","key_prefixes":[""]}`, "1 to 64 bytes"},
		{"prefix with a space", `{"name":"proxy","namespace":"payments","roles":["agent"],"sha256":"H","key_prefixes":["id em"]}`, "printable"},
		{"prefix twice", `{"name":"proxy","namespace":"payments","roles":["agent"],"sha256":"H","key_prefixes":["a:","a:"]}`, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks, err := Parse([]byte(`{"keys":[` + strings.Replace(tc.entry, `"H"`, `"`+h1+`"`, 1) + `]}`))
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want ErrInvalidConfig mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The round trip through configs (Load merges file and env).
			cfg := ks.configs()
			again, err := build(append(cfg, KeyConfig{Name: "other", Namespace: "payments", Roles: []Role{RoleReader}, SHA256: h2}))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprint(again.configs()[0]), fmt.Sprint(cfg[0]); got != want {
				t.Fatalf("round trip %s, want %s", got, want)
			}
		})
	}
}

// TestReservedPrefix: a key under a prefix another key of the namespace
// reserves is claimable only by that key; other namespaces and
// development mode reserve nothing.
func TestReservedPrefix(t *testing.T) {
	_, h1 := testKey(t, 1)
	_, h2 := testKey(t, 2)
	_, h3 := testKey(t, 3)
	ks, err := build([]KeyConfig{
		{Name: "proxy", Namespace: "payments", Roles: []Role{RoleAgent}, SHA256: h1, KeyPrefixes: []string{"idem:", "mcp:"}},
		{Name: "agent", Namespace: "payments", Roles: []Role{RoleAgent}, SHA256: h2},
		{Name: "elsewhere", Namespace: "other", Roles: []Role{RoleAgent}, SHA256: h3},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ns, name, key string
		reserved      bool
	}{
		{"payments", "agent", "idem:http:K", true},
		{"payments", "agent", "mcp:x", true},
		{"payments", "proxy", "idem:http:K", false},
		{"payments", "agent", "charge:1", false},
		{"payments", "agent", "IDEM:http:K", false}, // keys are case-sensitive: another key
		{"other", "elsewhere", "idem:http:K", false},
	} {
		prefix, reserved := ks.ReservedPrefix(tc.ns, tc.name, tc.key)
		if reserved != tc.reserved || (reserved && !strings.HasPrefix(tc.key, prefix)) {
			t.Errorf("ReservedPrefix(%q, %q, %q) = %q, %v; want reserved %v", tc.ns, tc.name, tc.key, prefix, reserved, tc.reserved)
		}
	}
	if _, reserved := Disabled().ReservedPrefix("default", "dev", "idem:x"); reserved {
		t.Error("development mode reserves nothing")
	}
}

// TestMayVerify: a tool key verifies tokens of the tools its patterns
// match; one without patterns, any tool.
func TestMayVerify(t *testing.T) {
	bound := Principal{Name: "v", Roles: []Role{RoleTool}, Tools: []string{"payments.*", "email.send"}}
	for tool, want := range map[string]bool{"payments.refund": true, "email.send": true, "danger.rm": false, "payments": false} {
		if got := bound.MayVerify(tool); got != want {
			t.Errorf("MayVerify(%q) = %v, want %v", tool, got, want)
		}
	}
	if !(Principal{Name: "v", Roles: []Role{RoleTool}}).MayVerify("anything.at_all") {
		t.Error("a key without tools verifies any tool")
	}
}

// TestPreviousSecrets: a key's previous secrets authenticate as the same
// name (so grants bound to it stay settleable after a rotation) until
// removed; they count once in Len and Names, round-trip through configs,
// change the digest, and must be unique across the configuration.
func TestPreviousSecrets(t *testing.T) {
	newPlain, newHash := testKey(t, 1)
	oldPlain, oldHash := testKey(t, 2)
	otherPlain, otherHash := testKey(t, 3)
	cfg := []KeyConfig{
		{Name: "agents", Namespace: "payments", Roles: []Role{RoleAgent}, SHA256: newHash, PreviousSHA256: []string{oldHash}},
		{Name: "ops", Namespace: "payments", Roles: []Role{RoleAdmin}, SHA256: otherHash},
	}
	ks, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, plain := range []string{newPlain, oldPlain} {
		if p, err := ks.Authenticate(plain); err != nil || p.Name != "agents" || !p.Has(RoleAgent) {
			t.Fatalf("authenticate = %+v, %v", p, err)
		}
	}
	if p, err := ks.Authenticate(otherPlain); err != nil || p.Name != "ops" {
		t.Fatalf("ops = %+v, %v", p, err)
	}
	if ks.Len() != 2 || fmt.Sprint(ks.Names()) != "[agents ops]" {
		t.Fatalf("Len %d, Names %v", ks.Len(), ks.Names())
	}
	if got := ks.configs(); fmt.Sprint(got) != fmt.Sprint(cfg) {
		t.Fatalf("configs %v, want %v", got, cfg)
	}
	rotated := []KeyConfig{cfg[0], cfg[1]}
	rotated[0].PreviousSHA256 = nil
	done, err := build(rotated)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := done.Authenticate(oldPlain); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("the dropped secret still authenticates: %v", err)
	}
	if done.Digest() == ks.Digest() {
		t.Fatal("dropping a previous secret left the digest unchanged")
	}
	for name, bad := range map[string][]KeyConfig{
		"previous is another key's": {{Name: "a", Namespace: "p", Roles: []Role{RoleAgent}, SHA256: newHash, PreviousSHA256: []string{otherHash}},
			{Name: "b", Namespace: "p", Roles: []Role{RoleAgent}, SHA256: otherHash}},
		"previous is its own": {{Name: "a", Namespace: "p", Roles: []Role{RoleAgent}, SHA256: newHash, PreviousSHA256: []string{newHash}}},
		"previous is not hex": {{Name: "a", Namespace: "p", Roles: []Role{RoleAgent}, SHA256: newHash, PreviousSHA256: []string{"zz"}}},
		"too many previous": {{Name: "a", Namespace: "p", Roles: []Role{RoleAgent}, SHA256: newHash,
			PreviousSHA256: []string{oldHash, otherHash, strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 64)}}},
	} {
		if _, err := build(bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
		}
	}
}
