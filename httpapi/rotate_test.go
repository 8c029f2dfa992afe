package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// TestRotateRefusesToDropALiveKeyUnlessForced: POST /v1/keys/rotate a
// fourth time in a row would drop the first signing key while its tokens
// may be live: 409 signing_key_in_use naming the key, nothing written;
// {"force": true} rotates; no body and {} are a plain rotation; a body
// that is not the rotation's is 400. Before the refusal existed the
// fourth rotation answered 200.
func TestRotateRefusesToDropALiveKeyUnlessForced(t *testing.T) {
	e := newEnv(t)
	e.claimOK(t, "k", "o") // the first signing key
	first := e.mem.Ledger().SigningKeys()[0].ID
	for i, body := range []any{nil, map[string]any{}, map[string]any{"force": false}} {
		if r := e.do(t, http.MethodPost, "/v1/keys/rotate", body); r.status != http.StatusOK {
			t.Fatalf("rotation %d with %v: %s", i+1, body, r)
		}
	}
	for _, body := range []any{nil, map[string]any{"force": false}} {
		p := problemOf(t, e.do(t, http.MethodPost, "/v1/keys/rotate", body), http.StatusConflict, CodeSigningKeyInUse)
		if !strings.Contains(p.Detail, first) || !strings.Contains(p.Detail, "may be live until") {
			t.Errorf("the detail does not say which key and until when: %s", p.Detail)
		}
	}
	if keys := e.mem.Ledger().SigningKeys(); len(keys) != fsm.MaxSigningKeys || keys[0].ID != first {
		t.Fatalf("a refused rotation changed the keys: %+v", keys)
	}
	problemOf(t, e.do(t, http.MethodPost, "/v1/keys/rotate", `{"force":"yes"}`), http.StatusBadRequest, CodeBadRequest)
	problemOf(t, e.do(t, http.MethodPost, "/v1/keys/rotate", `{"forse":true}`), http.StatusBadRequest, CodeBadRequest)
	if r := e.do(t, http.MethodPost, "/v1/keys/rotate", map[string]any{"force": true}); r.status != http.StatusOK {
		t.Fatalf("forced rotation: %s", r)
	}
	if keys := e.mem.Ledger().SigningKeys(); keys[0].ID == first {
		t.Fatalf("a forced rotation kept the first key: %+v", keys)
	}
	e.mem.Advance(16 * time.Minute)
	e.claimOK(t, "k2", "o") // the ledger's time moves past the default TTL
	if r := e.do(t, http.MethodPost, "/v1/keys/rotate", nil); r.status != http.StatusOK {
		t.Fatalf("rotation once the tokens expired: %s", r)
	}
}
