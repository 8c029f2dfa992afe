// Package auth authenticates API callers and authorizes them by role.
//
// A caller presents an API key as a bearer token (Authorization: Bearer
// ik_...). Each key is bound to one namespace and a set of roles; the
// Principal it resolves to is what handlers act for. Keys are configured
// by their SHA-256 only (Parse, ParseEnv, LoadFile, Load), so the
// configuration holds no secret; GenerateKey makes new ones.
//
// Roles:
//
//	agent       claim, complete, renew, commit (its own grants), and read
//	tool        verify execution tokens
//	approver    approve, reject, resolve, and read
//	reconciler  complete, renew, commit any grant of its namespace,
//	            resolve, and read
//	reader      read only (intents, audit, cluster status): dashboards
//	admin       everything: cluster, policies, snapshots, key rotation
//
// admin implies every role; agent, approver and reconciler imply reader.
//
// A grant is bound to the key that claimed it: complete, renew and commit
// from another key are refused unless that key holds reconciler (or
// admin). The state machine enforces it; the Principal's name and roles
// are what the API layer hands it.
//
// Check authenticates a request's bearer key and checks a role;
// Middleware does it for every request of an echo server and stores the
// Principal in the request's context. Which role each route needs, and
// how a refusal is answered, is the HTTP API's business (package
// httpapi). A nil or Disabled keyset is development mode: every request
// passes as namespace "default" (namespace.Default) with every role.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/intentledger/intentd/internal/namespace"
)

// Role is a set of permissions a key carries.
type Role string

// Roles a key can hold.
const (
	// RoleAgent claims intents and reports on them: claim, complete,
	// renew, commit; it implies RoleReader.
	RoleAgent Role = "agent"
	// RoleTool verifies execution tokens (POST /v1/tokens/verify).
	RoleTool Role = "tool"
	// RoleApprover decides on intents: approve, reject, resolve; it
	// implies RoleReader.
	RoleApprover Role = "approver"
	// RoleReconciler settles grants other keys of its namespace hold:
	// complete, renew and commit any grant (an agent may settle only the
	// grants of its own key), and resolve; it implies RoleReader. Give it
	// to the process that reconciles stuck intents against the tools,
	// never to agents.
	RoleReconciler Role = "reconciler"
	// RoleReader reads intents, their audit and the cluster status.
	RoleReader Role = "reader"
	// RoleAdmin may do everything, including cluster membership,
	// policies, snapshots and signing key rotation.
	RoleAdmin Role = "admin"
)

// Requirements that are not roles a key can hold; a route table may use
// them, and Has answers for them.
const (
	// Public marks a route that needs no key at all.
	Public Role = "public"
	// Authenticated marks a route any valid key may call, whatever its
	// roles (for example the cluster status that every SDK reads to find
	// the leader).
	Authenticated Role = "authenticated"
	// Settle marks a report on a grant (complete, renew, commit): agent
	// (the state machine then holds it to its own grants) or reconciler.
	Settle Role = "settle"
	// Resolve marks settling an in_doubt intent: approver or reconciler.
	Resolve Role = "resolve"
)

// KeyPrefix starts every API key.
const KeyPrefix = "ik_"

// Bounds on a presented API key, prefix included. GenerateKey's keys are
// 46 bytes.
const (
	minKeyLen = len(KeyPrefix) + 16
	maxKeyLen = 256
)

// Errors. Wrapped with details; test with errors.Is.
var (
	// ErrInvalidConfig: a key configuration does not parse or validate.
	ErrInvalidConfig = errors.New("invalid API key configuration")
	// ErrNoKeys: Load was given neither a file nor an environment value.
	ErrNoKeys = errors.New("no API keys configured")
	// ErrNoCredentials: the request carries no bearer token.
	ErrNoCredentials = errors.New("no API key presented")
	// ErrInvalidCredentials: the presented key is malformed or matches no
	// configured key.
	ErrInvalidCredentials = errors.New("invalid API key")
	// ErrForbidden: the presented key is valid but lacks the role the
	// call needs (a *ForbiddenError says which key and role).
	ErrForbidden = errors.New("the API key lacks the role this call needs")
)

// ForbiddenError is Check's refusal of a valid key that lacks the role a
// call needs. It wraps ErrForbidden.
type ForbiddenError struct {
	// Principal is the key's principal.
	Principal Principal
	// Role is what the call needs.
	Role Role
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("%v: key %q lacks role %s", ErrForbidden, e.Principal.Name, e.Role)
}

// Unwrap makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Unwrap() error { return ErrForbidden }

// assignable lists the roles a configured key may hold, in display order.
var assignable = []Role{RoleAgent, RoleTool, RoleApprover, RoleReconciler, RoleReader, RoleAdmin}

// Roles returns the roles a configured key may hold.
func Roles() []Role { return slices.Clone(assignable) }

func (r Role) assignable() bool { return slices.Contains(assignable, r) }

// Principal is an authenticated caller: the configured key's name, the
// namespace every request it makes acts in, and its roles.
type Principal struct {
	// Name is the configured key's name (for logs and audit; never the key).
	Name string
	// Namespace scopes every intent the caller touches.
	Namespace string
	// Roles the key holds.
	Roles []Role
	// Tools limit the tokens a tool key may verify (KeyConfig.Tools);
	// empty: any tool of its namespace.
	Tools []string
	// KeyPrefixes are the idempotency-key prefixes reserved to this key
	// (KeyConfig.KeyPrefixes).
	KeyPrefixes []string
}

// MayVerify reports whether p may verify (and spend) an execution token
// for tool: p's Tools is empty or one of its patterns matches tool.
func (p Principal) MayVerify(tool string) bool {
	if len(p.Tools) == 0 {
		return true
	}
	for _, t := range p.Tools {
		if ok, _ := path.Match(t, tool); ok {
			return true
		}
	}
	return false
}

// Has reports whether p may act as r: p holds r, or holds admin, or r is
// reader and p holds agent, approver or reconciler. Everyone has Public;
// any principal with a role has Authenticated; agent or reconciler has
// Settle; approver or reconciler has Resolve.
func (p Principal) Has(r Role) bool {
	switch r {
	case Public:
		return true
	case Authenticated:
		return len(p.Roles) > 0
	case Settle:
		return p.Has(RoleAgent) || p.Has(RoleReconciler)
	case Resolve:
		return p.Has(RoleApprover) || p.Has(RoleReconciler)
	}
	for _, have := range p.Roles {
		switch {
		case have == r && r.assignable(), have == RoleAdmin:
			return true
		case r == RoleReader && (have == RoleAgent || have == RoleApprover || have == RoleReconciler):
			return true
		}
	}
	return false
}

// devPrincipal is who every request is in development mode.
func devPrincipal() Principal {
	return Principal{Name: "dev", Namespace: namespace.Default, Roles: Roles()}
}

// GenerateKey makes a new API key from 32 bytes of rand
// (crypto/rand.Reader in production): the plaintext "ik_" + 43 base64url
// characters, shown once to the operator, and the hex SHA-256 that goes
// into the configuration.
func GenerateKey(rand io.Reader) (plaintext, sha256hex string, err error) {
	b := make([]byte, 32)
	if _, err := io.ReadFull(rand, b); err != nil {
		return "", "", fmt.Errorf("api key: %w", err)
	}
	plaintext = KeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	return plaintext, HashKey(plaintext), nil
}

// HashKey returns the hex SHA-256 of an API key, as the configuration
// stores it.
//
// A plain, fast hash is right here, unlike for passwords: a key carries 256
// random bits, so there is nothing to brute-force, and a slow hash (bcrypt,
// argon2) would only cost CPU on every request and hand attackers a cheap
// way to load the server. The hash keeps the configuration, backups and
// logs free of usable secrets.
func HashKey(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// entry is one configured key, or one previous secret of the key before
// it (previous: the same principal under another hash).
type entry struct {
	hash      [sha256.Size]byte
	principal Principal
	previous  bool
}

// table is an immutable snapshot of a keyset.
type table struct {
	disabled bool
	entries  []entry
}

// Keyset is the set of configured API keys. It is safe for concurrent use
// and can be replaced in place (Replace) when the configuration is
// reloaded. The zero Keyset knows no key and refuses every request.
type Keyset struct {
	cur atomic.Pointer[table]
}

func newKeyset(t *table) *Keyset {
	ks := &Keyset{}
	ks.cur.Store(t)
	return ks
}

// Disabled returns a development-mode keyset: Authenticate and Middleware
// let every caller through as namespace "default" with every role. Log
// loudly when using it.
func Disabled() *Keyset { return newKeyset(&table{disabled: true}) }

func (ks *Keyset) table() *table {
	if ks == nil {
		return &table{disabled: true}
	}
	if t := ks.cur.Load(); t != nil {
		return t
	}
	return &table{}
}

// IsDisabled reports whether ks is in development mode (nil or Disabled).
func (ks *Keyset) IsDisabled() bool { return ks.table().disabled }

// Len returns the number of configured keys.
func (ks *Keyset) Len() int {
	n := 0
	for _, e := range ks.table().entries {
		if !e.previous {
			n++
		}
	}
	return n
}

// Names returns the configured keys' names, in configuration order.
func (ks *Keyset) Names() []string {
	t := ks.table()
	var names []string
	for _, e := range t.entries {
		if !e.previous {
			names = append(names, e.principal.Name)
		}
	}
	return names
}

// HasNamespace reports whether a configured key acts in namespace ns.
// It allocates nothing: the metrics ask it for every claim.
func (ks *Keyset) HasNamespace(ns string) bool {
	for _, e := range ks.table().entries {
		if !e.previous && e.principal.Namespace == ns {
			return true
		}
	}
	return false
}

// Namespaces returns the namespaces the configured keys act in, each
// once, in configuration order.
func (ks *Keyset) Namespaces() []string {
	var out []string
	for _, e := range ks.table().entries {
		if !e.previous && !slices.Contains(out, e.principal.Namespace) {
			out = append(out, e.principal.Namespace)
		}
	}
	return out
}

// Replace atomically makes ks answer with next's keys (or development mode,
// if next is disabled), for a configuration reload; requests in flight
// finish with the keys they started with. A nil next leaves ks refusing
// every key, never in development mode.
func (ks *Keyset) Replace(next *Keyset) {
	t := &table{}
	if next != nil {
		t = next.table()
	}
	ks.cur.Store(t)
}

// Authenticate resolves a presented API key (the bearer token, without
// "Bearer ") to its principal, or fails with ErrInvalidCredentials. In
// development mode every input resolves to the development principal.
//
// It hashes the presented key and compares the hash with every configured
// hash with crypto/subtle, without stopping at a match, so its timing says
// nothing about which key, if any, matched or how close a guess came. (A
// map indexed by the hash would also be safe, since an attacker cannot
// steer the hash of a guess, but a full constant-time scan leaves nothing
// to argue about and keysets are small.)
func (ks *Keyset) Authenticate(presented string) (Principal, error) {
	t := ks.table()
	if t.disabled {
		return devPrincipal(), nil
	}
	if err := checkKeyFormat(presented); err != nil {
		return Principal{}, err
	}
	sum := sha256.Sum256([]byte(presented))
	match := -1
	for i := range t.entries {
		eq := subtle.ConstantTimeCompare(sum[:], t.entries[i].hash[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return Principal{}, fmt.Errorf("%w: no configured key matches", ErrInvalidCredentials)
	}
	p := t.entries[match].principal
	p.Roles = slices.Clone(p.Roles)
	p.Tools = slices.Clone(p.Tools)
	p.KeyPrefixes = slices.Clone(p.KeyPrefixes)
	return p, nil
}

// ReservedPrefix reports whether key, in namespace ns, falls under a
// prefix some configured key of ns reserves (KeyConfig.KeyPrefixes) that
// the key named name does not hold; it returns that prefix. Such a key
// may be claimed only by the keys that reserve it. In development mode
// nothing is reserved.
func (ks *Keyset) ReservedPrefix(ns, name, key string) (prefix string, reserved bool) {
	t := ks.table()
	if t.disabled {
		return "", false
	}
	held := false
	for i := range t.entries {
		p := &t.entries[i].principal
		if p.Namespace != ns {
			continue
		}
		for _, pre := range p.KeyPrefixes {
			if !strings.HasPrefix(key, pre) {
				continue
			}
			if p.Name == name {
				held = true
			} else if prefix == "" {
				prefix = pre
			}
		}
	}
	if held || prefix == "" {
		return "", false
	}
	return prefix, true
}

// checkKeyFormat rejects what cannot be an API key before hashing. The
// format is public, so this check may take any time it likes.
func checkKeyFormat(s string) error {
	if !strings.HasPrefix(s, KeyPrefix) {
		return fmt.Errorf("%w: an API key starts with %q", ErrInvalidCredentials, KeyPrefix)
	}
	if len(s) < minKeyLen || len(s) > maxKeyLen {
		return fmt.Errorf("%w: an API key has %d to %d characters", ErrInvalidCredentials, minKeyLen, maxKeyLen)
	}
	for i := len(KeyPrefix); i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
			return fmt.Errorf("%w: an API key is base64url after its prefix", ErrInvalidCredentials)
		}
	}
	return nil
}
