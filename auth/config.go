package auth

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/intentledger/intentd/internal/namespace"
)

// EnvVar is the environment variable the server reads API keys from, in
// either form ParseEnv accepts.
const EnvVar = "INTENTD_API_KEYS"

// maxConfigSize bounds a key configuration.
const maxConfigSize = 1 << 20

// FileConfig is the JSON form of a key configuration:
//
//	{"keys": [
//	  {"name": "agents-prod", "namespace": "payments", "roles": ["agent"],
//	   "sha256": "<64 hex digits: sha256 of the whole key, ik_ included>"}
//	]}
//
// Unknown fields are errors, so a misspelt field never silently drops a
// restriction.
type FileConfig struct {
	// Keys are the configured keys; there must be at least one.
	Keys []KeyConfig `json:"keys"`
}

// KeyConfig is one configured key.
type KeyConfig struct {
	// Name identifies the key in logs and audit: 1 to 64 ASCII letters,
	// digits and . _ -, starting with a letter or digit; unique.
	Name string `json:"name"`
	// Namespace the key acts in: [a-z0-9][a-z0-9_-]{0,62}
	// (namespace.Valid).
	Namespace string `json:"namespace"`
	// Roles the key holds: one or more of agent, tool, approver, reader,
	// admin.
	Roles []Role `json:"roles"`
	// SHA256 is the hex SHA-256 of the key (HashKey); unique.
	SHA256 string `json:"sha256"`
	// PreviousSHA256 are hashes of earlier secrets of the same key, which
	// authenticate as it until removed: a secret is rotated under the
	// same name, so the grants bound to that name stay settleable by the
	// new secret (at most 4; each unique across the configuration).
	PreviousSHA256 []string `json:"previous_sha256,omitempty"`
	// Tools, on a key with the tool role, are the tools whose execution
	// tokens it may verify (and so spend): path.Match patterns over tool
	// names, as policies write them ("payments.*"). Empty: any tool of its
	// namespace. Only a tool key may set it.
	Tools []string `json:"tools,omitempty"`
	// KeyPrefixes reserve idempotency keys: a key of this namespace that
	// starts with one of them may be claimed only by an API key that
	// lists that prefix. A front end (intent-proxy, intent-mcp) gets its
	// own prefix, so no other key can write the results it replays.
	KeyPrefixes []string `json:"key_prefixes,omitempty"`
}

// Parse reads a key configuration in its JSON form (FileConfig) and
// validates it; errors wrap ErrInvalidConfig and name the offending key.
func Parse(data []byte) (*Keyset, error) {
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrInvalidConfig, len(data), maxConfigSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var fc FileConfig
	if err := dec.Decode(&fc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrInvalidConfig)
	}
	return build(fc.Keys)
}

// ParseEnv reads a key configuration from an environment variable's value
// (see EnvVar). A value starting with "{" is the JSON form (Parse);
// anything else is the compact form: entries separated by commas or white
// space, each
//
//	name:namespace:role[+role...]:sha256hex
//
// for example "agents-prod:payments:agent:9f86d0...,ops:default:admin:60303a...".
func ParseEnv(value string) (*Keyset, error) {
	v := strings.TrimSpace(value)
	if strings.HasPrefix(v, "{") {
		return Parse([]byte(v))
	}
	if len(v) > maxConfigSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds %d", ErrInvalidConfig, len(v), maxConfigSize)
	}
	var keys []KeyConfig
	for i, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		p := strings.Split(f, ":")
		if len(p) != 4 {
			return nil, fmt.Errorf("%w: entry %d has %d fields, want name:namespace:role[+role...]:sha256hex", ErrInvalidConfig, i+1, len(p))
		}
		var roles []Role
		for _, r := range strings.Split(p[2], "+") {
			roles = append(roles, Role(r))
		}
		keys = append(keys, KeyConfig{Name: p[0], Namespace: p[1], Roles: roles, SHA256: p[3]})
	}
	return build(keys)
}

// LoadFile reads and validates a JSON key configuration file.
func LoadFile(path string) (*Keyset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("api keys %s: %w", path, err)
	}
	ks, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("api keys %s: %w", path, err)
	}
	return ks, nil
}

// Load combines a configuration file (path; "" for none) and an
// environment value (env, as ParseEnv reads it; "" for none) into one
// keyset; names and hashes must be unique across both. With neither it
// returns ErrNoKeys: the caller decides whether that means development
// mode (Disabled) or a refusal to start.
func Load(path, env string) (*Keyset, error) {
	if path == "" && strings.TrimSpace(env) == "" {
		return nil, ErrNoKeys
	}
	var keys []KeyConfig
	if path != "" {
		ks, err := LoadFile(path)
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks.configs()...)
	}
	if strings.TrimSpace(env) != "" {
		ks, err := ParseEnv(env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvVar, err)
		}
		keys = append(keys, ks.configs()...)
	}
	return build(keys)
}

// configs turns a keyset back into its configuration.
func (ks *Keyset) configs() []KeyConfig {
	t := ks.table()
	out := make([]KeyConfig, 0, len(t.entries))
	for _, e := range t.entries {
		if e.previous {
			// build puts a key's previous hashes right after it.
			last := &out[len(out)-1]
			last.PreviousSHA256 = append(last.PreviousSHA256, hex.EncodeToString(e.hash[:]))
			continue
		}
		out = append(out, KeyConfig{Name: e.principal.Name, Namespace: e.principal.Namespace,
			Roles: append([]Role(nil), e.principal.Roles...), SHA256: hex.EncodeToString(e.hash[:]),
			Tools: slices.Clone(e.principal.Tools), KeyPrefixes: slices.Clone(e.principal.KeyPrefixes)})
	}
	return out
}

// build validates keys and makes the keyset.
func build(keys []KeyConfig) (*Keyset, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrInvalidConfig)
	}
	t := &table{entries: make([]entry, 0, len(keys))}
	names := make(map[string]int, len(keys))
	hashes := make(map[[32]byte]string, len(keys))
	for i, k := range keys {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: keys[%d] (%q): %s", ErrInvalidConfig, i, k.Name, fmt.Sprintf(format, args...))
		}
		if !validName(k.Name) {
			return nil, bad("name must be 1 to 64 ASCII letters, digits and . _ -, starting with a letter or digit")
		}
		if j, dup := names[k.Name]; dup {
			return nil, bad("name already used by keys[%d]", j)
		}
		names[k.Name] = i
		if !namespace.Valid(k.Namespace) {
			return nil, bad("namespace %q must match [a-z0-9][a-z0-9_-]{0,62}", k.Namespace)
		}
		if len(k.Roles) == 0 {
			return nil, bad("no roles; want one or more of %v", assignable)
		}
		roles := make([]Role, 0, len(k.Roles))
		for _, r := range k.Roles {
			if !r.assignable() {
				return nil, bad("unknown role %q; want one or more of %v", r, assignable)
			}
			for _, have := range roles {
				if have == r {
					return nil, bad("role %q listed twice", r)
				}
			}
			roles = append(roles, r)
		}
		hashOf := func(field, v string) ([32]byte, error) {
			var h [32]byte
			if len(v) != 2*len(h) {
				return h, bad("%s must be %d hex digits, got %d characters", field, 2*len(h), len(v))
			}
			if _, err := hex.Decode(h[:], []byte(v)); err != nil {
				return h, bad("%s is not hex: %v", field, err)
			}
			if other, dup := hashes[h]; dup {
				return h, bad("same key hash as %q", other)
			}
			hashes[h] = k.Name
			return h, nil
		}
		var e entry
		var err error
		if e.hash, err = hashOf("sha256", k.SHA256); err != nil {
			return nil, err
		}
		if len(k.PreviousSHA256) > maxPreviousHashes {
			return nil, bad("previous_sha256: %d hashes, at most %d", len(k.PreviousSHA256), maxPreviousHashes)
		}
		previous := make([][32]byte, len(k.PreviousSHA256))
		for j, h := range k.PreviousSHA256 {
			if previous[j], err = hashOf("previous_sha256", h); err != nil {
				return nil, err
			}
		}
		if err := checkTools(k.Tools, roles); err != nil {
			return nil, bad("%v", err)
		}
		if err := checkKeyPrefixes(k.KeyPrefixes); err != nil {
			return nil, bad("%v", err)
		}
		e.principal = Principal{Name: k.Name, Namespace: k.Namespace, Roles: roles,
			Tools: slices.Clone(k.Tools), KeyPrefixes: slices.Clone(k.KeyPrefixes)}
		t.entries = append(t.entries, e)
		for _, h := range previous {
			t.entries = append(t.entries, entry{hash: h, principal: e.principal, previous: true})
		}
	}
	return newKeyset(t), nil
}

// maxPreviousHashes bounds a key's previous secrets (KeyConfig.PreviousSHA256).
const maxPreviousHashes = 4

// maxKeyPatterns bounds a key's tools and key prefixes.
const maxKeyPatterns = 64

// checkTools validates a key's tool patterns: only a tool key has them,
// and each is a valid path.Match pattern of 1 to 256 bytes.
func checkTools(tools []string, roles []Role) error {
	if len(tools) == 0 {
		return nil
	}
	if !slices.Contains(roles, RoleTool) {
		return errors.New("tools restricts what a tool key verifies; this key has no tool role")
	}
	if len(tools) > maxKeyPatterns {
		return fmt.Errorf("tools: %d patterns, at most %d", len(tools), maxKeyPatterns)
	}
	for _, t := range tools {
		if t == "" || len(t) > 256 {
			return fmt.Errorf("tools: pattern %q must be 1 to 256 bytes", t)
		}
		if _, err := path.Match(t, ""); err != nil {
			return fmt.Errorf("tools: pattern %q: %w", t, err)
		}
	}
	return nil
}

// checkKeyPrefixes validates a key's reserved prefixes: 1 to 64 bytes of
// printable ASCII without spaces, none listed twice.
func checkKeyPrefixes(prefixes []string) error {
	if len(prefixes) > maxKeyPatterns {
		return fmt.Errorf("key_prefixes: %d prefixes, at most %d", len(prefixes), maxKeyPatterns)
	}
	for i, p := range prefixes {
		if p == "" || len(p) > 64 {
			return fmt.Errorf("key_prefixes: %q must be 1 to 64 bytes", p)
		}
		for j := 0; j < len(p); j++ {
			if p[j] <= ' ' || p[j] >= 0x7f {
				return fmt.Errorf("key_prefixes: %q must be printable ASCII without spaces", p)
			}
		}
		if slices.Contains(prefixes[:i], p) {
			return fmt.Errorf("key_prefixes: %q is listed twice", p)
		}
	}
	return nil
}

// validName reports whether s is a usable key name.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if !alnum && (i == 0 || (b != '.' && b != '_' && b != '-')) {
			return false
		}
	}
	return true
}
