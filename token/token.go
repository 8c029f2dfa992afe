// Package token mints execution tokens: the proof a granted claimant hands
// to the tool it calls. For now a token is an HMAC-SHA256 signed,
// URL-safe string bound to (namespace, key, fingerprint, fencing token,
// owner, expiry); public-key (Ed25519, JWKS) tokens and verification
// through the ledger replace it with the gate.
package token

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// Prefix starts every execution token.
const Prefix = "gex_"

// Claims are what a token binds.
type Claims struct {
	Namespace    string `json:"ns"`
	Key          string `json:"key"`
	Fingerprint  string `json:"fp"`
	FencingToken uint64 `json:"fence"`
	Owner        string `json:"owner"`
	Expires      int64  `json:"exp"` // Unix seconds
}

// Errors returned by Verify.
var (
	ErrMalformed = errors.New("malformed execution token")
	ErrSignature = errors.New("execution token signature does not verify")
	ErrExpired   = errors.New("execution token expired")
)

// HMACIssuer signs tokens with a shared secret.
type HMACIssuer struct {
	secret []byte
	ttl    time.Duration
	now    func() time.Time
}

// NewHMACIssuer returns an issuer; an empty secret gets a random one
// (tokens then verify only on this process). ttl 0 means 15 minutes.
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
	c := Claims{Namespace: in.Namespace, Key: in.Key, Fingerprint: in.Fingerprint, FencingToken: in.FencingToken,
		Owner: in.Owner, Expires: i.now().Add(i.ttl).Unix()}
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
