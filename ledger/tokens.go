package ledger

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/token"
)

// ErrTokenInvalid is an execution token that is malformed, forged, signed
// by a key the cluster does not have, or for another namespace.
var ErrTokenInvalid = errors.New("execution token is not valid")

// ErrTokenWrongTool: the verifier named the tool it is about to run
// (VerifyRequest.Tool) and the execution token was granted for another
// one, or names no tool (a token signed before tokens named their tool)
// whose tool the ledger could not establish. Nothing was proposed: the
// token is not spent, and the tool it is for can still verify it.
var ErrTokenWrongTool = errors.New("execution token is for another tool")

// ErrTokenToolForbidden: the caller's API key is bound to tools
// (VerifyRequest.MayVerify) and the execution token is for a tool outside
// them, or names no tool whose tool the ledger could establish. Nothing
// was proposed: the token is not spent.
var ErrTokenToolForbidden = errors.New("the API key may not verify execution tokens of this tool")

// ErrSigningKeySealed: a signing key the call needs is sealed with a
// key-encryption key (KEK) this node does not have (it was started without
// --kek-file or INTENTD_KEK) or that differs from the one that sealed it.
// The node cannot issue, verify or publish tokens with that key until it
// restarts with the cluster's KEK; nodes that have it can. It wraps
// token.ErrNoKEK or token.ErrWrongKEK, which say which.
var ErrSigningKeySealed = errors.New("execution tokens are unavailable on this node: " +
	"a signing key is sealed with a key-encryption key (KEK) this node does not have " +
	"(start every node with the same --kek-file or INTENTD_KEK)")

// MaxTokenBytes bounds an execution token a caller may present.
const MaxTokenBytes = 8 << 10

// keyring is how the service treats seeds: the KEK (nil: none) and the
// sealed keys it already reported it cannot open.
type keyring struct {
	kek      *token.KEK
	log      *slog.Logger
	reported sync.Map // key id → struct{}
}

// keyring returns the service's keyring: no KEK unless Config.KEK gave one.
func (s *Service) keyring() *keyring { return s.keys }

// openKey returns the usable form of k: its seed, or its sealed seed
// opened with the KEK. A sealed key the node cannot open fails with
// ErrSigningKeySealed, logged once per key.
func (s *Service) openKey(k fsm.SigningKey) (token.SigningKey, error) {
	if len(k.Sealed) == 0 {
		return token.SigningKey{ID: k.ID, Seed: k.Seed}, nil
	}
	kr := s.keyring()
	seed, err := kr.kek.Open(k.ID, k.Sealed)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrSigningKeySealed, err)
		if _, seen := kr.reported.LoadOrStore(k.ID, struct{}{}); !seen {
			hint := "this node has no KEK: restart it with the cluster's --kek-file or INTENTD_KEK"
			if kr.kek != nil {
				hint = "this node's KEK (id " + kr.kek.ID() + ") is not the one that sealed the key: " +
					"restart it with the cluster's KEK (every node needs the same one)"
			}
			kr.log.Error("execution-token signing key is sealed and this node cannot open it: "+
				"it cannot issue, verify or publish tokens signed with it", "key_id", k.ID, "hint", hint, "err", err)
		}
		return token.SigningKey{}, err
	}
	return token.SigningKey{ID: k.ID, Seed: seed}, nil
}

// signingKeys reads the replicated signing keys.
func (s *Service) signingKeys(ctx context.Context, c Consistency) ([]fsm.SigningKey, error) {
	var keys []fsm.SigningKey
	err := s.r.Read(ctx, c, func(l *fsm.Machine) { keys = l.SigningKeys() })
	return keys, err
}

// keyWait bounds how long a node waits for its replica to apply a
// signing key the leader already used (see IssueToken).
const keyWait = 5 * time.Second

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
	_, index, err := s.rotateKey(ctx)
	if err != nil {
		return fsm.SigningKey{}, err
	}
	// On a follower the key was applied by the leader first.
	if err := s.waitApplied(ctx, index); err != nil {
		return fsm.SigningKey{}, err
	}
	if keys, err = s.signingKeys(ctx, Stale); err != nil || len(keys) == 0 {
		return fsm.SigningKey{}, fmt.Errorf("no signing key after adding one: %w", err)
	}
	return keys[len(keys)-1], nil
}

// waitApplied waits, at most keyWait, until this node's replica has
// applied the log up to index.
func (s *Service) waitApplied(ctx context.Context, index uint64) error {
	ctx, cancel := context.WithTimeout(ctx, keyWait)
	defer cancel()
	if err := s.r.WaitApplied(ctx, index); err != nil {
		return fmt.Errorf("waiting for this node to apply the log up to index %d: %w", index, err)
	}
	return nil
}

// ErrSigningKeyInUse refuses a rotation that would drop the oldest
// signing key (the ledger keeps fsm.MaxSigningKeys) while execution tokens
// it signed may still be live: tools would refuse them at once. Nothing
// was written. Its detail names the key and the time after which its
// tokens have all expired; RotateOptions.Force drops it anyway.
var ErrSigningKeyInUse = errors.New("rotating would drop a signing key whose execution tokens may still be live")

// RotateOptions are the options of RotateKeyWith.
type RotateOptions struct {
	// Force adds the key even when that drops a signing key whose tokens
	// may still be live (they stop verifying at once): for a leaked key.
	Force bool
}

// RotateKey generates a new signing key and proposes it; new tokens are
// signed with it, and tokens signed by the previous keys keep verifying
// until fsm.MaxSigningKeys newer keys have been added. It returns the new
// key's id. It is RotateKeyWith without Force: it refuses, with
// ErrSigningKeyInUse, to drop a key whose tokens may still be live.
//
// With a KEK (Config.KEK) the command carries the seed sealed under the key's
// id, never the seed itself. A node that cannot open every sealed key the
// cluster already holds refuses to rotate (ErrSigningKeySealed): without
// a KEK it would add a plaintext seed to a cluster that seals them, and
// with a wrong KEK it would seal a key no other node can open.
func (s *Service) RotateKey(ctx context.Context) (string, error) {
	return s.RotateKeyWith(ctx, RotateOptions{})
}

// RotateKeyWith is RotateKey with options. When the ledger already holds
// fsm.MaxSigningKeys keys, adding one drops the oldest. Tokens the oldest
// key signed were granted before the key after it was added (a grant
// names the newest key when it is applied, and command times never go
// back), so they may be live until that time plus the longest token TTL
// a grant can get (longestTokenTTL). Until then the rotation is refused
// with ErrSigningKeyInUse unless opt.Force. The check reads the keys
// linearizably (on a follower it fails with a NotLeaderError, and the API
// forwards the request to the leader); "now" is the later of the ledger's
// time (its last command's) and this node's clock. Rotations through this
// node are serialized; two admins rotating at once through two nodes can
// each pass the check, as two forced rotations would.
func (s *Service) RotateKeyWith(ctx context.Context, opt RotateOptions) (string, error) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if !opt.Force {
		var err error
		if rerr := s.r.Read(ctx, Linearizable, func(l *fsm.Machine) {
			err = checkKeyDrop(l, time.Now().UnixNano())
		}); rerr != nil {
			return "", rerr
		}
		if err != nil {
			return "", err
		}
	}
	id, _, err := s.rotateKey(ctx)
	return id, err
}

// checkKeyDrop refuses (ErrSigningKeyInUse) to add a key to l at wall
// time now when that drops a key whose tokens may still be live.
func checkKeyDrop(l *fsm.Machine, now int64) error {
	keys := l.SigningKeys()
	if len(keys) < fsm.MaxSigningKeys {
		return nil
	}
	now = max(now, l.Now())
	oldest, next := keys[0], keys[1]
	ttl, from := longestTokenTTL(l)
	until := next.CreatedAt + ttl*int64(time.Millisecond)
	if now >= until {
		return nil
	}
	ts := func(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339) }
	return fmt.Errorf("%w: the ledger keeps %d signing keys, so a new one drops the oldest, %s "+
		"(added %s, %s ago; it stopped signing new grants at %s, when %s was added); "+
		"execution tokens it signed may be live until %s (%s from now: the longest token TTL is %s, %s), "+
		"and tools would refuse them at once. Rotate after %s, or force it (intentctl keys rotate --force, "+
		`body {"force": true}) when that key must go now, e.g. it leaked`,
		ErrSigningKeyInUse, fsm.MaxSigningKeys, oldest.ID, ts(oldest.CreatedAt), age(now-oldest.CreatedAt),
		ts(next.CreatedAt), next.ID, ts(until), age(until-now), time.Duration(ttl)*time.Millisecond, from, ts(until))
}

// age renders a span of nanoseconds to the second.
func age(ns int64) time.Duration { return time.Duration(ns).Round(time.Second) }

// longestTokenTTL returns the longest lifetime, in milliseconds, an
// execution token may have been given, and where it comes from: the
// longest token_ttl_ms of any policy, and never less than the built-in
// fsm.DefaultTokenTTLMS. The state keeps no history of policies: a TTL
// lowered after it granted tokens counts at its new value (the floor at the
// default covers the usual case, a default policy set below 15 minutes).
func longestTokenTTL(l *fsm.Machine) (int64, string) {
	ttl, from := int64(fsm.DefaultTokenTTLMS), "the built-in default"
	for _, p := range l.Policies() {
		if p != nil && p.TokenTTLMS > ttl {
			ttl, from = p.TokenTTLMS, fmt.Sprintf("policy %q's token_ttl_ms", p.Name)
		}
	}
	return ttl, from
}

// rotateKey is RotateKey; it also returns the log index of the new key.
func (s *Service) rotateKey(ctx context.Context) (string, uint64, error) {
	keys, err := s.signingKeys(ctx, Stale)
	if err != nil {
		return "", 0, err
	}
	for _, k := range keys {
		if len(k.Sealed) == 0 {
			continue
		}
		if _, err := s.signer(k); err != nil {
			return "", 0, fmt.Errorf("refusing to add a signing key: %w", err)
		}
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return "", 0, fmt.Errorf("signing key id: %w", err)
	}
	k, err := token.NewSigningKey(rand.Reader, "k"+hex.EncodeToString(id))
	if err != nil {
		return "", 0, err
	}
	add := fsm.SigningKey{ID: k.ID, Seed: k.Seed}
	if kek := s.keyring().kek; kek != nil {
		sealed, err := kek.Seal(rand.Reader, k.ID, k.Seed)
		clear(k.Seed)
		if err != nil {
			return "", 0, fmt.Errorf("signing key %s: %w", k.ID, err)
		}
		add = fsm.SigningKey{ID: k.ID, Sealed: sealed}
	}
	r, err := s.propose(ctx, &fsm.AddSigningKey{Key: add})
	if err != nil {
		return "", 0, err
	}
	return k.ID, r.Index, nil
}

// JWKS returns the public signing keys as a JSON Web Key Set, for tools
// that verify execution tokens offline. It fails whole, with
// ErrSigningKeySealed, when a key is sealed and this node cannot open it:
// a set missing a key would make tools refuse genuine tokens.
func (s *Service) JWKS(ctx context.Context, c Consistency) ([]byte, error) {
	keys, err := s.signingKeys(ctx, c)
	if err != nil {
		return nil, err
	}
	signers := make([]*token.Signer, len(keys))
	for i, k := range keys {
		if signers[i], err = s.signer(k); err != nil {
			return nil, err
		}
	}
	return token.SignersJWKS(signers)
}

// IssueToken signs the execution token of in's current grant, for in's
// tool (the token's audience, "aud"). It is a function of the grant alone
// (Ed25519 signatures are deterministic; the times and the tool come from
// the record), so a grant answered twice carries the same token,
// whichever node signs it: every node signs with the key the grant names,
// from the replicated key set. A node whose replica has not applied that
// key yet (it forwarded the claim, and the leader answered
// before this replica caught up) waits until it has applied the grant.
// Claim calls it for every grant it returns (Claimed.Token).
func (s *Service) IssueToken(ctx context.Context, in *fsm.Intent) (string, error) {
	k, err := s.activeKey(ctx)
	if err != nil {
		return "", err
	}
	if in.TokenKey != "" && in.TokenKey != k.ID {
		// Sign with the key of the grant while the cluster still has it.
		have, found, err := s.keyByID(ctx, in.TokenKey)
		if err != nil {
			return "", err
		}
		if !found && in.FencingToken > 0 {
			// The grant (at the index of its fencing token) came after its
			// key: once this replica applied it, it has the key, unless
			// later rotations retired it.
			if err := s.waitApplied(ctx, in.FencingToken); err != nil {
				return "", err
			}
			if have, found, err = s.keyByID(ctx, in.TokenKey); err != nil {
				return "", err
			}
		}
		if found {
			k = have
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
		Tool: in.Tool, Namespace: in.Namespace, Key: in.Key, Fingerprint: in.Fingerprint, FencingToken: in.FencingToken,
		Owner: in.Owner, IssuedAt: granted / 1e9, Expires: (granted + ttl*1e6) / 1e9,
	})
}

// keyByID returns the replicated signing key id, if this replica has it.
func (s *Service) keyByID(ctx context.Context, id string) (fsm.SigningKey, bool, error) {
	keys, err := s.signingKeys(ctx, Stale)
	if err != nil {
		return fsm.SigningKey{}, false, err
	}
	for _, k := range keys {
		if k.ID == id {
			return k, true, nil
		}
	}
	return fsm.SigningKey{}, false, nil
}

// signer returns the cached Signer of k. A sealed seed is opened once,
// when its key is first used, not per token: the Signer keeps the derived
// private key, and a failure to open is not cached (a later call tries
// again).
func (s *Service) signer(k fsm.SigningKey) (*token.Signer, error) {
	if v, ok := s.signers.Load(k.ID); ok {
		return v.(*token.Signer), nil
	}
	tk, err := s.openKey(k)
	if err != nil {
		return nil, err
	}
	sg, err := token.NewSigner(tk)
	if len(k.Sealed) > 0 {
		clear(tk.Seed) // the opened copy; the Signer holds what it needs
	}
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
	// Tool, when set, is the tool the verifier is about to run: a token
	// granted for another tool is refused with ErrTokenWrongTool, before
	// anything is proposed (the token is not spent).
	Tool string
	// MayVerify, when not nil, says which tools' tokens the caller may
	// verify, and so spend: its API key is bound to tools
	// (auth.Principal.MayVerify). A token for a tool it refuses fails
	// with ErrTokenToolForbidden, before anything is proposed. Nil: every
	// tool of the namespace.
	MayVerify func(tool string) bool
	// CallerTools are the tool patterns the caller's key is bound to, for
	// ErrTokenToolForbidden's detail.
	CallerTools []string
	Actor       string
}

// restricted reports whether the request limits the tools whose tokens it
// may spend.
func (req VerifyRequest) restricted() bool { return req.Tool != "" || req.MayVerify != nil }

// checkTool refuses, before anything is proposed, a token whose tool
// (empty: unknown) the caller may not verify or that is not the tool the
// request names.
func (req VerifyRequest) checkTool(tool string) error {
	const unknown = "the token names no tool (it was signed before execution tokens named their tool) " +
		"and its intent no longer has the fingerprint it binds"
	if req.MayVerify != nil && (tool == "" || !req.MayVerify(tool)) {
		if tool == "" {
			return fmt.Errorf("%w: %s; this API key verifies only tokens of tools %q", ErrTokenToolForbidden, unknown, req.CallerTools)
		}
		return fmt.Errorf("%w: the token is for tool %q; this API key verifies only tokens of tools %q", ErrTokenToolForbidden, tool, req.CallerTools)
	}
	if req.Tool != "" && tool != req.Tool {
		if tool == "" {
			return fmt.Errorf("%w: %s, so it cannot be checked against tool %q", ErrTokenWrongTool, unknown, req.Tool)
		}
		return fmt.Errorf("%w: the token is for tool %q, not %q; it was not spent", ErrTokenWrongTool, tool, req.Tool)
	}
	return nil
}

// VerifyToken checks an execution token for a tool: its signature against
// the replicated keys; that it is for a tool the caller may verify
// (MayVerify) and for the tool the request names (Tool), else
// ErrTokenToolForbidden or ErrTokenWrongTool before anything is proposed,
// so the token is not spent; then, through the state machine, that it
// binds the current grant and the payload, has not expired and was not
// used; the first verification spends it. Every attempt that reaches the
// state machine is audited. The claims are returned whenever the token
// parsed.
//
// A token signed before tokens named their tool has no audience. Its
// fingerprint hashes the tool with the payload, so when the intent it
// names still has that fingerprint, the intent's tool is the token's and
// is checked as its audience; otherwise a request that restricts the tool
// refuses it, and an unrestricted one leaves it to the state machine.
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
	if err := s.limits.name("tool", req.Tool, false); err != nil {
		return nil, token.Claims{}, err
	}
	keys, err := s.signingKeys(ctx, Linearizable)
	if err != nil {
		return nil, token.Claims{}, err
	}
	// Only the key the token names is looked at (and, sealed, opened once
	// for the Signer cache). A key this node cannot open is the node's
	// failure, not the token's: it is reported as such, never as an
	// invalid token a tool would act on.
	var keyErr error
	claims, err := token.Verify(req.Token, func(kid string) (ed25519.PublicKey, bool) {
		for _, k := range keys {
			if k.ID == kid {
				sg, err := s.signer(k)
				if err != nil {
					keyErr = err
					return nil, false
				}
				return sg.PublicKey(), true
			}
		}
		return nil, false
	}, time.Now())
	if keyErr != nil {
		return nil, token.Claims{}, keyErr
	}
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
	if len(req.Payload) > s.limits.MaxPayloadBytes {
		return nil, claims, badField(ErrTooLarge, "payload", "%d bytes is over the limit of %d", len(req.Payload), s.limits.MaxPayloadBytes)
	}
	var in *fsm.Intent // read once, when needed
	tool := claims.Tool
	if tool == "" && req.restricted() {
		if in, err = s.Get(ctx, ns, claims.Key, Linearizable); err != nil && !errors.Is(err, fsm.ErrNotFound) {
			return nil, claims, err
		}
		if in != nil && in.Fingerprint == claims.Fingerprint {
			tool = in.Tool
		}
	}
	if err := req.checkTool(tool); err != nil {
		return nil, claims, err
	}
	if len(req.Payload) > 0 {
		if in == nil {
			if in, err = s.Get(ctx, ns, claims.Key, Linearizable); err != nil {
				return nil, claims, err
			}
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
