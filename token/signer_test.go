package token

import (
	"crypto/ed25519"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"pgregory.net/rapid"
)

// joseSign is the reference: the token as go-jose's general JWS signer
// writes it for the same key and claims.
func joseSign(t *rapid.T, k SigningKey, payload []byte) string {
	priv := ed25519.NewKeyFromSeed(k.Seed)
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: priv, KeyID: k.ID}},
		(&jose.SignerOptions{}).WithType(Type),
	)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	compact, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return Prefix + compact
}

// TestSignerMatchesJOSE: the Signer's hand-assembled compact JWS is byte
// for byte what go-jose produces, for any key id and claims (unicode,
// quotes and control characters in the strings included), and verifies.
func TestSignerMatchesJOSE(t *testing.T) {
	idChars := rapid.SampledFrom([]rune("abcXYZ0189._:-"))
	rapid.Check(t, func(t *rapid.T) {
		id := string(rapid.SampledFrom([]rune("aZ7")).Draw(t, "first")) +
			string(rapid.SliceOfN(idChars, 0, 40).Draw(t, "id"))
		k := SigningKey{ID: id, Seed: rapid.SliceOfN(rapid.Byte(), ed25519.SeedSize, ed25519.SeedSize).Draw(t, "seed")}
		nonEmpty := rapid.StringN(1, 80, -1)
		iat := rapid.Int64Range(0, 1<<40).Draw(t, "iat")
		c := Claims{
			Namespace: nonEmpty.Draw(t, "ns"), Key: nonEmpty.Draw(t, "key"), Fingerprint: nonEmpty.Draw(t, "fp"),
			FencingToken: rapid.Uint64().Draw(t, "fence"), Owner: nonEmpty.Draw(t, "owner"),
			IssuedAt: iat, Expires: iat + rapid.Int64Range(1, 1<<30).Draw(t, "ttl"),
		}
		s, err := NewSigner(k)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Sign(c)
		if err != nil {
			t.Fatal(err)
		}
		payload, err := marshalClaims(c)
		if err != nil {
			t.Fatal(err)
		}
		if want := joseSign(t, k, payload); got != want {
			t.Fatalf("Signer.Sign:\n got  %s\n want %s", got, want)
		}
		lookup, err := KeyLookup([]SigningKey{k})
		if err != nil {
			t.Fatal(err)
		}
		back, err := Verify(got, lookup, time.Unix(c.IssuedAt, 0))
		if err != nil || back != c {
			t.Fatalf("Verify = %+v, %v; want %+v", back, err, c)
		}
	})
}

// BenchmarkSignerSign is the token cost of one grant.
func BenchmarkSignerSign(b *testing.B) {
	k := SigningKey{ID: "k0123456789abcdef", Seed: make([]byte, ed25519.SeedSize)}
	s, err := NewSigner(k)
	if err != nil {
		b.Fatal(err)
	}
	c := Claims{Namespace: "default", Key: "L0001/00001/000000000000000001", Fingerprint: "1bd2a6c711d115635a078d9c7463624d447b4fde08bfe3f2984f0ecb6811a2c2",
		FencingToken: 4, Owner: "bench/1/1", IssuedAt: 1796153366, Expires: 1796154266}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign(c); err != nil {
			b.Fatal(err)
		}
	}
}
