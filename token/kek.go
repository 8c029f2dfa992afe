package token

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Sealing signing seeds at rest.
//
// The ledger replicates signing keys through the Raft log, so a seed sits
// in the log, in every snapshot and in every backup. With a key-encryption
// key (KEK), the same on every node and never replicated, a node seals a
// new seed before proposing it and the log carries only the sealed form:
//
//	version (1 byte, SealedVersion) || nonce (12 bytes) || AES-256-GCM(seed) (32 bytes) || tag (16 bytes)
//
// The GCM additional data is the key id, so a sealed seed opens only
// under the id it was sealed for: moved to another id, it fails like a
// wrong KEK. The nonce is random; a cluster seals a handful of keys in its
// life, far below GCM's limit for random nonces.

const (
	// KEKSize is the size of a key-encryption key: an AES-256 key.
	KEKSize = 32
	// SealedVersion is the first byte of a sealed seed.
	SealedVersion byte = 1
	// SealedSeedSize is the size of a sealed seed: version, nonce,
	// encrypted seed and GCM tag.
	SealedSeedSize = 1 + sealNonceSize + ed25519.SeedSize + sealTagSize

	sealNonceSize = 12
	sealTagSize   = 16
)

// Errors of sealing and opening; test with errors.Is.
var (
	// ErrInvalidKEK: a key-encryption key that is not 32 bytes (raw or
	// base64), or that looks like a password rather than random bytes.
	ErrInvalidKEK = errors.New("invalid key-encryption key")
	// ErrNoKEK: a sealed seed needs a key-encryption key and none was
	// given.
	ErrNoKEK = errors.New("the signing seed is sealed and no key-encryption key (KEK) was given")
	// ErrWrongKEK: a sealed seed does not open: it was sealed with another
	// key-encryption key, its bytes were altered, or it was moved to
	// another key id. AES-GCM cannot tell these apart.
	ErrWrongKEK = errors.New("the sealed signing seed does not open with this key-encryption key (another KEK sealed it, or it was altered)")
)

// KEK is a key-encryption key: it seals and opens signing seeds. It is
// safe for concurrent use. Its String and GoString redact the key.
type KEK struct {
	aead cipher.AEAD
	id   string
}

// NewKEK returns the KEK of key, which must be KEKSize bytes. The KEK does
// not keep key: the caller may clear it.
func NewKEK(key []byte) (*KEK, error) {
	if len(key) != KEKSize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidKEK, len(key), KEKSize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKEK, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKEK, err)
	}
	h := sha256.New()
	h.Write([]byte("intentd kek id\x00"))
	h.Write(key)
	return &KEK{aead: aead, id: hex.EncodeToString(h.Sum(nil)[:8])}, nil
}

// GenerateKEK returns KEKSize fresh bytes read from rand
// (crypto/rand.Reader in production).
func GenerateKEK(rand io.Reader) ([]byte, error) {
	key := make([]byte, KEKSize)
	if _, err := io.ReadFull(rand, key); err != nil {
		return nil, fmt.Errorf("key-encryption key: %w", err)
	}
	return key, nil
}

// ParseKEK reads a KEK file's contents: exactly KEKSize raw bytes, or
// their standard base64 (padded or not) with surrounding whitespace, as
// intentctl kek new writes it. 32 bytes that are all printable ASCII are
// refused: they are a password or a truncated base64 string, not random
// bytes.
func ParseKEK(data []byte) (*KEK, error) {
	if len(data) == KEKSize {
		if printable(data) {
			return nil, fmt.Errorf("%w: 32 printable characters look like a password, not 32 random bytes "+
				"(write 32 random bytes or their base64: intentctl kek new)", ErrInvalidKEK)
		}
		return NewKEK(data)
	}
	return DecodeKEK(string(data))
}

// DecodeKEK reads a KEK given as standard base64 (padded or not) of
// KEKSize bytes, with surrounding whitespace ignored: the form of
// INTENTD_KEK.
func DecodeKEK(s string) (*KEK, error) {
	s = strings.TrimSpace(s)
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		var rawErr error
		if key, rawErr = base64.RawStdEncoding.DecodeString(s); rawErr != nil {
			return nil, fmt.Errorf("%w: neither %d raw bytes nor base64: %w", ErrInvalidKEK, KEKSize, err)
		}
	}
	defer clear(key)
	return NewKEK(key)
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// ID is a short public fingerprint of the KEK (16 hex digits of a
// domain-separated SHA-256): nodes that log the same ID hold the same KEK.
// It reveals nothing usable about the key.
func (k *KEK) ID() string {
	if k == nil {
		return ""
	}
	return k.id
}

// String names the KEK by its ID, never its bytes.
func (k *KEK) String() string {
	if k == nil {
		return "token.KEK(nil)"
	}
	return fmt.Sprintf("token.KEK{ID: %s, Key: <redacted>}", k.id)
}

// GoString is String, for %#v.
func (k *KEK) GoString() string { return k.String() }

// Seal encrypts seed, the ed25519.SeedSize-byte seed of key id, with the
// KEK and a nonce read from rand (crypto/rand.Reader in production). The
// result is SealedSeedSize bytes; Open with the same KEK and id recovers
// the seed. A nil KEK fails with ErrNoKEK.
func (k *KEK) Seal(rand io.Reader, id string, seed []byte) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKEK
	}
	if err := checkKeyID(id); err != nil {
		return nil, err
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: key %q: seed has %d bytes, want %d", ErrInvalidKey, id, len(seed), ed25519.SeedSize)
	}
	out := make([]byte, 1+sealNonceSize, SealedSeedSize)
	out[0] = SealedVersion
	nonce := out[1 : 1+sealNonceSize]
	if _, err := io.ReadFull(rand, nonce); err != nil {
		return nil, fmt.Errorf("sealing signing key %q: nonce: %w", id, err)
	}
	return k.aead.Seal(out, nonce, seed, []byte(id)), nil
}

// Open decrypts the sealed seed of key id. It fails with ErrNoKEK on a nil
// KEK, ErrInvalidKey on bytes that are not a sealed seed (size, version),
// and ErrWrongKEK when they do not authenticate: another KEK sealed them,
// they were altered, or they were sealed for another id. The caller owns
// the returned seed (clear it when done).
func (k *KEK) Open(id string, sealed []byte) ([]byte, error) {
	if k == nil {
		return nil, fmt.Errorf("key %q: %w", id, ErrNoKEK)
	}
	if len(sealed) != SealedSeedSize {
		return nil, fmt.Errorf("%w: key %q: sealed seed has %d bytes, want %d", ErrInvalidKey, id, len(sealed), SealedSeedSize)
	}
	if sealed[0] != SealedVersion {
		return nil, fmt.Errorf("%w: key %q: sealed seed version %d, want %d", ErrInvalidKey, id, sealed[0], SealedVersion)
	}
	seed, err := k.aead.Open(nil, sealed[1:1+sealNonceSize], sealed[1+sealNonceSize:], []byte(id))
	if err != nil {
		return nil, fmt.Errorf("key %q, KEK %s: %w", id, k.id, ErrWrongKEK)
	}
	return seed, nil
}
