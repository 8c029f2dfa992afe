package main

import (
	"slices"
	"testing"
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
