package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
)

// digestEntry is one key as Digest hashes it: every field that decides
// what the key may do, lists sorted (they are sets), never the key itself
// (only its SHA-256, as the configuration holds it).
type digestEntry struct {
	Name        string   `json:"name"`
	Namespace   string   `json:"namespace"`
	Roles       []string `json:"roles"`
	SHA256      string   `json:"sha256"`
	Previous    []string `json:"previous_sha256"`
	Tools       []string `json:"tools"`
	KeyPrefixes []string `json:"key_prefixes"`
}

func digestEntryOf(k KeyConfig) digestEntry {
	roles := make([]string, len(k.Roles))
	for i, r := range k.Roles {
		roles[i] = string(r)
	}
	slices.Sort(roles)
	tools, prefixes := slices.Clone(k.Tools), slices.Clone(k.KeyPrefixes)
	slices.Sort(tools)
	slices.Sort(prefixes)
	if tools == nil {
		tools = []string{}
	}
	previous := make([]string, len(k.PreviousSHA256))
	for i, h := range k.PreviousSHA256 {
		previous[i] = strings.ToLower(h)
	}
	slices.Sort(previous)
	if prefixes == nil {
		prefixes = []string{}
	}
	return digestEntry{Name: k.Name, Namespace: k.Namespace, Roles: roles, SHA256: strings.ToLower(k.SHA256),
		Previous: previous, Tools: tools, KeyPrefixes: prefixes}
}

// Digest returns the hex SHA-256 of ks's configuration: its keys sorted
// by name, each with its namespace, roles, hash, tools and key prefixes
// (lists sorted). Two nodes enforce the same keys exactly when their
// digests are equal, whatever the order of the files they read, so
// operators compare it across nodes after a reload (intentd logs it and
// exports its first 12 digits as a metric label). It holds no secret: the
// configuration is hashes only. A development-mode keyset (nil or
// Disabled) has the digest "off".
func (ks *Keyset) Digest() string {
	if ks.IsDisabled() {
		return "off"
	}
	entries := make([]digestEntry, 0, ks.Len())
	for _, k := range ks.configs() {
		entries = append(entries, digestEntryOf(k))
	}
	slices.SortFunc(entries, func(a, b digestEntry) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.Marshal(entries)
	if err != nil { // strings and string slices always marshal
		panic("auth: digest: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// KeysetChange is how one keyset differs from another, by key name.
type KeysetChange struct {
	// Added are the names only the new keyset has.
	Added []string
	// Removed are the names only the old keyset has.
	Removed []string
	// Changed are the names both have with a different hash, namespace,
	// roles, tools or key prefixes.
	Changed []string
}

// Empty reports whether nothing changed.
func (c KeysetChange) Empty() bool {
	return len(c.Added) == 0 && len(c.Removed) == 0 && len(c.Changed) == 0
}

// Compare returns the names of the keys added, removed and changed from
// old to next, each list sorted, for a reload's log (names only, never a
// hash).
func Compare(old, next *Keyset) KeysetChange {
	index := func(ks *Keyset) map[string]string {
		m := map[string]string{}
		if ks.IsDisabled() {
			return m
		}
		for _, k := range ks.configs() {
			b, _ := json.Marshal(digestEntryOf(k))
			m[k.Name] = string(b)
		}
		return m
	}
	before, after := index(old), index(next)
	var c KeysetChange
	for name, e := range after {
		if prev, ok := before[name]; !ok {
			c.Added = append(c.Added, name)
		} else if prev != e {
			c.Changed = append(c.Changed, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			c.Removed = append(c.Removed, name)
		}
	}
	slices.Sort(c.Added)
	slices.Sort(c.Removed)
	slices.Sort(c.Changed)
	return c
}

// Snapshot returns a keyset that keeps answering with ks's current keys
// whatever later Replace calls do to ks (keysets are immutable tables
// swapped whole, so this copies nothing).
func (ks *Keyset) Snapshot() *Keyset {
	return newKeyset(ks.table())
}
