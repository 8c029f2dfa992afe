package fsm

import (
	"fmt"
	"regexp"
)

// Command types of the gate. Values are part of the log format.
const (
	TypePutPolicy     CommandType = 10
	TypeDeletePolicy  CommandType = 11
	TypeAddSigningKey CommandType = 12
	TypeUseToken      CommandType = 13
	TypeSetSettings   CommandType = 14
)

// PutPolicy creates or replaces a policy. ExpectVersion, when not zero,
// makes it a compare-and-set on the stored version.
type PutPolicy struct {
	Header
	Policy        Policy `json:"policy"`
	ExpectVersion uint64 `json:"expect_version,omitempty"`
	Actor         string `json:"actor,omitempty"`
}

// DeletePolicy removes a policy; the default policy cannot be removed.
type DeletePolicy struct {
	Header
	Name  string `json:"name"`
	Actor string `json:"actor,omitempty"`
}

// AddSigningKey adds an execution-token signing key and makes it the one
// new tokens are signed with. The key is generated outside the state
// machine (by the leader) and arrives in the command.
type AddSigningKey struct {
	Header
	Key SigningKey `json:"key"`
}

// UseToken spends an execution token: the tool side's single use. The
// signature was checked before proposing; the state machine checks the
// binding to the current grant, the payload, the expiry and single use.
type UseToken struct {
	Header
	Namespace    string `json:"ns"`
	Key          string `json:"key"`
	Owner        string `json:"owner"`
	FencingToken uint64 `json:"fence"`
	// Fingerprint is the one the token binds; Presented the fingerprint
	// of the payload the tool is about to send (empty: not checked).
	Fingerprint string `json:"fp"`
	Presented   string `json:"presented,omitempty"`
	// Expires is the token's expiry in Unix seconds.
	Expires int64  `json:"exp"`
	Actor   string `json:"actor,omitempty"`
}

// SetSettings replaces the cluster-wide settings.
type SetSettings struct {
	Header
	Settings Settings `json:"settings"`
	Actor    string   `json:"actor,omitempty"`
}

// Type implements Command.
func (*PutPolicy) Type() CommandType     { return TypePutPolicy }
func (*DeletePolicy) Type() CommandType  { return TypeDeletePolicy }
func (*AddSigningKey) Type() CommandType { return TypeAddSigningKey }
func (*UseToken) Type() CommandType      { return TypeUseToken }
func (*SetSettings) Type() CommandType   { return TypeSetSettings }

// SigningKey is an execution-token signing key: an Ed25519 seed under an
// id. Keys are replicated so every node signs and verifies alike, and they
// sit in the log and snapshots. A key holds exactly one of two forms:
//   - Seed, the ed25519.SeedSize-byte seed in the clear (every key a node
//     without a key-encryption key adds, and every key of earlier
//     versions): protect the data directory accordingly;
//   - Sealed, the seed sealed with the cluster's key-encryption key (KEK)
//     under the key's id (SealedSeedSize bytes, see package token): the
//     log and snapshots hold no usable seed.
//
// The state machine never decrypts: it checks the form (Validate) and
// keeps the bytes; nodes open a sealed seed with their KEK when they sign
// or verify. Both fields are omitted when empty, so a plaintext key
// encodes exactly as before Sealed existed, and a node of an earlier
// version refuses a sealed-only key as malformed (no 32-byte seed).
type SigningKey struct {
	ID        string `json:"id"`
	Seed      []byte `json:"seed,omitempty"`
	Sealed    []byte `json:"sealed,omitempty"`
	CreatedAt int64  `json:"created_at"`
}

// SystemNamespace holds the audit events of cluster-wide changes
// (policies, settings, signing keys). API namespaces cannot start with "_".
const SystemNamespace = "_system"

// MaxSigningKeys is how many signing keys the ledger keeps; adding one
// more drops the oldest, and tokens it signed stop verifying.
const MaxSigningKeys = 4

var keyIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// SigningKeys returns the signing keys, oldest first; the last one signs.
func (l *Ledger) SigningKeys() []SigningKey { return l.keys }

func (a *applier) putPolicy(c *PutPolicy) *Result {
	p := c.Policy
	if err := p.Validate(); err != nil {
		return &Result{Status: StatusMalformed, Detail: err.Error()}
	}
	cur := a.l.policies[p.Name]
	if c.ExpectVersion != 0 && (cur == nil || cur.Version != c.ExpectVersion) {
		have := uint64(0)
		if cur != nil {
			have = cur.Version
		}
		return &Result{Status: StatusVersionMismatch, Detail: fmt.Sprintf("policy %q is at version %d, not %d", p.Name, have, c.ExpectVersion)}
	}
	if cur == nil && p.Name != DefaultPolicyName && len(a.l.policies) >= MaxPolicies {
		return &Result{Status: StatusMalformed, Detail: fmt.Sprintf("at most %d policies", MaxPolicies)}
	}
	p.Version = a.index
	p.Tools = append([]string(nil), p.Tools...)
	p.Approvers = append([]string(nil), p.Approvers...)
	a.l.setPolicy(p.Name, &p)
	a.l.appendChain(SystemNamespace, "", AuditEvent{Index: a.index, At: a.now, Op: "policy.put", Status: StatusOK, Actor: c.Actor,
		Reason: fmt.Sprintf("policy %s version %d", p.Name, p.Version)})
	return &Result{Status: StatusOK, Policy: &p}
}

func (a *applier) deletePolicy(c *DeletePolicy) *Result {
	if c.Name == DefaultPolicyName {
		return &Result{Status: StatusMalformed, Detail: "the default policy cannot be deleted"}
	}
	cur := a.l.policies[c.Name]
	if cur == nil {
		return &Result{Status: StatusUnknownPolicy, Detail: fmt.Sprintf("no policy %q", c.Name)}
	}
	a.l.setPolicy(c.Name, nil)
	a.l.appendChain(SystemNamespace, "", AuditEvent{Index: a.index, At: a.now, Op: "policy.delete", Status: StatusOK, Actor: c.Actor,
		Reason: fmt.Sprintf("policy %s version %d", c.Name, cur.Version)})
	return &Result{Status: StatusOK, Policy: cur}
}

func (a *applier) addSigningKey(c *AddSigningKey) *Result {
	k := c.Key
	if err := k.Validate(); err != nil {
		return &Result{Status: StatusMalformed, Detail: err.Error()}
	}
	for _, have := range a.l.keys {
		if have.ID == k.ID {
			return &Result{Status: StatusOK, Detail: "key already present"}
		}
	}
	k.CreatedAt = a.now
	keys := append(append([]SigningKey(nil), a.l.keys...), k)
	if len(keys) > MaxSigningKeys {
		keys = keys[len(keys)-MaxSigningKeys:]
	}
	a.l.keys = keys
	a.l.appendChain(SystemNamespace, "", AuditEvent{Index: a.index, At: a.now, Op: "key.add", Status: StatusOK,
		Reason: "signing key " + k.ID})
	return &Result{Status: StatusOK}
}

func (a *applier) setSettings(c *SetSettings) *Result {
	if err := c.Settings.Validate(); err != nil {
		return &Result{Status: StatusMalformed, Detail: err.Error()}
	}
	a.l.settings = c.Settings
	a.l.appendChain(SystemNamespace, "", AuditEvent{Index: a.index, At: a.now, Op: "settings.set", Status: StatusOK, Actor: c.Actor,
		Reason: fmt.Sprintf("audit_retention %d", c.Settings.AuditRetention)})
	return &Result{Status: StatusOK}
}

func (a *applier) useToken(c *UseToken) *Result {
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		return notFound(c.Namespace, c.Key)
	}
	attempt := AuditEvent{Op: "token.use", Owner: c.Owner, Actor: c.Actor, FencingToken: c.FencingToken, Fingerprint: c.Presented}
	switch {
	case c.Fingerprint != w.Fingerprint:
		return a.refuse(orig, w, StatusTokenMismatch, attempt, "the token binds fingerprint %s; the intent has %s", c.Fingerprint, w.Fingerprint)
	case c.Presented != "" && c.Presented != w.Fingerprint:
		return a.refuse(orig, w, StatusTokenMismatch, attempt, "the payload's fingerprint %s is not the one the token binds (%s)", c.Presented, w.Fingerprint)
	case a.now > c.Expires*1e9:
		return a.refuse(orig, w, StatusTokenExpired, attempt, "the token expired")
	case w.TokenUsed == c.FencingToken && c.FencingToken != 0:
		return a.refuse(orig, w, StatusTokenUsed, attempt, "the token of fencing token %d was already used", c.FencingToken)
	case w.Owner != c.Owner || w.FencingToken != c.FencingToken:
		return a.refuse(orig, w, StatusFenced, attempt, "the current grant is fencing token %d of owner %q", w.FencingToken, w.Owner)
	case w.State == StateInDoubt:
		return a.refuse(orig, w, StatusInDoubt, attempt, "the grant's lease passed; the token no longer authorises the effect")
	case w.State != StateDeclared:
		return a.refuse(orig, w, StatusInvalidState, attempt, "the intent is %s; only a declared grant can use its token", w.State)
	}
	w.TokenUsed = c.FencingToken
	attempt.Status = StatusOK
	a.event(w, attempt)
	a.save(orig, w)
	return &Result{Status: StatusOK, Intent: w}
}
