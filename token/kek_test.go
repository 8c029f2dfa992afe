package token

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"
)

// testKEK returns the KEK whose key is b repeated, and that key.
func testKEK(t testing.TB, b byte) (*KEK, []byte) {
	t.Helper()
	key := bytes.Repeat([]byte{b}, KEKSize)
	k, err := NewKEK(key)
	if err != nil {
		t.Fatal(err)
	}
	return k, key
}

func TestSealedSeedSize(t *testing.T) {
	if SealedSeedSize != 1+12+32+16 {
		t.Fatalf("SealedSeedSize = %d, want version + nonce + seed + tag = 61", SealedSeedSize)
	}
}

func TestKEKSealOpenRoundTrip(t *testing.T) {
	kek, _ := testKEK(t, 9)
	k := fixedKey(t, "k0123", 7)
	sealed, err := kek.Seal(rand.Reader, k.ID, k.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != SealedSeedSize || sealed[0] != SealedVersion {
		t.Fatalf("sealed = %d bytes, version %d", len(sealed), sealed[0])
	}
	if bytes.Contains(sealed, k.Seed) {
		t.Fatal("the sealed form contains the seed")
	}
	seed, err := kek.Open(k.ID, sealed)
	if err != nil || !bytes.Equal(seed, k.Seed) {
		t.Fatalf("Open = %x, %v; want the seed", seed, err)
	}
	// The opened seed signs exactly as the original key.
	want, err := Sign(k, testClaims())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Sign(SigningKey{ID: k.ID, Seed: seed}, testClaims()); err != nil || got != want {
		t.Fatalf("token from the opened seed differs: %v", err)
	}
	// Another KEK value with the same bytes opens it: a KEK is its bytes.
	same, _ := testKEK(t, 9)
	if _, err := same.Open(k.ID, sealed); err != nil {
		t.Fatalf("the same KEK loaded again: %v", err)
	}
	// A fresh nonce each time: sealing twice gives two different forms.
	again, err := kek.Seal(rand.Reader, k.ID, k.Seed)
	if err != nil || bytes.Equal(again, sealed) {
		t.Fatalf("sealing twice gave the same bytes (%v)", err)
	}
}

func TestKEKOpenRefuses(t *testing.T) {
	kek, _ := testKEK(t, 9)
	other, _ := testKEK(t, 10)
	k := fixedKey(t, "k-a", 7)
	sealed, err := kek.Seal(rand.Reader, k.ID, k.Seed)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		return b
	}
	for _, tc := range []struct {
		name   string
		kek    *KEK
		id     string
		sealed []byte
		want   error
	}{
		{"wrong KEK", other, k.ID, sealed, ErrWrongKEK},
		{"no KEK", nil, k.ID, sealed, ErrNoKEK},
		{"moved to another key id", kek, "k-b", sealed, ErrWrongKEK},
		{"id differing in case", kek, "K-A", sealed, ErrWrongKEK},
		{"nonce altered", kek, k.ID, flip(1), ErrWrongKEK},
		{"ciphertext altered", kek, k.ID, flip(1 + 12 + 5), ErrWrongKEK},
		{"tag altered", kek, k.ID, flip(SealedSeedSize - 1), ErrWrongKEK},
		{"version altered", kek, k.ID, flip(0), ErrInvalidKey},
		{"truncated", kek, k.ID, sealed[:SealedSeedSize-1], ErrInvalidKey},
		{"extended", kek, k.ID, append(bytes.Clone(sealed), 0), ErrInvalidKey},
		{"a plaintext seed", kek, k.ID, k.Seed, ErrInvalidKey},
		{"empty", kek, k.ID, nil, ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seed, err := tc.kek.Open(tc.id, tc.sealed)
			if !errors.Is(err, tc.want) || seed != nil {
				t.Fatalf("Open = %x, %v; want %v", seed, err, tc.want)
			}
		})
	}
}

func TestKEKSealRefuses(t *testing.T) {
	kek, _ := testKEK(t, 9)
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	for _, tc := range []struct {
		name string
		kek  *KEK
		id   string
		seed []byte
		want error
	}{
		{"no KEK", nil, "k1", seed, ErrNoKEK},
		{"bad key id", kek, "-k1", seed, ErrInvalidKey},
		{"short seed", kek, "k1", seed[:31], ErrInvalidKey},
		{"private key, not seed", kek, "k1", ed25519.NewKeyFromSeed(seed), ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := tc.kek.Seal(rand.Reader, tc.id, tc.seed); !errors.Is(err, tc.want) || out != nil {
				t.Fatalf("Seal = %x, %v; want %v", out, err, tc.want)
			}
		})
	}
	if _, err := kek.Seal(iotest.ErrReader(errors.New("no entropy")), "k1", seed); err == nil {
		t.Fatal("Seal without randomness succeeded")
	}
}

func TestParseKEK(t *testing.T) {
	_, key := testKEK(t, 0xa5)
	want, _ := testKEK(t, 0xa5)
	std := base64.StdEncoding.EncodeToString(key)
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"raw 32 bytes", key, true},
		{"base64", []byte(std), true},
		{"base64 and a newline", []byte(std + "\n"), true},
		{"base64 in whitespace", []byte("  " + std + "\r\n"), true},
		{"unpadded base64", []byte(strings.TrimRight(std, "=")), true},
		{"31 raw bytes", key[:31], false},
		{"33 raw bytes", append(bytes.Clone(key), 1), false},
		{"base64 of 16 bytes", []byte(base64.StdEncoding.EncodeToString(key[:16])), false},
		{"32 printable characters", []byte(strings.Repeat("p", 32)), false},
		{"hex", []byte(hex.EncodeToString(key)), false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKEK(tc.data)
			switch {
			case tc.ok && (err != nil || k.ID() != want.ID()):
				t.Fatalf("ParseKEK = %v, %v; want the KEK %s", k, err, want.ID())
			case !tc.ok && !errors.Is(err, ErrInvalidKEK):
				t.Fatalf("ParseKEK = %v, %v; want ErrInvalidKEK", k, err)
			}
		})
	}
	if k, err := DecodeKEK(std); err != nil || k.ID() != want.ID() {
		t.Fatalf("DecodeKEK = %v, %v", k, err)
	}
	if _, err := DecodeKEK(string(key)); !errors.Is(err, ErrInvalidKEK) {
		t.Fatalf("DecodeKEK of raw bytes = %v, want ErrInvalidKEK", err)
	}
}

func TestGenerateKEK(t *testing.T) {
	a, err := GenerateKEK(rand.Reader)
	if err != nil || len(a) != KEKSize {
		t.Fatalf("GenerateKEK = %d bytes, %v", len(a), err)
	}
	b, _ := GenerateKEK(rand.Reader)
	if bytes.Equal(a, b) {
		t.Fatal("two KEKs are equal")
	}
	if _, err := GenerateKEK(iotest.ErrReader(errors.New("no entropy"))); err == nil {
		t.Fatal("GenerateKEK without randomness succeeded")
	}
}

// TestKEKRedacted: a KEK that reaches a log or an error shows its ID, not
// its key.
func TestKEKRedacted(t *testing.T) {
	kek, key := testKEK(t, 0x42)
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, kek)
		if !strings.Contains(out, kek.ID()) || strings.Contains(out, hex.EncodeToString(key)) ||
			strings.Contains(out, base64.StdEncoding.EncodeToString(key)) || strings.Contains(out, "aead") {
			t.Errorf("%s of a KEK = %q", format, out)
		}
	}
	if len(kek.ID()) != 16 {
		t.Errorf("ID %q, want 16 hex digits", kek.ID())
	}
	if other, _ := testKEK(t, 0x43); other.ID() == kek.ID() {
		t.Error("two KEKs share an ID")
	}
}

func TestSignersJWKSIsJWKS(t *testing.T) {
	keys := []SigningKey{fixedKey(t, "k1", 1), fixedKey(t, "k2", 2)}
	want, err := JWKS(keys)
	if err != nil {
		t.Fatal(err)
	}
	var signers []*Signer
	for _, k := range keys {
		s, err := NewSigner(k)
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := k.PublicKey()
		if !pub.Equal(s.PublicKey()) {
			t.Fatalf("signer %s public key differs from the key's", k.ID)
		}
		signers = append(signers, s)
	}
	got, err := SignersJWKS(signers)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("SignersJWKS = %s, %v; want %s", got, err, want)
	}
	if _, err := SignersJWKS([]*Signer{signers[0], signers[0]}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("duplicate signer: %v", err)
	}
}
