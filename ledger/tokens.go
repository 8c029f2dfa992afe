package ledger

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/token"
)

// ErrTokenInvalid is an execution token that is malformed, forged, signed
// by a key the cluster does not have, or for another namespace.
var ErrTokenInvalid = errors.New("execution token is not valid")

// MaxTokenBytes bounds an execution token a caller may present.
const MaxTokenBytes = 8 << 10

func toTokenKey(k fsm.SigningKey) token.SigningKey {
	return token.SigningKey{ID: k.ID, Seed: k.Seed}
}

// signingKeys reads the replicated signing keys.
func (s *Service) signingKeys(ctx context.Context, c Consistency) ([]fsm.SigningKey, error) {
	var keys []fsm.SigningKey
	err := s.r.Read(ctx, c, func(l *fsm.Ledger) { keys = l.SigningKeys() })
	return keys, err
}

// activeKey returns the key new tokens are signed with, adding the
// cluster's first key when there is none yet.
func (s *Service) activeKey(ctx context.Context) (fsm.SigningKey, error) {
	keys, err := s.signingKeys(ctx, Stale)
	if err != nil {
		return fsm.SigningKey{}, err
	}
	if len(keys) > 0 {
		return keys[len(keys)-1], nil
	}
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if keys, err = s.signingKeys(ctx, Stale); err == nil && len(keys) > 0 {
		return keys[len(keys)-1], nil
	}
	if _, err := s.RotateKey(ctx); err != nil {
		return fsm.SigningKey{}, err
	}
	if keys, err = s.signingKeys(ctx, Stale); err != nil || len(keys) == 0 {
		return fsm.SigningKey{}, fmt.Errorf("no signing key after adding one: %w", err)
	}
	return keys[len(keys)-1], nil
}

// RotateKey generates a new signing key and proposes it; new tokens are
// signed with it, and tokens signed by the previous keys keep verifying
// until fsm.MaxSigningKeys newer keys have been added. It returns the new
// key's id.
func (s *Service) RotateKey(ctx context.Context) (string, error) {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return "", fmt.Errorf("signing key id: %w", err)
	}
	k, err := token.NewSigningKey(rand.Reader, "k"+hex.EncodeToString(id))
	if err != nil {
		return "", err
	}
	if _, err := s.propose(ctx, &fsm.AddSigningKey{Key: fsm.SigningKey{ID: k.ID, Seed: k.Seed}}); err != nil {
		return "", err
	}
	return k.ID, nil
}

// JWKS returns the public signing keys as a JSON Web Key Set, for tools
// that verify execution tokens offline.
func (s *Service) JWKS(ctx context.Context, c Consistency) ([]byte, error) {
	keys, err := s.signingKeys(ctx, c)
	if err != nil {
		return nil, err
	}
	tks := make([]token.SigningKey, len(keys))
	for i, k := range keys {
		tks[i] = toTokenKey(k)
	}
	return token.JWKS(tks)
}

// IssueToken signs the execution token of in's current grant. It is a
// function of the grant alone (Ed25519 signatures are deterministic and
// the times come from the record), so a grant answered twice carries the
// same token.
func (s *Service) IssueToken(ctx context.Context, in *fsm.Intent) (string, error) {
	k, err := s.activeKey(ctx)
	if err != nil {
		return "", err
	}
	if in.TokenKey != "" && in.TokenKey != k.ID {
		// Sign with the key of the grant while the cluster still has it.
		keys, err := s.signingKeys(ctx, Stale)
		if err != nil {
			return "", err
		}
		for _, have := range keys {
			if have.ID == in.TokenKey {
				k = have
			}
		}
	}
	granted := in.GrantedAt
	if granted == 0 {
		granted = in.UpdatedAt
	}
	ttl := in.TokenTTLMS
	if ttl <= 0 {
		ttl = fsm.DefaultTokenTTLMS
	}
	signer, err := s.signer(k)
	if err != nil {
		return "", err
	}
	return signer.Sign(token.Claims{
		Namespace: in.Namespace, Key: in.Key, Fingerprint: in.Fingerprint, FencingToken: in.FencingToken,
		Owner: in.Owner, IssuedAt: granted / 1e9, Expires: (granted + ttl*1e6) / 1e9,
	})
}

// signer returns the cached Signer of k.
func (s *Service) signer(k fsm.SigningKey) (*token.Signer, error) {
	if v, ok := s.signers.Load(k.ID); ok {
		return v.(*token.Signer), nil
	}
	sg, err := token.NewSigner(toTokenKey(k))
	if err != nil {
		return nil, err
	}
	v, _ := s.signers.LoadOrStore(k.ID, sg)
	return v.(*token.Signer), nil
}

// VerifyRequest is a tool's question about an execution token.
type VerifyRequest struct {
	Namespace string
	Token     string
	// Payload or Fingerprint is what the tool is about to act on; the
	// token must bind it. Both empty: the binding is not checked.
	Payload     json.RawMessage
	Fingerprint string
	Actor       string
}

// VerifyToken checks an execution token for a tool: its signature against
// the replicated keys, then, through the state machine, that it binds the
// current grant and the payload, has not expired and was not used; the
// first verification spends it. Every attempt with a genuine token is
// audited. The claims are returned whenever the token parsed.
func (s *Service) VerifyToken(ctx context.Context, req VerifyRequest) (*fsm.Result, token.Claims, error) {
	ns, err := s.namespace(req.Namespace)
	if err != nil {
		return nil, token.Claims{}, err
	}
	if req.Token == "" {
		return nil, token.Claims{}, badField(ErrBadRequest, "execution_token", "is required")
	}
	if len(req.Token) > MaxTokenBytes {
		return nil, token.Claims{}, badField(ErrTooLarge, "execution_token", "%d bytes is over the limit of %d", len(req.Token), MaxTokenBytes)
	}
	if err := s.limits.name("actor", req.Actor, false); err != nil {
		return nil, token.Claims{}, err
	}
	keys, err := s.signingKeys(ctx, Linearizable)
	if err != nil {
		return nil, token.Claims{}, err
	}
	pubs := map[string]ed25519.PublicKey{}
	for _, k := range keys {
		if pub, err := toTokenKey(k).PublicKey(); err == nil {
			pubs[k.ID] = pub
		}
	}
	claims, err := token.Verify(req.Token, func(kid string) (ed25519.PublicKey, bool) {
		pub, ok := pubs[kid]
		return pub, ok
	}, time.Now())
	switch {
	case errors.Is(err, token.ErrExpired):
		// Genuine but late: the state machine refuses it and audits the
		// attempt, at the leader's time.
	case err != nil:
		return nil, claims, fmt.Errorf("%w: %w", ErrTokenInvalid, err)
	}
	if claims.Namespace != ns {
		return nil, claims, fmt.Errorf("%w: the token is for namespace %q", ErrTokenInvalid, claims.Namespace)
	}
	presented := req.Fingerprint
	if presented != "" && !isFingerprint(presented) {
		return nil, claims, badField(ErrBadRequest, "fingerprint", "must be 64 lowercase hex digits")
	}
	if len(req.Payload) > 0 {
		if len(req.Payload) > s.limits.MaxPayloadBytes {
			return nil, claims, badField(ErrTooLarge, "payload", "%d bytes is over the limit of %d", len(req.Payload), s.limits.MaxPayloadBytes)
		}
		in, err := s.Get(ctx, ns, claims.Key, Linearizable)
		if err != nil {
			return nil, claims, err
		}
		_, fp, err := fsm.Fingerprint(in.Tool, req.Payload)
		if err != nil {
			return nil, claims, badField(ErrBadRequest, "payload", "%v", err)
		}
		if presented != "" && presented != fp {
			return nil, claims, badField(ErrBadRequest, "fingerprint", "does not match the payload's fingerprint %s", fp)
		}
		presented = fp
	}
	r, err := s.propose(ctx, &fsm.UseToken{
		Namespace: ns, Key: claims.Key, Owner: claims.Owner, FencingToken: claims.FencingToken,
		Fingerprint: claims.Fingerprint, Presented: presented, Expires: claims.Expires, Actor: req.Actor,
	})
	return r, claims, err
}
