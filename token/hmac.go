package token

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// HMACIssuer signs tokens with a shared secret.
//
// Deprecated: HMACIssuer is the placeholder that Sign and Verify (Ed25519,
// JWS, keys replicated by the ledger) replace. It stays only until the
// ledger is wired to the new API; delete this file then.
type HMACIssuer struct {
	secret []byte
	ttl    time.Duration
	now    func() time.Time
}

// NewHMACIssuer returns an issuer; an empty secret gets a random one
// (tokens then verify only on this process). ttl 0 means 15 minutes.
//
// Deprecated: use Sign and Verify.
func NewHMACIssuer(secret []byte, ttl time.Duration) (*HMACIssuer, error) {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("token secret: %w", err)
		}
	}
	if ttl <= 0 {
		ttl = 15 * time.Minute
	}
	return &HMACIssuer{secret: secret, ttl: ttl, now: time.Now}, nil
}

// Issue mints a token for a granted intent.
func (i *HMACIssuer) Issue(in *fsm.Intent) (string, error) {
	now := i.now()
	c := Claims{Namespace: in.Namespace, Key: in.Key, Fingerprint: in.Fingerprint, FencingToken: in.FencingToken,
		Owner: in.Owner, IssuedAt: now.Unix(), Expires: now.Add(i.ttl).Unix()}
	body, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("token claims: %w", err)
	}
	enc := base64.RawURLEncoding
	payload := enc.EncodeToString(body)
	return Prefix + payload + "." + enc.EncodeToString(i.sign(payload)), nil
}

func (i *HMACIssuer) sign(payload string) []byte {
	m := hmac.New(sha256.New, i.secret)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// Verify checks a token's signature and expiry and returns its claims.
func (i *HMACIssuer) Verify(tok string) (*Claims, error) {
	rest, ok := strings.CutPrefix(tok, Prefix)
	if !ok {
		return nil, ErrMalformed
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return nil, ErrMalformed
	}
	enc := base64.RawURLEncoding
	gotSig, err := enc.DecodeString(sig)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if !hmac.Equal(gotSig, i.sign(payload)) {
		return nil, ErrSignature
	}
	body, err := enc.DecodeString(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	var c Claims
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if i.now().Unix() >= c.Expires {
		return nil, ErrExpired
	}
	return &c, nil
}
