package token

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

var b64 = base64.RawURLEncoding

// testNow is the verifier's clock in these tests.
var testNow = time.Unix(1_700_000_000, 0)

// fixedKey returns a key whose seed is b repeated.
func fixedKey(t testing.TB, id string, b byte) SigningKey {
	t.Helper()
	k, err := NewSigningKey(bytes.NewReader(bytes.Repeat([]byte{b}, ed25519.SeedSize)), id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testClaims() Claims {
	return Claims{
		Namespace: "payments", Key: "refund:ord_98231", Fingerprint: strings.Repeat("ab", 32),
		FencingToken: 1042, Owner: "agent-7/host-a/41ab", IssuedAt: testNow.Unix() - 60, Expires: testNow.Unix() + 840,
	}
}

func mustSign(t testing.TB, k SigningKey, c Claims) string {
	t.Helper()
	s, err := Sign(k, c)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return s
}

func mustLookup(t testing.TB, keys ...SigningKey) func(string) (ed25519.PublicKey, bool) {
	t.Helper()
	l, err := KeyLookup(keys)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// parts splits a token into its decoded header, payload and signature.
func parts(t testing.TB, s string) (hdr, payload, sig []byte) {
	t.Helper()
	p := strings.Split(strings.TrimPrefix(s, Prefix), ".")
	if len(p) != 3 {
		t.Fatalf("token %q has %d parts", s, len(p))
	}
	var out [3][]byte
	for i := range p {
		b, err := b64.DecodeString(p[i])
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out[0], out[1], out[2]
}

// assemble builds a token from raw parts.
func assemble(hdr, payload, sig []byte) string {
	return Prefix + b64.EncodeToString(hdr) + "." + b64.EncodeToString(payload) + "." + b64.EncodeToString(sig)
}

// signRaw signs arbitrary header and payload bytes with k, to build tokens
// that are authentic but not what Sign would write.
func signRaw(t testing.TB, k SigningKey, hdr, payload string) string {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(k.Seed)
	input := b64.EncodeToString([]byte(hdr)) + "." + b64.EncodeToString([]byte(payload))
	return Prefix + input + "." + b64.EncodeToString(ed25519.Sign(priv, []byte(input)))
}

func wirePayload(t testing.TB, iss string, c Claims) string {
	t.Helper()
	b, err := json.Marshal(wireClaims{Issuer: iss, Claims: c})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSignVerifyRoundTrip(t *testing.T) {
	k := fixedKey(t, "k1", 1)
	lookup := mustLookup(t, k)
	base := testClaims()
	tests := []struct {
		name string
		mut  func(*Claims)
	}{
		{"typical", func(*Claims) {}},
		{"max fencing token", func(c *Claims) { c.FencingToken = ^uint64(0) }},
		{"zero fencing token", func(c *Claims) { c.FencingToken = 0 }},
		{"unicode and quotes in key and owner", func(c *Claims) { c.Key = `email:"ticket"/4412 ✉ <&>`; c.Owner = "host/π/\u2028" }},
		{"256-byte key", func(c *Claims) { c.Key = strings.Repeat("k", 256) }},
		{"issued at zero", func(c *Claims) { c.IssuedAt = 0 }},
		{"expires next second", func(c *Claims) { c.Expires = testNow.Unix() + 1 }},
		{"audience", func(c *Claims) { c.Tool = "payments.refund" }},
		{"no audience (signed before tokens named their tool)", func(c *Claims) { c.Tool = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.mut(&c)
			s := mustSign(t, k, c)
			if !strings.HasPrefix(s, Prefix) || len(s) > MaxSize {
				t.Fatalf("token %q", s)
			}
			got, err := Verify(s, lookup, testNow)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got != c {
				t.Fatalf("claims = %+v, want %+v", got, c)
			}
			kid, parsed, err := Parse(s)
			if err != nil || kid != "k1" || parsed != c {
				t.Fatalf("Parse = %q, %+v, %v", kid, parsed, err)
			}
		})
	}
}

func TestSignIsDeterministic(t *testing.T) {
	k1, k2 := fixedKey(t, "k1", 1), fixedKey(t, "k2", 2)
	c := testClaims()
	a, b := mustSign(t, k1, c), mustSign(t, k1, c)
	if a != b {
		t.Fatalf("same key and claims gave two tokens:\n%s\n%s", a, b)
	}
	// A copy of the key (as a replica rebuilds it from the log) signs the
	// same bytes.
	replica := SigningKey{ID: k1.ID, Seed: append([]byte(nil), k1.Seed...)}
	if got := mustSign(t, replica, c); got != a {
		t.Fatalf("replica key gave a different token")
	}
	other := c
	other.FencingToken++
	if mustSign(t, k1, other) == a {
		t.Fatal("different claims gave the same token")
	}
	if mustSign(t, k2, c) == a {
		t.Fatal("different key gave the same token")
	}
}

// TestKnownAnswer pins the wire format. The key is RFC 8032's test 1 key,
// whose public half RFC 8037 appendix A.2 gives as a JWK; the golden token
// was also checked with an independent Ed25519 implementation (Python
// cryptography). If this golden
// string changes, tokens re-sent after an upgrade differ from the ones
// first handed out: treat it as a format change.
func TestKnownAnswer(t *testing.T) {
	seed, _ := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	k := SigningKey{ID: "rfc8037", Seed: seed}
	jwks, err := JWKS([]SigningKey{k})
	if err != nil {
		t.Fatal(err)
	}
	const wantJWKS = `{"keys":[{"use":"sig","kty":"OKP","kid":"rfc8037","crv":"Ed25519","alg":"EdDSA","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`
	if string(jwks) != wantJWKS {
		t.Fatalf("JWKS =\n%s\nwant\n%s", jwks, wantJWKS)
	}
	c := Claims{Namespace: "default", Key: "charge:order-91", Fingerprint: "ab", FencingToken: 1042, Owner: "agent-7", IssuedAt: 1700000000, Expires: 1700000900}
	s := mustSign(t, k, c)
	hdr, payload, _ := parts(t, s)
	if want := `{"alg":"EdDSA","kid":"rfc8037","typ":"gex+jwt"}`; string(hdr) != want {
		t.Fatalf("header = %s, want %s", hdr, want)
	}
	if want := `{"iss":"intentd","ns":"default","key":"charge:order-91","fp":"ab","fence":1042,"owner":"agent-7","iat":1700000000,"exp":1700000900}`; string(payload) != want {
		t.Fatalf("payload = %s, want %s", payload, want)
	}
	const golden = "gex_eyJhbGciOiJFZERTQSIsImtpZCI6InJmYzgwMzciLCJ0eXAiOiJnZXgrand0In0." +
		"eyJpc3MiOiJpbnRlbnRkIiwibnMiOiJkZWZhdWx0Iiwia2V5IjoiY2hhcmdlOm9yZGVyLTkxIiwiZnAiOiJhYiIsImZlbmNlIjoxMDQyLCJvd25lciI6ImFnZW50LTciLCJpYXQiOjE3MDAwMDAwMDAsImV4cCI6MTcwMDAwMDkwMH0." +
		"_xK6QKmtkqHkrxNZSEx0erRoRVwidWmXdFMEWYM_ixyCatRE2jMVHKmFAvvxtMqkYSdbob4v6lnEhdYvJUmmAQ"
	if s != golden {
		t.Fatalf("token =\n%s\nwant\n%s", s, golden)
	}
}

// TestAudience pins how a token names its tool: "aud", a single string
// right after "iss" (RFC 7519 allows a string), left out when empty so a
// token without a tool is byte for byte what Sign wrote before tokens
// named their tool (TestKnownAnswer). The golden signature was checked
// with an independent Ed25519 implementation (Python cryptography). An
// "aud" that is not a string is not a token Sign could have written.
func TestAudience(t *testing.T) {
	seed, _ := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	k := SigningKey{ID: "rfc8037", Seed: seed}
	c := Claims{Tool: "stripe.charge", Namespace: "default", Key: "charge:order-91", Fingerprint: "ab", FencingToken: 1042,
		Owner: "agent-7", IssuedAt: 1700000000, Expires: 1700000900}
	s := mustSign(t, k, c)
	_, payload, _ := parts(t, s)
	if want := `{"iss":"intentd","aud":"stripe.charge","ns":"default","key":"charge:order-91","fp":"ab","fence":1042,"owner":"agent-7","iat":1700000000,"exp":1700000900}`; string(payload) != want {
		t.Fatalf("payload = %s, want %s", payload, want)
	}
	const golden = "gex_eyJhbGciOiJFZERTQSIsImtpZCI6InJmYzgwMzciLCJ0eXAiOiJnZXgrand0In0." +
		"eyJpc3MiOiJpbnRlbnRkIiwiYXVkIjoic3RyaXBlLmNoYXJnZSIsIm5zIjoiZGVmYXVsdCIsImtleSI6ImNoYXJnZTpvcmRlci05MSIsImZwIjoiYWIiLCJmZW5jZSI6MTA0Miwib3duZXIiOiJhZ2VudC03IiwiaWF0IjoxNzAwMDAwMDAwLCJleHAiOjE3MDAwMDA5MDB9." +
		"1KVdSeYckg582NqBU7i83_Cf6V4_Pn5D5mwVQ45Fyj1O3E7ng-xJLgFJhtogoX6xnvD4NvlGmtj1G-9f2fzNCg"
	if s != golden {
		t.Fatalf("token =\n%s\nwant\n%s", s, golden)
	}
	got, err := Verify(s, mustLookup(t, k), time.Unix(1700000000, 0))
	if err != nil || got != c {
		t.Fatalf("Verify = %+v, %v", got, err)
	}
	for _, tt := range []struct {
		tool string
		want bool
	}{{"stripe.charge", true}, {"stripe.refund", false}, {"stripe.*", false}, {"", false}} {
		if got.ForTool(tt.tool) != tt.want {
			t.Errorf("ForTool(%q) = %v, want %v", tt.tool, !tt.want, tt.want)
		}
	}
	noAud := c
	noAud.Tool = ""
	if noAud.ForTool("") {
		t.Error("a token without an audience is for the empty tool")
	}

	for name, aud := range map[string]string{
		"array":  `["stripe.charge"]`,
		"number": `7`,
		"object": `{"tool":"stripe.charge"}`,
	} {
		payload := `{"iss":"intentd","aud":` + aud + `,"ns":"default","key":"k","fp":"ab","fence":1,"owner":"o","iat":1700000000,"exp":1700000900}`
		tok := signRaw(t, k, `{"alg":"EdDSA","kid":"rfc8037","typ":"gex+jwt"}`, payload)
		if _, err := Verify(tok, mustLookup(t, k), time.Unix(1700000000, 0)); !errors.Is(err, ErrMalformed) {
			t.Errorf("aud %s: %v, want ErrMalformed", name, err)
		}
	}
}

func TestVerifyRejects(t *testing.T) {
	k1, k2, k3 := fixedKey(t, "k1", 1), fixedKey(t, "k2", 2), fixedKey(t, "k3", 3)
	lookup := mustLookup(t, k1, k2)
	c := testClaims()
	good := mustSign(t, k1, c)
	hdr, payload, sig := parts(t, good)
	pub1, _ := k1.PublicKey()

	otherClaims := c
	otherClaims.FencingToken++
	otherPayload := []byte(wirePayload(t, Issuer, otherClaims))

	flipped := append([]byte(nil), sig...)
	flipped[10] ^= 0x01

	// The signature's last base64 character carries 4 unused bits: a
	// lenient decoder reads the same bytes from a different spelling.
	nonCanonical := good[:len(good)-1] + string(b64Alphabet[strings.IndexByte(b64Alphabet, good[len(good)-1])^1])
	if a, b := mustLenient(t, good), mustLenient(t, nonCanonical); !bytes.Equal(a, b) {
		t.Fatal("test setup: non-canonical spelling decodes differently")
	}

	hs256 := func() string { // key confusion: HMAC keyed with the public key
		input := b64.EncodeToString([]byte(`{"alg":"HS256","kid":"k1","typ":"gex+jwt"}`)) + "." + b64.EncodeToString(payload)
		m := hmac.New(sha256.New, pub1)
		m.Write([]byte(input))
		return Prefix + input + "." + b64.EncodeToString(m.Sum(nil))
	}()
	hdrK2 := []byte(strings.Replace(string(hdr), `"kid":"k1"`, `"kid":"k2"`, 1))

	tests := []struct {
		name   string
		tok    string
		lookup func(string) (ed25519.PublicKey, bool)
		want   error
	}{
		{"empty", "", lookup, ErrMalformed},
		{"prefix only", Prefix, lookup, ErrMalformed},
		{"no prefix", strings.TrimPrefix(good, Prefix), lookup, ErrMalformed},
		{"other prefix", "gey_" + strings.TrimPrefix(good, Prefix), lookup, ErrMalformed},
		{"oversize", good + strings.Repeat("A", MaxSize), lookup, ErrMalformed},
		{"two parts", Prefix + b64.EncodeToString(hdr) + "." + b64.EncodeToString(payload), lookup, ErrMalformed},
		{"four parts", good + ".AAAA", lookup, ErrMalformed},
		{"empty signature", Prefix + b64.EncodeToString(hdr) + "." + b64.EncodeToString(payload) + ".", lookup, ErrMalformed},
		{"short signature", assemble(hdr, payload, sig[:63]), lookup, ErrMalformed},
		{"newline inside", good[:20] + "\n" + good[20:], lookup, ErrMalformed},
		{"trailing space", good + " ", lookup, ErrMalformed},
		{"base64 padding", good + "==", lookup, ErrMalformed},
		{"std base64 alphabet", Prefix + strings.NewReplacer("-", "+", "_", "/").Replace(strings.TrimPrefix(good, Prefix)), lookup, ErrMalformed},
		{"non-canonical base64", nonCanonical, lookup, ErrMalformed},
		{"JWS JSON serialization", Prefix + `{"payload":"` + b64.EncodeToString(payload) + `","protected":"` + b64.EncodeToString(hdr) + `","signature":"` + b64.EncodeToString(sig) + `"}`, lookup, ErrMalformed},
		{"alg none, no signature", Prefix + b64.EncodeToString([]byte(`{"alg":"none","kid":"k1","typ":"gex+jwt"}`)) + "." + b64.EncodeToString(payload) + ".", lookup, ErrMalformed},
		{"alg none, old signature", assemble([]byte(`{"alg":"none","kid":"k1","typ":"gex+jwt"}`), payload, sig), lookup, ErrMalformed},
		{"alg HS256 keyed with the public key", hs256, lookup, ErrMalformed},
		{"alg ES256", assemble([]byte(`{"alg":"ES256","kid":"k1","typ":"gex+jwt"}`), payload, sig), lookup, ErrMalformed},
		{"alg case", signRaw(t, k1, `{"alg":"eddsa","kid":"k1","typ":"gex+jwt"}`, string(payload)), lookup, ErrMalformed},
		{"header not JSON", assemble([]byte("not json"), payload, sig), lookup, ErrMalformed},
		{"payload not JSON", signRaw(t, k1, string(hdr), "not json"), lookup, ErrMalformed},
		// Authentic (signed by k1) but not what Sign writes.
		{"embedded jwk header", signRaw(t, k1, `{"alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"`+b64.EncodeToString(pub1)+`"},"kid":"k1","typ":"gex+jwt"}`, string(payload)), lookup, ErrMalformed},
		{"crit header", signRaw(t, k1, `{"alg":"EdDSA","crit":["b64"],"b64":false,"kid":"k1","typ":"gex+jwt"}`, string(payload)), lookup, ErrMalformed},
		{"upper-case ALG duplicate", signRaw(t, k1, `{"alg":"EdDSA","ALG":"none","kid":"k1","typ":"gex+jwt"}`, string(payload)), lookup, ErrMalformed},
		{"typ JWT", signRaw(t, k1, `{"alg":"EdDSA","kid":"k1","typ":"JWT"}`, string(payload)), lookup, ErrMalformed},
		{"no typ", signRaw(t, k1, `{"alg":"EdDSA","kid":"k1"}`, string(payload)), lookup, ErrMalformed},
		{"no kid", signRaw(t, k1, `{"alg":"EdDSA","typ":"gex+jwt"}`, string(payload)), lookup, ErrMalformed},
		{"other issuer", signRaw(t, k1, string(hdr), wirePayload(t, "someone-else", c)), lookup, ErrMalformed},
		{"claims without owner", signRaw(t, k1, string(hdr), strings.Replace(string(payload), `"owner"`, `"0wner"`, 1)), lookup, ErrMalformed},
		{"trailing data after claims", signRaw(t, k1, string(hdr), string(payload)+"{}"), lookup, ErrMalformed},
		// Lookups.
		{"unknown kid", mustSign(t, k3, c), lookup, ErrUnknownKey},
		{"nil lookup", good, nil, ErrUnknownKey},
		// Signatures.
		{"tampered payload", assemble(hdr, otherPayload, sig), lookup, ErrSignature},
		{"tampered signature", assemble(hdr, payload, flipped), lookup, ErrSignature},
		{"tampered header: kid of another known key", assemble(hdrK2, payload, sig), lookup, ErrSignature},
		{"wrong key under the kid", good, func(string) (ed25519.PublicKey, bool) { p, _ := k2.PublicKey(); return p, true }, ErrSignature},
		{"signed by k3 claiming to be k1", signRaw(t, k3, string(hdr), string(payload)), lookup, ErrSignature},
		{"zero signature", assemble(hdr, payload, make([]byte, 64)), lookup, ErrSignature},
		// Lookup returning junk.
		{"lookup returns short key", good, func(string) (ed25519.PublicKey, bool) { return ed25519.PublicKey{1, 2}, true }, ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Verify(tt.tok, tt.lookup, testNow)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify error = %v, want %v", err, tt.want)
			}
			for _, other := range []error{ErrMalformed, ErrUnknownKey, ErrSignature, ErrExpired, ErrInvalidKey} {
				if other != tt.want && errors.Is(err, other) {
					t.Fatalf("Verify error %v is also %v", err, other)
				}
			}
			if got != (Claims{}) {
				t.Fatalf("claims returned with %v: %+v", err, got)
			}
		})
	}
	if _, err := Verify(good, lookup, testNow); err != nil {
		t.Fatalf("the untampered token: %v", err)
	}
}

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func mustLenient(t *testing.T, s string) []byte {
	t.Helper()
	p := strings.Split(s, ".")
	b, err := b64.DecodeString(p[len(p)-1])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyExpired(t *testing.T) {
	k := fixedKey(t, "k1", 1)
	lookup := mustLookup(t, k)
	c := testClaims()
	s := mustSign(t, k, c)
	exp := time.Unix(c.Expires, 0)
	tests := []struct {
		name    string
		now     time.Time
		expired bool
	}{
		{"well before", time.Unix(c.IssuedAt, 0), false},
		{"last valid nanosecond", exp.Add(-time.Nanosecond), false},
		{"at exp", exp, true},
		{"long after", exp.Add(24 * time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Verify(s, lookup, tt.now)
			if tt.expired != errors.Is(err, ErrExpired) || (!tt.expired && err != nil) {
				t.Fatalf("Verify at %v: %v", tt.now, err)
			}
			if got != c {
				t.Fatalf("claims = %+v, want %+v (returned alongside ErrExpired too)", got, c)
			}
		})
	}
	// An expired forgery is a forgery, not an expired token.
	forged := assemble(func() []byte { h, _, _ := parts(t, s); return h }(), []byte(wirePayload(t, Issuer, c)), make([]byte, 64))
	if got, err := Verify(forged, lookup, exp.Add(time.Hour)); !errors.Is(err, ErrSignature) || got != (Claims{}) {
		t.Fatalf("expired forgery: %+v, %v", got, err)
	}
}

func TestKeyRotation(t *testing.T) {
	old, cur := fixedKey(t, "2026-01", 1), fixedKey(t, "2026-02", 2)
	c := testClaims()
	oldTok, curTok := mustSign(t, old, c), mustSign(t, cur, c)
	steps := []struct {
		name      string
		keys      []SigningKey
		oldWant   error
		curWant   error
		viaJWKSOK bool
	}{
		{"before rotation", []SigningKey{old}, nil, ErrUnknownKey, true},
		{"both published", []SigningKey{cur, old}, nil, nil, true},
		{"old dropped", []SigningKey{cur}, ErrUnknownKey, nil, true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			jwks, err := JWKS(st.keys)
			if err != nil {
				t.Fatal(err)
			}
			fromJWKS, err := LookupFromJWKS(jwks)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range []func(string) (ed25519.PublicKey, bool){mustLookup(t, st.keys...), fromJWKS} {
				if _, err := Verify(oldTok, l, testNow); !errors.Is(err, st.oldWant) || (st.oldWant == nil && err != nil) {
					t.Fatalf("old token: %v, want %v", err, st.oldWant)
				}
				if _, err := Verify(curTok, l, testNow); !errors.Is(err, st.curWant) || (st.curWant == nil && err != nil) {
					t.Fatalf("current token: %v, want %v", err, st.curWant)
				}
			}
		})
	}
}

func TestJWKSOffline(t *testing.T) {
	k1, k2 := fixedKey(t, "k1", 1), fixedKey(t, "k2", 2)
	data, err := JWKS([]SigningKey{k1, k2})
	if err != nil {
		t.Fatal(err)
	}
	// The published set is standard and holds no secret.
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil || len(set.Keys) != 2 {
		t.Fatalf("set %s: %v", data, err)
	}
	for i, k := range []SigningKey{k1, k2} {
		pub, _ := k.PublicKey()
		want := map[string]any{"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": k.ID, "x": b64.EncodeToString(pub)}
		if fmt.Sprint(set.Keys[i]) != fmt.Sprint(want) {
			t.Fatalf("key %d = %v, want %v", i, set.Keys[i], want)
		}
	}
	lookup, err := LookupFromJWKS(data)
	if err != nil {
		t.Fatal(err)
	}
	c := testClaims()
	for _, k := range []SigningKey{k1, k2} {
		got, err := Verify(mustSign(t, k, c), lookup, testNow)
		if err != nil || got != c {
			t.Fatalf("offline verify with %s: %+v, %v", k.ID, got, err)
		}
	}
	// The lookup owns its keys: changing the input afterwards changes nothing.
	for i := range data {
		data[i] = 0
	}
	if _, err := Verify(mustSign(t, k1, c), lookup, testNow); err != nil {
		t.Fatal(err)
	}
}

func TestLookupFromJWKS(t *testing.T) {
	k1 := fixedKey(t, "k1", 1)
	pub, _ := k1.PublicKey()
	x := b64.EncodeToString(pub)
	okp := func(extra string) string {
		return `{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"` + x + `"` + extra + `}`
	}
	tests := []struct {
		name string
		data string
		want error // nil: k1 verifies
	}{
		{"minimal key", `{"keys":[` + okp("") + `]}`, nil},
		{"skips other key types", `{"keys":[{"kty":"RSA","kid":"r","n":"AQAB","e":"AQAB"},{"kty":"EC","crv":"P-256","kid":"e"},{"kty":"OKP","crv":"X25519","kid":"x","x":"` + x + `"},` + okp("") + `]}`, nil},
		{"skips encryption keys", `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","use":"enc","x":"` + x + `"}]}`, ErrInvalidKey},
		{"not JSON", `nope`, ErrInvalidKey},
		{"no keys member", `{}`, ErrInvalidKey},
		{"empty set", `{"keys":[]}`, ErrInvalidKey},
		{"private key published", `{"keys":[` + okp(`,"d":"`+b64.EncodeToString(k1.Seed)+`"`) + `]}`, ErrInvalidKey},
		{"duplicate kid", `{"keys":[` + okp("") + `,` + okp("") + `]}`, ErrInvalidKey},
		{"missing kid", `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}]}`, ErrInvalidKey},
		{"short x", `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"AAAA"}]}`, ErrInvalidKey},
		{"x not base64", `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","x":"!!"}]}`, ErrInvalidKey},
		{"oversize", `{"keys":[` + okp("") + `],"pad":"` + strings.Repeat("a", maxJWKSSize) + `"}`, ErrInvalidKey},
	}
	tok := mustSign(t, k1, testClaims())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup, err := LookupFromJWKS([]byte(tt.data))
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %v", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(tok, lookup, testNow); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestParseIsUnverified(t *testing.T) {
	forger := fixedKey(t, "k1", 9) // claims the real key's id
	c := testClaims()
	forged := mustSign(t, forger, c)
	kid, got, err := Parse(forged)
	if err != nil || kid != "k1" || got != c {
		t.Fatalf("Parse(forged) = %q, %+v, %v", kid, got, err)
	}
	if _, err := Verify(forged, mustLookup(t, fixedKey(t, "k1", 1)), testNow); !errors.Is(err, ErrSignature) {
		t.Fatalf("Verify(forged) = %v", err)
	}
	for _, bad := range []string{"", "gex_", "gex_a.b.c", Prefix + b64.EncodeToString([]byte(`{"alg":"none"}`)) + ".e30."} {
		if _, _, err := Parse(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("Parse(%q) = %v", bad, err)
		}
	}
}

func TestSigningKeys(t *testing.T) {
	k, err := NewSigningKey(rand.Reader, "k1")
	if err != nil || len(k.Seed) != ed25519.SeedSize {
		t.Fatalf("NewSigningKey = %v, %v", k, err)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", k, k, k, k); strings.Contains(s, hex.EncodeToString(k.Seed)) || strings.Contains(s, fmt.Sprint(k.Seed)) {
		t.Fatalf("formatting leaks the seed: %s", s)
	}
	if _, err := NewSigningKey(iotest.ErrReader(errors.New("no entropy")), "k1"); err == nil {
		t.Fatal("NewSigningKey with a failing reader succeeded")
	}
	if _, err := NewSigningKey(bytes.NewReader(make([]byte, 31)), "k1"); err == nil {
		t.Fatal("NewSigningKey with a short reader succeeded")
	}
	for _, id := range []string{"", "-k", "k 1", "k/1", `k"1`, strings.Repeat("k", 65), "ключ"} {
		if _, err := NewSigningKey(rand.Reader, id); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("NewSigningKey(id %q) = %v", id, err)
		}
	}
	for _, id := range []string{"k", "2026-07-01T00:00:00Z", "a.b_c-d:e", strings.Repeat("k", 64)} {
		if _, err := NewSigningKey(rand.Reader, id); err != nil {
			t.Errorf("NewSigningKey(id %q) = %v", id, err)
		}
	}

	c := testClaims()
	for _, bad := range []SigningKey{{ID: "k1"}, {ID: "k1", Seed: make([]byte, 31)}, {ID: "k1", Seed: make([]byte, 64)}, {ID: "", Seed: make([]byte, 32)}} {
		if _, err := Sign(bad, c); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Sign with %v = %v", bad, err)
		}
		if _, err := bad.PublicKey(); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("PublicKey of %v = %v", bad, err)
		}
	}
	if _, err := KeyLookup([]SigningKey{k, k}); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("KeyLookup with a duplicate id = %v", err)
	}
	if _, err := JWKS([]SigningKey{k, k}); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("JWKS with a duplicate id = %v", err)
	}

	badClaims := []func(*Claims){
		func(c *Claims) { c.Namespace = "" },
		func(c *Claims) { c.Key = "" },
		func(c *Claims) { c.Fingerprint = "" },
		func(c *Claims) { c.Owner = "" },
		func(c *Claims) { c.Expires = c.IssuedAt },
		func(c *Claims) { c.IssuedAt = -1 },
		func(c *Claims) { c.Owner = strings.Repeat("o", MaxSize) },
	}
	for i, mut := range badClaims {
		bc := c
		mut(&bc)
		if _, err := Sign(k, bc); !errors.Is(err, ErrInvalidClaims) {
			t.Errorf("bad claims %d: Sign = %v", i, err)
		}
	}
}

// FuzzVerify: Verify never panics, and accepts (nil or ErrExpired, both
// meaning "authentic") exactly the strings Sign produces with a key in
// the lookup: every accepted input must equal Sign(key, claims) byte for
// byte, so no tampering, re-encoding or other key gets through.
func FuzzVerify(f *testing.F) {
	k1, k2, k3 := fixedKey(f, "k1", 1), fixedKey(f, "k2", 2), fixedKey(f, "k3", 3)
	keys := map[string]SigningKey{"k1": k1, "k2": k2}
	lookup := mustLookup(f, k1, k2)
	c := testClaims()
	expired := c
	expired.Expires = testNow.Unix()
	for _, s := range []string{
		mustSign(f, k1, c), mustSign(f, k2, c), mustSign(f, k1, expired), mustSign(f, k3, c),
		signRaw(f, k1, `{"alg":"EdDSA","kid":"k1","typ":"gex+jwt"}`, wirePayload(f, Issuer, c)),
		signRaw(f, k1, `{"alg":"EdDSA","kid":"k1","typ":"gex+jwt","x":1}`, wirePayload(f, Issuer, c)),
		Prefix + b64.EncodeToString([]byte(`{"alg":"none","kid":"k1","typ":"gex+jwt"}`)) + "." + b64.EncodeToString([]byte(wirePayload(f, Issuer, c))) + ".",
		"", Prefix, "gex_..", "gex_e30.e30.AAAA", `gex_{"payload":""}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Verify(s, lookup, testNow)
		kid, parsed, perr := Parse(s)
		if err != nil && !errors.Is(err, ErrExpired) {
			if got != (Claims{}) {
				t.Fatalf("claims %+v returned with %v", got, err)
			}
			for _, e := range []error{ErrMalformed, ErrUnknownKey, ErrSignature} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("unexpected error kind: %v", err)
		}
		// Accepted as authentic.
		k, ok := keys[kid]
		if perr != nil || !ok || parsed != got {
			t.Fatalf("accepted %q but Parse = %q, %+v, %v", s, kid, parsed, perr)
		}
		resigned, serr := Sign(k, got)
		if serr != nil || resigned != s {
			t.Fatalf("accepted a token Sign did not produce:\n got  %q\n sign %q (%v)", s, resigned, serr)
		}
		if expiredNow := testNow.Unix() >= got.Expires; expiredNow != errors.Is(err, ErrExpired) {
			t.Fatalf("expiry %d at %d: err %v", got.Expires, testNow.Unix(), err)
		}
	})
}

func TestSignerSignsLikeSign(t *testing.T) {
	k, err := NewSigningKey(bytes.NewReader(bytes.Repeat([]byte{9}, 64)), "k1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c := Claims{Namespace: "ns", Key: fmt.Sprintf("k%d", i), Fingerprint: strings.Repeat("a", 64), FencingToken: uint64(i + 1),
			Owner: "o", IssuedAt: 100, Expires: 200}
		a, err1 := s.Sign(c)
		b, err2 := Sign(k, c)
		if err1 != nil || err2 != nil || a != b || s.KeyID() != "k1" {
			t.Fatalf("Signer.Sign = %q, %v; Sign = %q, %v", a, err1, b, err2)
		}
	}
	if _, err := s.Sign(Claims{}); err == nil {
		t.Fatal("Signer.Sign accepted empty claims")
	}
}
