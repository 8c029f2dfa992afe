package fsm_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

func TestFingerprintEqualPayloads(t *testing.T) {
	cases := []struct {
		name      string
		a, b      string
		canonical string
	}{
		{"key order", `{"b":1,"a":2}`, `{"a":2,"b":1}`, `{"a":2,"b":1}`},
		{"nested key order", `{"x":{"z":[{"q":1,"p":2}],"y":null}}`, `{"x":{"y":null,"z":[{"p":2,"q":1}]}}`,
			`{"x":{"y":null,"z":[{"p":2,"q":1}]}}`},
		{"whitespace", "{ \"a\" :\t[ 1 ,\n2 ] }\n", `{"a":[1,2]}`, `{"a":[1,2]}`},
		{"1.0 vs 1", `{"n":1.0}`, `{"n":1}`, `{"n":1}`},
		{"1e2 vs 100", `{"n":1e2}`, `{"n":100}`, `{"n":100}`},
		{"1E+2 vs 100.00", `[1E+2]`, `[100.00]`, `[100]`},
		{"-0 vs 0", `[-0]`, `[0]`, `[0]`},
		{"0.5e-6 vs 5e-7", `[0.5e-6]`, `[5e-7]`, `[5e-7]`},
		{"1e21", `[1000000000000000000000]`, `[1e21]`, `[1e+21]`},
		{"escaped vs literal unicode", `["\u00e9\u0041"]`, `["éA"]`, `["éA"]`},
		{"escaped solidus", `["a\/b"]`, `["a/b"]`, `["a/b"]`},
		{"sort by UTF-16 code units", `{"\ud83d\ude00":1,"\ufb01":2}`, `{"😀":1,"ﬁ":2}`, `{"😀":1,"ﬁ":2}`},
		{"empty payload is null", ``, `null`, `null`},
		{"whitespace around a scalar", " 42 ", `42`, `42`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ca, fa, err := fsm.Fingerprint(tool, []byte(tc.a))
			if err != nil {
				t.Fatalf("Fingerprint(%q): %v", tc.a, err)
			}
			cb, fb, err := fsm.Fingerprint(tool, []byte(tc.b))
			if err != nil {
				t.Fatalf("Fingerprint(%q): %v", tc.b, err)
			}
			if fa != fb {
				t.Fatalf("fingerprints differ: %s vs %s", fa, fb)
			}
			eq(t, "canonical a", string(ca), tc.canonical)
			eq(t, "canonical b", string(cb), tc.canonical)
			// The fingerprint is SHA-256 over the JCS form of {"payload":...,"tool":...}.
			doc := `{"payload":` + tc.canonical + `,"tool":"` + tool + `"}`
			sum := sha256.Sum256([]byte(doc))
			eq(t, "fingerprint", fa, hex.EncodeToString(sum[:]))
		})
	}
}

func TestFingerprintNilPayload(t *testing.T) {
	c1, f1, err := fsm.Fingerprint(tool, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, f2, err := fsm.Fingerprint(tool, []byte{})
	if err != nil {
		t.Fatal(err)
	}
	_, f3, err := fsm.Fingerprint(tool, []byte("null"))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "canonical nil", string(c1), "null")
	eq(t, "canonical empty", string(c2), "null")
	if f1 != f2 || f1 != f3 {
		t.Fatalf("nil, empty and null payloads fingerprint differently: %s %s %s", f1, f2, f3)
	}
}

func TestFingerprintDiffers(t *testing.T) {
	base := `{"amount":100,"to":"acct_1"}`
	_, fp, err := fsm.Fingerprint(tool, []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	others := []struct{ tool, payload string }{
		{"email.send", base},
		{tool + " ", base},
		{tool, `{"amount":101,"to":"acct_1"}`},
		{tool, `{"amount":"100","to":"acct_1"}`},
		{tool, `{"amount":100,"to":"acct_1","x":null}`},
		{tool, `{"amount":100}`},
		{tool, `[{"amount":100,"to":"acct_1"}]`},
		{tool, `null`},
		{tool, `{"Amount":100,"to":"acct_1"}`},
		{tool, `{"amount":100,"to":"acct_1 "}`},
	}
	seen := map[string]string{fp: base}
	for _, o := range others {
		_, f, err := fsm.Fingerprint(o.tool, []byte(o.payload))
		if err != nil {
			t.Fatalf("Fingerprint(%q, %s): %v", o.tool, o.payload, err)
		}
		if prev, dup := seen[f]; dup {
			t.Fatalf("(%q, %s) has the fingerprint of %s", o.tool, o.payload, prev)
		}
		seen[f] = o.payload
		if len(f) != 64 {
			t.Fatalf("fingerprint %q is not hex SHA-256", f)
		}
	}
}

func TestFingerprintInvalidJSON(t *testing.T) {
	for _, p := range []string{
		`{`, `{"a":1`, `{"a":1,}`, `[1,]`, `{'a':1}`, `{"a":1}{"b":2}`, `{"a":1} x`, `nul`, `01`, `+1`,
		`1.`, `.5`, `NaN`, `1e400`, `"\ud800"`, `"\udc00"`, "\"\xff\"", `{"a":1,"a":2}`, `   `,
		`{"a":tru}`, `[1 2]`,
	} {
		c, f, err := fsm.Fingerprint(tool, []byte(p))
		if err == nil {
			t.Errorf("Fingerprint(%q) = %s, %s; want an error", p, c, f)
			continue
		}
		if c != nil || f != "" {
			t.Errorf("Fingerprint(%q) returned values with its error", p)
		}
	}
}

// JCS writes <, > and & as they are; Go's JSON encoder would escape them.
func TestFingerprintHTMLCharactersInJCSForm(t *testing.T) {
	payload := `{"q":"<a&b>","z":"\u2028"}`
	canonical, fp, err := fsm.Fingerprint("html<&>", []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "canonical", string(canonical), "{\"q\":\"<a&b>\",\"z\":\"\u2028\"}")
	if bytes.Contains(canonical, []byte(`\u003c`)) || bytes.Contains(canonical, []byte(`\u0026`)) {
		t.Fatalf("canonical form is HTML-escaped: %s", canonical)
	}
	doc := "{\"payload\":{\"q\":\"<a&b>\",\"z\":\"\u2028\"},\"tool\":\"html<&>\"}"
	sum := sha256.Sum256([]byte(doc))
	eq(t, "fingerprint", fp, hex.EncodeToString(sum[:]))
}

func TestFingerprintControlCharacters(t *testing.T) {
	canonical, _, err := fsm.Fingerprint(tool, []byte(`["\u0001\n\t\"\\\u007f"]`))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "canonical", string(canonical), "[\"\\u0001\\n\\t\\\"\\\\\x7f\"]")
}

// FuzzFingerprint: Fingerprint never panics, what it accepts is valid JSON,
// and the canonical form is a fixed point.
func FuzzFingerprint(f *testing.F) {
	for _, p := range []string{
		``, `null`, `{"b":1,"a":[1.0,1e2,-0,"x"]}`, `{"q":"<a&b>"}`, `["\ud83d\ude00","\u2028"]`,
		`{"a":{"b":{"c":[]}}}`, `1e21`, `0.000001`, `1e-7`, `"\u0000"`, `{"a":1,"a":2}`, "\"\xff\"",
		`[1,]`, `123456789012345678901234567890`, `-1.5E-300`, `{"\u00e9":1,"e\u0301":2}`,
	} {
		f.Add(tool, []byte(p))
	}
	f.Add("", []byte(`{}`))
	f.Add("t\xff<", []byte(`[true,false]`))
	f.Fuzz(func(t *testing.T, tl string, payload []byte) {
		canonical, fp, err := fsm.Fingerprint(tl, payload)
		if err != nil {
			if canonical != nil || fp != "" {
				t.Fatalf("values returned with error %v", err)
			}
			return
		}
		if !json.Valid(canonical) {
			t.Fatalf("canonical form %q is not JSON", canonical)
		}
		if len(payload) > 0 && !json.Valid(payload) {
			t.Fatalf("accepted %q, which is not JSON", payload)
		}
		if len(fp) != 64 {
			t.Fatalf("fingerprint %q", fp)
		}
		c2, fp2, err := fsm.Fingerprint(tl, canonical)
		if err != nil {
			t.Fatalf("canonical form %q rejected: %v", canonical, err)
		}
		if !bytes.Equal(c2, canonical) || fp2 != fp {
			t.Fatalf("canonical form is not a fixed point\n%q -> %q\n%s -> %s", canonical, c2, fp, fp2)
		}
		// Whitespace around a value never matters (an empty payload is
		// null, but whitespace alone is not JSON).
		if len(payload) > 0 {
			spaced := append(append([]byte(" \n"), payload...), '\t')
			if _, fp3, err := fsm.Fingerprint(tl, spaced); err != nil || fp3 != fp {
				t.Fatalf("surrounding whitespace changed the fingerprint (%v)", err)
			}
		}
	})
}

func TestFingerprintRejectsInexactIntegers(t *testing.T) {
	// 2^54 is a double that canonical JSON writes with its own digits.
	for _, ok := range []string{`9007199254740992`, `-9007199254740992`, `{"id":12345}`, `1.5e300`, `[1,2]`, `18014398509481984`} {
		if _, _, err := fsm.Fingerprint("t", []byte(ok)); err != nil {
			t.Errorf("Fingerprint(%s) = %v", ok, err)
		}
	}
	// 20000000000000008 is a double too, but canonical JSON writes it as
	// 20000000000000010: another integer for whoever reads the payload.
	for _, bad := range []string{`9007199254740993`, `{"id":123456789012345678901}`, `[-9007199254740993]`,
		`20000000000000008`, `[-20000000000000008]`} {
		if _, _, err := fsm.Fingerprint("t", []byte(bad)); !errors.Is(err, fsm.ErrInexactNumber) {
			t.Errorf("Fingerprint(%s) = %v, want ErrInexactNumber", bad, err)
		}
	}
}
