package auth

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
	out := make([]KeyConfig, len(t.entries))
	for i, e := range t.entries {
		out[i] = KeyConfig{Name: e.principal.Name, Namespace: e.principal.Namespace,
			Roles: append([]Role(nil), e.principal.Roles...), SHA256: hex.EncodeToString(e.hash[:])}
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
		var e entry
		if len(k.SHA256) != 2*len(e.hash) {
			return nil, bad("sha256 must be %d hex digits, got %d characters", 2*len(e.hash), len(k.SHA256))
		}
		if _, err := hex.Decode(e.hash[:], []byte(k.SHA256)); err != nil {
			return nil, bad("sha256 is not hex: %v", err)
		}
		if other, dup := hashes[e.hash]; dup {
			return nil, bad("same key hash as %q", other)
		}
		hashes[e.hash] = k.Name
		e.principal = Principal{Name: k.Name, Namespace: k.Namespace, Roles: roles}
		t.entries = append(t.entries, e)
	}
	return newKeyset(t), nil
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
