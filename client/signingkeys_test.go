package client_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
)

func TestJWKSAndRotateKey(t *testing.T) {
	_, c, _ := grantedNode(t) // the first grant makes the first key
	ctx := context.Background()
	kids := func() []string {
		t.Helper()
		raw, err := c.JWKS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var set struct {
			Keys []struct {
				Kid string `json:"kid"`
				Kty string `json:"kty"`
				Crv string `json:"crv"`
			} `json:"keys"`
		}
		if err := json.Unmarshal(raw, &set); err != nil {
			t.Fatalf("JWKS %s: %v", raw, err)
		}
		var out []string
		for _, k := range set.Keys {
			if k.Kty != "OKP" || k.Crv != "Ed25519" {
				t.Errorf("key %+v is not Ed25519", k)
			}
			out = append(out, k.Kid)
		}
		return out
	}
	if got := kids(); len(got) != 1 {
		t.Fatalf("keys = %v, want one", got)
	}
	kid, err := c.RotateKey(ctx)
	if err != nil || kid == "" {
		t.Fatalf("rotate = %q, %v", kid, err)
	}
	if got := kids(); len(got) != 2 || !slices.Contains(got, kid) {
		t.Errorf("keys after rotating to %s = %v", kid, got)
	}
}
