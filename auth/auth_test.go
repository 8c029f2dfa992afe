package auth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/intentledger/intentd/internal/namespace"
)

// testKey is a fixed API key derived from b.
func testKey(t testing.TB, b byte) (plaintext, hash string) {
	t.Helper()
	p, h, err := GenerateKey(bytes.NewReader(bytes.Repeat([]byte{b}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return p, h
}

func TestGenerateKey(t *testing.T) {
	p, h, err := GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p, KeyPrefix) || len(p) != 46 {
		t.Fatalf("key %q", p)
	}
	sum := sha256.Sum256([]byte(p))
	if h != hex.EncodeToString(sum[:]) || h != HashKey(p) {
		t.Fatalf("hash %s does not match key", h)
	}
	ks, err := Parse([]byte(`{"keys":[{"name":"gen","namespace":"payments","roles":["agent"],"sha256":"` + h + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ks.Authenticate(p)
	if err != nil || got.Name != "gen" || got.Namespace != "payments" {
		t.Fatalf("Authenticate = %+v, %v", got, err)
	}
	p2, _, _ := GenerateKey(rand.Reader)
	if p2 == p {
		t.Fatal("two keys are equal")
	}
	if _, _, err := GenerateKey(iotest.ErrReader(errors.New("no entropy"))); err == nil {
		t.Fatal("GenerateKey with a failing reader succeeded")
	}
	if _, _, err := GenerateKey(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Fatal("GenerateKey with a short reader succeeded")
	}
}

func TestParseErrors(t *testing.T) {
	_, h1 := testKey(t, 1)
	_, h2 := testKey(t, 2)
	key := func(name, ns, roles, hash string) string {
		return `{"name":"` + name + `","namespace":"` + ns + `","roles":` + roles + `,"sha256":"` + hash + `"}`
	}
	cfg := func(keys ...string) string { return `{"keys":[` + strings.Join(keys, ",") + `]}` }
	ok := key("a", "payments", `["agent"]`, h1)
	tests := []struct {
		name, data, want string // want: a fragment of the message
	}{
		{"not JSON", `keys:`, "invalid character"},
		{"empty input", ``, "EOF"},
		{"null", `null`, "no keys"},
		{"no keys member", `{}`, "no keys"},
		{"empty keys", `{"keys":[]}`, "no keys"},
		{"unknown top-level field", `{"keys":[` + ok + `],"key":[]}`, `unknown field "key"`},
		{"misspelt key field", `{"keys":[{"name":"a","namespace":"payments","role":["agent"],"sha256":"` + h1 + `"}]}`, `unknown field "role"`},
		{"trailing data", cfg(ok) + `{}`, "data after"},
		{"roles not a list", cfg(key("a", "payments", `"agent"`, h1)), "cannot unmarshal"},
		{"empty name", cfg(key("", "payments", `["agent"]`, h1)), "name must be"},
		{"name with space", cfg(key("a b", "payments", `["agent"]`, h1)), "name must be"},
		{"name with colon", cfg(key("a:b", "payments", `["agent"]`, h1)), "name must be"},
		{"name too long", cfg(key(strings.Repeat("a", 65), "payments", `["agent"]`, h1)), "name must be"},
		{"duplicate name", cfg(ok, key("a", "payments", `["agent"]`, h2)), "already used by keys[0]"},
		{"empty namespace", cfg(key("a", "", `["agent"]`, h1)), "namespace"},
		{"upper-case namespace", cfg(key("a", "Payments", `["agent"]`, h1)), "namespace"},
		{"namespace starting with dash", cfg(key("a", "-pay", `["agent"]`, h1)), "namespace"},
		{"namespace with dot", cfg(key("a", "pay.ments", `["agent"]`, h1)), "namespace"},
		{"namespace too long", cfg(key("a", strings.Repeat("n", 64), `["agent"]`, h1)), "namespace"},
		{"no roles", cfg(key("a", "payments", `[]`, h1)), "no roles"},
		{"unknown role", cfg(key("a", "payments", `["superuser"]`, h1)), `unknown role "superuser"`},
		{"role case", cfg(key("a", "payments", `["Admin"]`, h1)), `unknown role "Admin"`},
		{"public is not a role", cfg(key("a", "payments", `["public"]`, h1)), `unknown role "public"`},
		{"authenticated is not a role", cfg(key("a", "payments", `["authenticated"]`, h1)), `unknown role "authenticated"`},
		{"settle is not a role", cfg(key("a", "payments", `["settle"]`, h1)), `unknown role "settle"`},
		{"duplicate role", cfg(key("a", "payments", `["agent","agent"]`, h1)), "listed twice"},
		{"short hash", cfg(key("a", "payments", `["agent"]`, h1[:63])), "64 hex digits"},
		{"long hash", cfg(key("a", "payments", `["agent"]`, h1+"0")), "64 hex digits"},
		{"non-hex hash", cfg(key("a", "payments", `["agent"]`, "z"+h1[1:])), "not hex"},
		{"plaintext key instead of hash", cfg(key("a", "payments", `["agent"]`, "ik_"+h1[3:])), "not hex"},
		{"duplicate hash", cfg(ok, key("b", "payments", `["tool"]`, h1)), `same key hash as "a"`},
		{"duplicate hash, other case", cfg(ok, key("b", "payments", `["tool"]`, strings.ToUpper(h1))), `same key hash as "a"`},
		{"oversize", `{"keys":[` + ok + `]}` + strings.Repeat(" ", maxConfigSize), "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks, err := Parse([]byte(tt.data))
			if !errors.Is(err, ErrInvalidConfig) || ks != nil {
				t.Fatalf("Parse = %v, %v; want ErrInvalidConfig", ks, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestParseValid(t *testing.T) {
	pa, ha := testKey(t, 1)
	pb, hb := testKey(t, 2)
	data := `{"keys":[
	  {"name":"agents-prod","namespace":"payments","roles":["agent"],"sha256":"` + strings.ToUpper(ha) + `"},
	  {"name":"ops.team_1","namespace":"default","roles":["approver","admin"],"sha256":"` + hb + `"}
	]}`
	ks, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if ks.Len() != 2 || !slices.Equal(ks.Names(), []string{"agents-prod", "ops.team_1"}) || ks.IsDisabled() {
		t.Fatalf("keyset %v", ks.Names())
	}
	a, err := ks.Authenticate(pa)
	if err != nil || a.Name != "agents-prod" || a.Namespace != "payments" || !slices.Equal(a.Roles, []Role{RoleAgent}) {
		t.Fatalf("a = %+v, %v", a, err)
	}
	b, err := ks.Authenticate(pb)
	if err != nil || b.Name != "ops.team_1" || !slices.Equal(b.Roles, []Role{RoleApprover, RoleAdmin}) {
		t.Fatalf("b = %+v, %v", b, err)
	}
}

func TestParseEnv(t *testing.T) {
	pa, ha := testKey(t, 1)
	pb, hb := testKey(t, 2)
	tests := []struct {
		name  string
		value string
		want  []string // names; nil: an error
	}{
		{"compact, one key", "agents:payments:agent:" + ha, []string{"agents"}},
		{"compact, several roles and keys", "agents:payments:agent:" + ha + ",ops:default:approver+reader:" + hb, []string{"agents", "ops"}},
		{"compact, spaces, newlines, trailing comma", "  agents:payments:agent:" + ha + " ,\n ops:default:admin:" + hb + ",\n", []string{"agents", "ops"}},
		{"JSON", ` {"keys":[{"name":"agents","namespace":"payments","roles":["agent"],"sha256":"` + ha + `"}]}`, []string{"agents"}},
		{"compact, too few fields", "agents:payments:" + ha, nil},
		{"compact, too many fields", "agents:payments:agent:x:" + ha, nil},
		{"compact, empty role", "agents:payments:agent+:" + ha, nil},
		{"compact, unknown role", "agents:payments:root:" + ha, nil},
		{"compact, duplicate name", "a:payments:agent:" + ha + ",a:payments:agent:" + hb, nil},
		{"empty", "  ", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks, err := ParseEnv(tt.value)
			if tt.want == nil {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("ParseEnv = %v, want ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ks.Names(), tt.want) {
				t.Fatalf("names = %v, want %v", ks.Names(), tt.want)
			}
		})
	}
	ks, err := ParseEnv("agents:payments:agent:" + ha + ",ops:default:approver+reader:" + hb)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := ks.Authenticate(pb); err != nil || !slices.Equal(p.Roles, []Role{RoleApprover, RoleReader}) {
		t.Fatalf("ops = %+v, %v", p, err)
	}
	if p, err := ks.Authenticate(pa); err != nil || p.Namespace != "payments" {
		t.Fatalf("agents = %+v, %v", p, err)
	}
}

func TestLoad(t *testing.T) {
	pa, ha := testKey(t, 1)
	pb, hb := testKey(t, 2)
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(path, []byte(`{"keys":[{"name":"file-key","namespace":"payments","roles":["agent"],"sha256":"`+ha+`"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err := Load(path, "env-key:default:admin:"+hb)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ks.Names(), []string{"file-key", "env-key"}) {
		t.Fatalf("names %v", ks.Names())
	}
	for _, p := range []string{pa, pb} {
		if _, err := ks.Authenticate(p); err != nil {
			t.Fatal(err)
		}
	}
	if ks, err := LoadFile(path); err != nil || ks.Len() != 1 {
		t.Fatalf("LoadFile = %v, %v", ks, err)
	}
	if ks, err := Load("", "env-key:default:admin:"+hb); err != nil || ks.Len() != 1 {
		t.Fatalf("Load env only = %v, %v", ks, err)
	}
	if _, err := Load(path, "file-key:default:admin:"+hb); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a name in both: %v", err)
	}
	if _, err := Load(path, "other:default:admin:"+ha); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a hash in both: %v", err)
	}
	if _, err := Load("", " "); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("nothing configured: %v", err)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(bad); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad file: %v", err)
	}
}

func TestPrincipalHas(t *testing.T) {
	all := []Role{RoleAgent, RoleTool, RoleApprover, RoleReconciler, RoleReader, RoleAdmin, Public, Authenticated, Settle, Resolve}
	tests := []struct {
		roles []Role
		has   []Role
	}{
		{nil, []Role{Public}},
		{[]Role{RoleAgent}, []Role{RoleAgent, RoleReader, Public, Authenticated, Settle}},
		{[]Role{RoleTool}, []Role{RoleTool, Public, Authenticated}},
		{[]Role{RoleApprover}, []Role{RoleApprover, RoleReader, Public, Authenticated, Resolve}},
		{[]Role{RoleReconciler}, []Role{RoleReconciler, RoleReader, Public, Authenticated, Settle, Resolve}},
		{[]Role{RoleReader}, []Role{RoleReader, Public, Authenticated}},
		{[]Role{RoleAgent, RoleTool}, []Role{RoleAgent, RoleTool, RoleReader, Public, Authenticated, Settle}},
		{[]Role{RoleAgent, RoleReconciler}, []Role{RoleAgent, RoleReconciler, RoleReader, Public, Authenticated, Settle, Resolve}},
		{[]Role{RoleAdmin}, all},
		{[]Role{"bogus"}, []Role{Public, Authenticated}},
	}
	for _, tt := range tests {
		p := Principal{Roles: tt.roles}
		for _, r := range all {
			if got, want := p.Has(r), slices.Contains(tt.has, r); got != want {
				t.Errorf("%v.Has(%s) = %v, want %v", tt.roles, r, got, want)
			}
		}
		if p.Has("") && !slices.Contains(tt.roles, RoleAdmin) {
			t.Errorf("%v.Has(\"\") = true", tt.roles)
		}
	}
	if dev := devPrincipal(); dev.Namespace != namespace.Default || !dev.Has(RoleAdmin) || len(dev.Roles) != len(Roles()) {
		t.Fatalf("dev principal %+v", dev)
	}
}

func TestAuthenticate(t *testing.T) {
	var plains []string
	var b strings.Builder
	for i := range 5 {
		p, h := testKey(t, byte(i+1))
		plains = append(plains, p)
		fmt.Fprintf(&b, "k%d:ns%d:agent:%s,", i, i, h)
	}
	ks, err := ParseEnv(b.String())
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range plains {
		got, err := ks.Authenticate(p)
		if err != nil || got.Name != fmt.Sprintf("k%d", i) || got.Namespace != fmt.Sprintf("ns%d", i) {
			t.Fatalf("key %d: %+v, %v", i, got, err)
		}
		got.Roles[0] = RoleAdmin // the caller's copy
	}
	if again, _ := ks.Authenticate(plains[0]); again.Has(RoleAdmin) {
		t.Fatal("changing a returned principal changed the keyset")
	}
	unknown, _ := testKey(t, 99)
	for _, bad := range []string{"", unknown, plains[0][:len(plains[0])-1], plains[0] + "A", "ik_short", "Bearer " + plains[0],
		strings.ToUpper(plains[0]), plains[0][len(KeyPrefix):], "ik_" + strings.Repeat("A", maxKeyLen), strings.Replace(plains[0], "_", "/", 1)} {
		if p, err := ks.Authenticate(bad); !errors.Is(err, ErrInvalidCredentials) || p.Name != "" {
			t.Errorf("Authenticate(%q) = %+v, %v", bad, p, err)
		}
	}

	// Development mode and the zero keyset.
	var nilKS *Keyset
	for name, dev := range map[string]*Keyset{"nil": nilKS, "Disabled": Disabled()} {
		if p, err := dev.Authenticate("anything"); err != nil || p.Namespace != namespace.Default || !p.Has(RoleAdmin) || !dev.IsDisabled() {
			t.Errorf("%s: %+v, %v", name, p, err)
		}
	}
	var zero Keyset
	if _, err := zero.Authenticate(plains[0]); !errors.Is(err, ErrInvalidCredentials) || zero.IsDisabled() {
		t.Errorf("zero keyset: %v", err)
	}

	// Replace.
	live := Disabled()
	live.Replace(ks)
	if live.IsDisabled() || live.Len() != 5 {
		t.Fatal("Replace did not adopt the keys")
	}
	if _, err := live.Authenticate(plains[1]); err != nil {
		t.Fatal(err)
	}
	live.Replace(nil)
	if live.IsDisabled() || live.Len() != 0 {
		t.Fatal("Replace(nil) must refuse everything, not enter development mode")
	}
	if _, err := live.Authenticate(plains[1]); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatal("Replace(nil) kept a key")
	}
}

func TestReplaceConcurrently(t *testing.T) {
	pa, ha := testKey(t, 1)
	_, hb := testKey(t, 2)
	withA, err := ParseEnv("a:payments:agent:" + ha)
	if err != nil {
		t.Fatal(err)
	}
	withB, err := ParseEnv("b:payments:agent:" + hb)
	if err != nil {
		t.Fatal(err)
	}
	live := &Keyset{}
	live.Replace(withA)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 500 {
				if p, err := live.Authenticate(pa); err == nil && p.Name != "a" {
					t.Errorf("key a resolved to %q", p.Name)
				}
			}
		})
	}
	for i := range 500 {
		live.Replace([]*Keyset{withA, withB}[i%2])
	}
	wg.Wait()
}

// FuzzParse: neither parser panics, and whatever they accept is a valid
// configuration that survives a round trip.
func FuzzParse(f *testing.F) {
	_, h := testKey(f, 1)
	f.Add(`{"keys":[{"name":"agents-prod","namespace":"payments","roles":["agent"],"sha256":"` + h + `"}]}`)
	f.Add(`{"keys":[{"name":"a","namespace":"b","roles":["admin","tool"],"sha256":"` + strings.ToUpper(h) + `"}]}`)
	f.Add("a:payments:agent+tool:" + h + ",b:x:admin:" + h)
	f.Add(`{"keys":null}`)
	f.Add(`{"keys":[{}]}`)
	f.Add(":::")
	f.Fuzz(func(t *testing.T, data string) {
		for name, parse := range map[string]func(string) (*Keyset, error){
			"Parse": func(s string) (*Keyset, error) { return Parse([]byte(s)) }, "ParseEnv": ParseEnv,
		} {
			ks, err := parse(data)
			if err != nil {
				if ks != nil || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("%s: %v, %v", name, ks, err)
				}
				continue
			}
			if ks.Len() == 0 || ks.IsDisabled() {
				t.Fatalf("%s accepted an empty or disabled keyset", name)
			}
			for _, k := range ks.configs() {
				if !validName(k.Name) || !namespace.Valid(k.Namespace) || len(k.Roles) == 0 || len(k.SHA256) != 64 {
					t.Fatalf("%s accepted %+v", name, k)
				}
				for _, r := range k.Roles {
					if !r.assignable() {
						t.Fatalf("%s accepted role %q", name, r)
					}
				}
			}
			again, err := build(ks.configs())
			if err != nil || !slices.Equal(again.Names(), ks.Names()) {
				t.Fatalf("%s: round trip: %v", name, err)
			}
		}
	})
}

// TestReconcilerRole: reconciler is a role a key may hold, alone or with
// others; it reads, settles any grant (Settle) and resolves (Resolve), and
// admin implies it. An agent settles but does not resolve.
func TestReconcilerRole(t *testing.T) {
	plain, sum, err := GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ParseEnv("ops-reconciler:payments:reconciler:" + sum)
	if err != nil {
		t.Fatalf("a reconciler key: %v", err)
	}
	p, err := ks.Authenticate(plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Role{RoleReconciler, RoleReader, Settle, Resolve} {
		if !p.Has(r) {
			t.Errorf("a reconciler lacks %s", r)
		}
	}
	for _, r := range []Role{RoleAgent, RoleApprover, RoleTool, RoleAdmin} {
		if p.Has(r) {
			t.Errorf("a reconciler has %s", r)
		}
	}
	if admin := (Principal{Roles: []Role{RoleAdmin}}); !admin.Has(RoleReconciler) {
		t.Error("admin does not imply reconciler")
	}
	if agent := (Principal{Roles: []Role{RoleAgent}}); agent.Has(RoleReconciler) || agent.Has(Resolve) {
		t.Error("an agent may settle others' grants or resolve")
	}
	if !slices.Contains(Roles(), RoleReconciler) {
		t.Errorf("Roles() = %v, without reconciler", Roles())
	}
}
