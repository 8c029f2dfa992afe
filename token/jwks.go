package token

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
)

// JWKS returns the public halves of keys as a JSON Web Key Set (RFC 7517,
// RFC 8037): {"keys":[{"use":"sig","kty":"OKP","kid":...,"crv":"Ed25519",
// "alg":"EdDSA","x":...}]}, in the order given. Serve it (GET /v1/keys) so
// tools can verify tokens offline with LookupFromJWKS or any JOSE library.
// Keep a retired key in the set until the tokens it signed have expired.
func JWKS(keys []SigningKey) ([]byte, error) {
	ids := make([]string, len(keys))
	pubs := make([]ed25519.PublicKey, len(keys))
	for i, k := range keys {
		pub, err := k.PublicKey()
		if err != nil {
			return nil, err
		}
		ids[i], pubs[i] = k.ID, pub
	}
	return jwks(ids, pubs)
}

// SignersJWKS is JWKS of the signers' keys, for a caller that keeps
// Signers rather than seeds (the ledger, whose seeds may be sealed).
func SignersJWKS(signers []*Signer) ([]byte, error) {
	ids := make([]string, len(signers))
	pubs := make([]ed25519.PublicKey, len(signers))
	for i, s := range signers {
		ids[i], pubs[i] = s.id, s.pub
	}
	return jwks(ids, pubs)
}

// jwks encodes the key set of ids[i] → pubs[i].
func jwks(ids []string, pubs []ed25519.PublicKey) ([]byte, error) {
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(ids))}
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		if seen[id] {
			return nil, fmt.Errorf("%w: duplicate key id %q", ErrInvalidKey, id)
		}
		seen[id] = true
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: pubs[i], KeyID: id, Algorithm: Algorithm, Use: "sig"})
	}
	data, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("token key set: %w", err)
	}
	return data, nil
}

// jwkHead holds the members of a JWK that decide whether it is ours.
type jwkHead struct {
	Kty string          `json:"kty"`
	Crv string          `json:"crv"`
	Kid string          `json:"kid"`
	Use string          `json:"use"`
	Alg string          `json:"alg"`
	D   json.RawMessage `json:"d"`
}

// LookupFromJWKS parses a JSON Web Key Set, as JWKS writes it, into a
// lookup for Verify. Keys that are not Ed25519 signing keys (another kty or
// crv, a use other than "sig", an alg other than EdDSA) are skipped, as RFC
// 7517 section 5 asks. It fails with ErrInvalidKey on a set that is not
// JSON, is larger than 1 MiB, has an Ed25519 key without a usable kid or
// with private material ("d"), repeats a kid, or has no Ed25519 key at all.
func LookupFromJWKS(data []byte) (func(kid string) (ed25519.PublicKey, bool), error) {
	if len(data) > maxJWKSSize {
		return nil, fmt.Errorf("%w: key set of %d bytes exceeds %d", ErrInvalidKey, len(data), maxJWKSSize)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("%w: key set: %w", ErrInvalidKey, err)
	}
	m := make(map[string]ed25519.PublicKey, len(set.Keys))
	for i, raw := range set.Keys {
		var h jwkHead
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, fmt.Errorf("%w: key %d: %w", ErrInvalidKey, i, err)
		}
		if h.Kty != "OKP" || h.Crv != "Ed25519" || (h.Use != "" && h.Use != "sig") || (h.Alg != "" && h.Alg != Algorithm) {
			continue
		}
		if h.D != nil {
			return nil, fmt.Errorf("%w: key %d (%q) carries private key material", ErrInvalidKey, i, h.Kid)
		}
		if err := checkKeyID(h.Kid); err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("%w: key %q: %w", ErrInvalidKey, h.Kid, err)
		}
		pub, ok := jwk.Key.(ed25519.PublicKey)
		if !ok || len(pub) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: key %q is not an Ed25519 public key", ErrInvalidKey, h.Kid)
		}
		if _, dup := m[h.Kid]; dup {
			return nil, fmt.Errorf("%w: duplicate key id %q", ErrInvalidKey, h.Kid)
		}
		m[h.Kid] = append(ed25519.PublicKey(nil), pub...)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("%w: key set has no Ed25519 signing key", ErrInvalidKey)
	}
	return mapLookup(m), nil
}
