package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestKeys(t *testing.T) {
	e := newEnv(t)
	e.claim(t, "k", "o") // the first grant makes the first signing key
	r := e.run(t, "keys")
	expect(t, r, exitOK, "KID", "OKP", "Ed25519", "EdDSA")
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	e.jsonOut(t, &set, "keys")
	if len(set.Keys) != 1 {
		t.Fatalf("keys = %+v", set)
	}
	expect(t, e.run(t, "keys", "rotate"), exitOK, "rotated")
	var rotated map[string]string
	e.jsonOut(t, &rotated, "keys", "rotate")
	e.jsonOut(t, &set, "keys")
	if len(set.Keys) != 3 || !slices.ContainsFunc(set.Keys, func(k struct {
		Kid string `json:"kid"`
	}) bool {
		return k.Kid == rotated["kid"]
	}) {
		t.Errorf("after two rotations, keys = %+v (rotated to %q)", set, rotated["kid"])
	}
}

// TestKeysRotateRefusesToDropALiveKey: the cluster keeps 4 signing keys;
// "keys rotate" a fourth time in a row would drop the first key while the
// token it signed may still be live, so it is refused (exit 9, the
// detail names the key and until when) and nothing changes; --force
// rotates; once the longest token TTL has passed a plain rotation goes
// through. Before the refusal existed, the fourth rotation exited 0.
func TestKeysRotateRefusesToDropALiveKey(t *testing.T) {
	e := newEnv(t)
	e.claim(t, "k", "o") // the first signing key
	first := e.mem.Ledger().SigningKeys()[0].ID
	for range 3 {
		expect(t, e.run(t, "keys", "rotate"), exitOK, "rotated")
	}
	r := e.run(t, "keys", "rotate")
	expect(t, r, exitRefused)
	for _, w := range []string{"signing_key_in_use", first, "may be live until", "--force"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, r)
		}
	}
	if keys := e.mem.Ledger().SigningKeys(); len(keys) != 4 || keys[0].ID != first {
		t.Fatalf("a refused rotation changed the keys: %+v", keys)
	}
	expect(t, e.run(t, "keys", "--force"), exitUsage)
	expect(t, e.run(t, "keys", "rotate", "--force"), exitOK, "rotated")
	if keys := e.mem.Ledger().SigningKeys(); len(keys) != 4 || keys[0].ID == first {
		t.Fatalf("a forced rotation kept the first key: %+v", keys)
	}
	expect(t, e.run(t, "keys", "rotate"), exitRefused)
	e.mem.Advance(16 * time.Minute)
	e.claim(t, "k2", "o") // the ledger's time moves
	expect(t, e.run(t, "keys", "rotate"), exitOK, "rotated")
}
