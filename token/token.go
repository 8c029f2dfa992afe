// Package token mints and checks execution tokens: the proof a granted
// claimant hands to the tool it calls, bound to (tool, namespace, key,
// fingerprint, fencing token, owner, expiry).
//
// A token is "gex_" followed by a JWS in compact serialization (RFC 7515),
// signed with Ed25519 (alg "EdDSA", RFC 8037). Its protected header is
// exactly {"alg":"EdDSA","kid":<key id>,"typ":"gex+jwt"}; its payload is the
// JSON object {"iss":"intentd","aud","ns","key","fp","fence","owner","iat","exp"}
// with times in Unix seconds. "aud" (RFC 7519 section 4.1.3, as a single
// string) is the tool the intent was granted for: the one tool that may
// act on the token. Tokens signed before tokens named their tool have no
// "aud" (Claims.Tool is empty). A tool can check a token offline with the
// key set the cluster publishes (JWKS, LookupFromJWKS, Verify), and must
// then check that Claims.Tool is its own name (see Claims.ForTool).
//
// The package holds no state and reads no clock: signing keys are values
// (the ledger replicates them through Raft as an id and a 32-byte seed,
// or the seed sealed with a key-encryption key: see KEK),
// and Verify takes the time to check expiry against. Ed25519 signatures are
// deterministic, so Sign returns the same string for the same key and
// claims; a grant answered again after a lost reply carries the identical
// token.
package token

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	// Prefix starts every execution token.
	Prefix = "gex_"
	// MaxSize is the longest token string, prefix included, that Verify
	// and Parse look at; anything longer is ErrMalformed without decoding.
	MaxSize = 8 << 10
	// Issuer is the "iss" claim of every token.
	Issuer = "intentd"
	// Type is the JOSE "typ" header of every token (explicit typing, RFC
	// 8725 section 3.11), so no other JWT signed by the same key can pass for
	// an execution token.
	Type = "gex+jwt"
	// Algorithm is the only JWS "alg" accepted: Ed25519.
	Algorithm = string(jose.EdDSA)
	// maxKeyIDLen bounds a key id.
	maxKeyIDLen = 64
	// maxJWKSSize bounds the key set LookupFromJWKS reads.
	maxJWKSSize = 1 << 20
)

// Errors. Verify and Parse wrap them with details; test with errors.Is.
var (
	// ErrMalformed: not a token this package could have produced: wrong
	// prefix, too long, not a compact JWS, bad base64 or JSON, an "alg"
	// other than EdDSA (including "none" and HMAC), an unexpected header.
	ErrMalformed = errors.New("malformed execution token")
	// ErrUnknownKey: the token's "kid" is not in the lookup (never issued,
	// or retired by a key rotation).
	ErrUnknownKey = errors.New("execution token signed by an unknown key")
	// ErrSignature: the signature does not verify under the key its "kid"
	// names: the token was forged or altered.
	ErrSignature = errors.New("execution token signature does not verify")
	// ErrExpired: the token is authentic but its "exp" has passed. Verify
	// returns the claims along with it.
	ErrExpired = errors.New("execution token expired")
	// ErrInvalidKey: a signing key, public key or key set is unusable (bad
	// seed length, bad or duplicate key id, not Ed25519).
	ErrInvalidKey = errors.New("invalid token key")
	// ErrInvalidClaims: Sign was given claims that cannot make a token.
	ErrInvalidClaims = errors.New("invalid execution token claims")
)

// Claims are what a token binds. The JSON names are the token's claim
// names.
type Claims struct {
	// Tool is the audience: the tool the intent was granted for (the
	// intent's tool), the only one that may act on the token. Empty in a
	// token signed before tokens named their tool.
	Tool string `json:"aud,omitempty"`
	// Namespace the intent lives in.
	Namespace string `json:"ns"`
	// Key is the intent's idempotency key.
	Key string `json:"key"`
	// Fingerprint is the intent's payload fingerprint (hex SHA-256 of the
	// canonical tool and payload).
	Fingerprint string `json:"fp"`
	// FencingToken is the grant's fencing token.
	FencingToken uint64 `json:"fence"`
	// Owner is the execution attempt the grant went to.
	Owner string `json:"owner"`
	// IssuedAt is when the grant was made, Unix seconds (the grant
	// command's time, so every replica signs the same token).
	IssuedAt int64 `json:"iat"`
	// Expires is the first Unix second at which the token is no longer
	// valid.
	Expires int64 `json:"exp"`
}

// ForTool reports whether the token is for tool: its audience is tool. A
// token without an audience (signed before tokens named their tool) is
// for no tool in particular, and ForTool reports false for it.
func (c Claims) ForTool(tool string) bool { return c.Tool != "" && c.Tool == tool }

// wireClaims is the token payload: the claims and the issuer.
type wireClaims struct {
	Issuer string `json:"iss"`
	Claims
}

func (c Claims) validate() error {
	switch {
	case c.Namespace == "":
		return fmt.Errorf("%w: empty namespace", ErrInvalidClaims)
	case c.Key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidClaims)
	case c.Fingerprint == "":
		return fmt.Errorf("%w: empty fingerprint", ErrInvalidClaims)
	case c.Owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalidClaims)
	case c.IssuedAt < 0:
		return fmt.Errorf("%w: negative issue time %d", ErrInvalidClaims, c.IssuedAt)
	case c.Expires <= c.IssuedAt:
		return fmt.Errorf("%w: expiry %d is not after issue time %d", ErrInvalidClaims, c.Expires, c.IssuedAt)
	}
	return nil
}

// SigningKey is one token signing key as the ledger replicates it: an id,
// published as the JWS "kid", and the 32-byte Ed25519 seed (RFC 8032) the
// private key is derived from. The seed is a secret: String and GoString
// redact it, but the field itself is plain bytes.
type SigningKey struct {
	// ID names the key in token headers and in the key set.
	ID string
	// Seed is the ed25519.SeedSize-byte private seed.
	Seed []byte
}

// NewSigningKey makes a key with the given id and a seed read from rand
// (crypto/rand.Reader in production). The id is 1 to 64 characters of
// ASCII letters, digits and ". _ : -", starting with a letter or digit.
func NewSigningKey(rand io.Reader, id string) (SigningKey, error) {
	if err := checkKeyID(id); err != nil {
		return SigningKey{}, err
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rand, seed); err != nil {
		return SigningKey{}, fmt.Errorf("token signing key seed: %w", err)
	}
	return SigningKey{ID: id, Seed: seed}, nil
}

// PublicKey returns the key's Ed25519 public key, or ErrInvalidKey if the
// id or seed is unusable.
func (k SigningKey) PublicKey() (ed25519.PublicKey, error) {
	priv, err := k.private()
	if err != nil {
		return nil, err
	}
	return priv.Public().(ed25519.PublicKey), nil
}

// String names the key without its seed, so a key that reaches a log does
// not leak.
func (k SigningKey) String() string {
	return fmt.Sprintf("token.SigningKey{ID: %q, Seed: <redacted>}", k.ID)
}

// GoString is String, for %#v.
func (k SigningKey) GoString() string { return k.String() }

func (k SigningKey) private() (ed25519.PrivateKey, error) {
	if err := checkKeyID(k.ID); err != nil {
		return nil, err
	}
	if len(k.Seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: key %q: seed has %d bytes, want %d", ErrInvalidKey, k.ID, len(k.Seed), ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(k.Seed), nil
}

func checkKeyID(id string) error {
	if id == "" || len(id) > maxKeyIDLen {
		return fmt.Errorf("%w: key id %q must have 1 to %d characters", ErrInvalidKey, id, maxKeyIDLen)
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if !alnum && (i == 0 || (b != '.' && b != '_' && b != ':' && b != '-')) {
			return fmt.Errorf("%w: key id %q: only letters, digits and . _ : - (not first) are allowed", ErrInvalidKey, id)
		}
	}
	return nil
}

// Sign returns the token for c signed with k. It is deterministic: the same
// key and claims always give the same string. The claims must name a
// namespace, key, fingerprint and owner, and expire after they are issued.
// To sign many tokens with one key, make a Signer once.
func Sign(k SigningKey, c Claims) (string, error) {
	s, err := NewSigner(k)
	if err != nil {
		return "", err
	}
	return s.Sign(c)
}

// Signer signs tokens with one key. It derives the private key and
// encodes the protected header once, which is most of the cost of a lone
// Sign. It is safe for concurrent use and signs concurrently.
//
// A token is a compact JWS (RFC 7515 section 7.1):
// BASE64URL(header) "." BASE64URL(payload) "." BASE64URL(signature), the
// signature being Ed25519 over the ASCII of the first two parts. The
// Signer writes those bytes itself rather than through go-jose's general
// JWS machinery (which cost as much as the curve on the claim path and
// serialised signing behind a lock); TestSignerMatchesJOSE checks that
// the bytes are exactly go-jose's for the same key and claims, and Verify
// still parses and checks tokens with go-jose.
type Signer struct {
	id     string
	priv   ed25519.PrivateKey
	pub    ed25519.PublicKey
	header string // BASE64URL of the protected header
}

// NewSigner prepares k for signing.
func NewSigner(k SigningKey) (*Signer, error) {
	priv, err := k.private()
	if err != nil {
		return nil, err
	}
	h, err := json.Marshal(header{Alg: Algorithm, Kid: k.ID, Typ: Type})
	if err != nil {
		return nil, fmt.Errorf("token header: %w", err)
	}
	return &Signer{id: k.ID, priv: priv, pub: priv.Public().(ed25519.PublicKey), header: base64.RawURLEncoding.EncodeToString(h)}, nil
}

// KeyID is the id of the signer's key.
func (s *Signer) KeyID() string { return s.id }

// PublicKey is the public half of the signer's key, as Verify's lookup
// and the key set want it. The caller must not modify it.
func (s *Signer) PublicKey() ed25519.PublicKey { return s.pub }

// Sign returns the token for c, exactly as Sign(k, c) would.
func (s *Signer) Sign(c Claims) (string, error) {
	if err := c.validate(); err != nil {
		return "", err
	}
	payload, err := marshalClaims(c)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	size := len(Prefix) + len(s.header) + 1 + enc.EncodedLen(len(payload)) + 1 + enc.EncodedLen(ed25519.SignatureSize)
	if size > MaxSize {
		return "", fmt.Errorf("%w: token of %d bytes exceeds %d", ErrInvalidClaims, size, MaxSize)
	}
	tok := make([]byte, 0, size)
	tok = append(tok, Prefix...)
	tok = append(tok, s.header...)
	tok = append(tok, '.')
	tok = enc.AppendEncode(tok, payload)
	sig := ed25519.Sign(s.priv, tok[len(Prefix):]) // the JWS signing input
	tok = append(tok, '.')
	tok = enc.AppendEncode(tok, sig)
	return string(tok), nil
}

// marshalClaims is the token payload of c.
func marshalClaims(c Claims) ([]byte, error) {
	payload, err := json.Marshal(wireClaims{Issuer: Issuer, Claims: c})
	if err != nil {
		return nil, fmt.Errorf("token claims: %w", err)
	}
	return payload, nil
}

// Verify checks s and returns its claims. lookup maps a key id to its
// public key (see KeyLookup and LookupFromJWKS); a nil lookup knows no key.
// now is the verifier's clock: the token is expired from its "exp" second
// on. There is no leeway; pass a later or earlier now to allow for skew.
//
// The errors, in the order they are checked: ErrMalformed, ErrUnknownKey,
// ErrSignature, ErrExpired. With ErrExpired the authentic claims are
// returned too, for the caller's audit; with every other error the claims
// are zero. Verify checks authenticity and expiry only: that the token is
// for the caller's tool (Claims.ForTool), matches the intent and payload at
// hand, and single use, are the caller's.
func Verify(s string, lookup func(kid string) (ed25519.PublicKey, bool), now time.Time) (Claims, error) {
	jws, kid, err := parse(s)
	if err != nil {
		return Claims{}, err
	}
	var pub ed25519.PublicKey
	ok := false
	if lookup != nil {
		pub, ok = lookup(kid)
	}
	if !ok {
		return Claims{}, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
	}
	if len(pub) != ed25519.PublicKeySize {
		return Claims{}, fmt.Errorf("%w: lookup returned %d bytes for kid %q", ErrInvalidKey, len(pub), kid)
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: kid %q: %w", ErrSignature, kid, err)
	}
	c, err := decodeClaims(payload)
	if err != nil {
		return Claims{}, err
	}
	if now.Unix() >= c.Expires {
		return c, fmt.Errorf("%w: at %d, expiry %d", ErrExpired, now.Unix(), c.Expires)
	}
	return c, nil
}

// Parse decodes s WITHOUT VERIFYING IT: the kid and claims it returns are
// whatever the presenter wrote, possibly forged. Use it only to describe a
// token Verify refused (audit, logs), never to decide anything. It applies
// the same structural checks as Verify and fails with ErrMalformed.
func Parse(s string) (kid string, c Claims, err error) {
	jws, kid, err := parse(s)
	if err != nil {
		return "", Claims{}, err
	}
	c, err = decodeClaims(jws.UnsafePayloadWithoutVerification())
	if err != nil {
		return "", Claims{}, err
	}
	return kid, c, nil
}

// header is the protected header of a token.
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// parse checks the structure of s and returns the parsed JWS and its kid.
//
// It insists on the one canonical spelling Sign produces, so no token has
// two accepted spellings: only base64url characters and two dots (Go's
// decoder would skip CR and LF), strict base64 without padding or stray
// trailing bits, and a header with exactly alg, kid and typ.
func parse(s string) (*jose.JSONWebSignature, string, error) {
	if len(s) > MaxSize {
		return nil, "", fmt.Errorf("%w: %d bytes exceeds %d", ErrMalformed, len(s), MaxSize)
	}
	compact, ok := strings.CutPrefix(s, Prefix)
	if !ok {
		return nil, "", fmt.Errorf("%w: missing %q prefix", ErrMalformed, Prefix)
	}
	for i := 0; i < len(compact); i++ {
		b := compact[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.') {
			return nil, "", fmt.Errorf("%w: byte %#x at %d is not base64url", ErrMalformed, b, len(Prefix)+i)
		}
	}
	parts := strings.Split(compact, ".")
	if len(parts) != 3 {
		return nil, "", fmt.Errorf("%w: %d parts, want 3 (header.payload.signature)", ErrMalformed, len(parts))
	}
	strict := base64.RawURLEncoding.Strict()
	var decoded [3][]byte
	for i, p := range parts {
		if p == "" {
			return nil, "", fmt.Errorf("%w: part %d is empty", ErrMalformed, i+1)
		}
		b, err := strict.DecodeString(p)
		if err != nil {
			return nil, "", fmt.Errorf("%w: part %d is not canonical base64url: %v", ErrMalformed, i+1, err)
		}
		decoded[i] = b
	}
	h, err := decodeHeader(decoded[0])
	if err != nil {
		return nil, "", err
	}
	if len(decoded[2]) != ed25519.SignatureSize {
		return nil, "", fmt.Errorf("%w: signature has %d bytes, want %d", ErrMalformed, len(decoded[2]), ed25519.SignatureSize)
	}
	jws, err := jose.ParseSignedCompact(compact, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 || jws.Signatures[0].Header.KeyID != h.Kid {
		return nil, "", fmt.Errorf("%w: header does not parse consistently", ErrMalformed)
	}
	return jws, h.Kid, nil
}

// decodeHeader checks a protected header: exactly alg EdDSA, a kid and typ
// gex+jwt. "none", HMAC and every other algorithm are refused here, before
// any key is looked at, as are jwk, jku, x5u, crit, b64 and anything else
// Sign never writes.
func decodeHeader(data []byte) (header, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return header{}, fmt.Errorf("%w: header: %w", ErrMalformed, err)
	}
	for name := range fields {
		if name != "alg" && name != "kid" && name != "typ" {
			return header{}, fmt.Errorf("%w: unexpected header parameter %q", ErrMalformed, name)
		}
	}
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return header{}, fmt.Errorf("%w: header: %w", ErrMalformed, err)
	}
	if h.Alg != Algorithm {
		return header{}, fmt.Errorf("%w: alg %q, only %q is accepted", ErrMalformed, h.Alg, Algorithm)
	}
	if h.Typ != Type {
		return header{}, fmt.Errorf("%w: typ %q, want %q", ErrMalformed, h.Typ, Type)
	}
	if err := checkKeyID(h.Kid); err != nil {
		return header{}, fmt.Errorf("%w: kid: %v", ErrMalformed, err) // not ErrInvalidKey
	}
	return h, nil
}

// decodeClaims decodes and sanity-checks a payload.
func decodeClaims(payload []byte) (Claims, error) {
	var w wireClaims
	if err := json.Unmarshal(payload, &w); err != nil {
		return Claims{}, fmt.Errorf("%w: claims: %w", ErrMalformed, err)
	}
	if w.Issuer != Issuer {
		return Claims{}, fmt.Errorf("%w: iss %q, want %q", ErrMalformed, w.Issuer, Issuer)
	}
	if err := w.Claims.validate(); err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err) // not ErrInvalidClaims
	}
	return w.Claims, nil
}

// KeyLookup returns a lookup for Verify over keys, for the ledger (its
// replicated keys) and for tests. Ids must be unique.
func KeyLookup(keys []SigningKey) (func(kid string) (ed25519.PublicKey, bool), error) {
	m := make(map[string]ed25519.PublicKey, len(keys))
	for _, k := range keys {
		pub, err := k.PublicKey()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k.ID]; dup {
			return nil, fmt.Errorf("%w: duplicate key id %q", ErrInvalidKey, k.ID)
		}
		m[k.ID] = pub
	}
	return mapLookup(m), nil
}

func mapLookup(m map[string]ed25519.PublicKey) func(kid string) (ed25519.PublicKey, bool) {
	return func(kid string) (ed25519.PublicKey, bool) {
		pub, ok := m[kid]
		return pub, ok
	}
}
