package fsm

import (
	"crypto/ed25519"
	"fmt"
	"regexp"
)

// AddSigningKey adds an execution-token signing key and makes it the one
// new tokens are signed with. The key is generated outside the state
// machine (by the leader) and arrives in the command.
type AddSigningKey struct {
	Header
	Key SigningKey `json:"key"`
}

// Type implements Command.
func (*AddSigningKey) Type() CommandType { return TypeAddSigningKey }

// SigningKey is an execution-token signing key: an Ed25519 seed under an
// id. Keys are replicated so every node signs and verifies alike, and they
// sit in the log and snapshots. A key holds exactly one of two forms:
//   - Seed, the ed25519.SeedSize-byte seed in the clear (every key a node
//     without a key-encryption key adds): protect the data directory
//     accordingly;
//   - Sealed, the seed sealed with the cluster's key-encryption key (KEK)
//     under the key's id (SealedSeedSize bytes, see package token): the
//     log and snapshots hold no usable seed.
//
// The state machine never decrypts: it checks the form (Validate) and
// keeps the bytes; nodes open a sealed seed with their KEK when they sign
// or verify. Both fields are omitted from the JSON (the AddSigningKey
// entry, the snapshot header) when empty.
type SigningKey struct {
	ID        string `json:"id"`
	Seed      []byte `json:"seed,omitempty"`
	Sealed    []byte `json:"sealed,omitempty"`
	CreatedAt int64  `json:"created_at"`
}

// MaxSigningKeys is how many signing keys the ledger keeps; adding one
// more drops the oldest, and tokens it signed stop verifying.
const MaxSigningKeys = 4

var keyIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// SigningKeys returns the signing keys, oldest first; the last one signs.
func (l *Machine) SigningKeys() []SigningKey { return l.keys }

// The sealed form of a signing seed (package token seals and opens it;
// the state machine only checks its shape): a version byte, a 12-byte
// nonce, the 32 encrypted seed bytes and a 16-byte AES-GCM tag.
const (
	// SealedSeedVersion is the first byte of a sealed seed.
	SealedSeedVersion byte = 1
	// SealedSeedSize is the size of a sealed seed.
	SealedSeedSize = 1 + 12 + ed25519.SeedSize + 16
)

// Validate checks a signing key as the live key rotation requires it: an
// id of 1..64 [A-Za-z0-9_-] and exactly one of an Ed25519 seed of
// ed25519.SeedSize bytes or a sealed seed of SealedSeedSize bytes that
// starts with SealedSeedVersion. Whether a sealed seed opens is not the
// state machine's to know: it has no key-encryption key.
func (k SigningKey) Validate() error {
	if !keyIDRE.MatchString(k.ID) {
		return fmt.Errorf("%w: signing key id %q is not 1..64 [A-Za-z0-9_-]", ErrMalformed, k.ID)
	}
	if len(k.Sealed) == 0 {
		if len(k.Seed) != ed25519.SeedSize {
			return fmt.Errorf("%w: signing key %s has a seed of %d bytes, not %d", ErrMalformed, k.ID, len(k.Seed), ed25519.SeedSize)
		}
		return nil
	}
	switch {
	case len(k.Seed) != 0:
		return fmt.Errorf("%w: signing key %s has both a seed and a sealed seed", ErrMalformed, k.ID)
	case len(k.Sealed) != SealedSeedSize:
		return fmt.Errorf("%w: signing key %s has a sealed seed of %d bytes, not %d", ErrMalformed, k.ID, len(k.Sealed), SealedSeedSize)
	case k.Sealed[0] != SealedSeedVersion:
		return fmt.Errorf("%w: signing key %s has a sealed seed of version %d, not %d", ErrMalformed, k.ID, k.Sealed[0], SealedSeedVersion)
	}
	return nil
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
	a.l.configDirty = true
	a.l.appendChain(SystemNamespace, "", AuditEvent{Index: a.index, At: a.now, Op: "key.add", Status: StatusOK,
		Reason: "signing key " + k.ID})
	return &Result{Status: StatusOK}
}
