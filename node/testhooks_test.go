package node

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/httpapi"
)

// TestTestHooksNeedAnAdminKeyWithAuthOn: with --auth=required the debug
// hooks answer 401 without a key and 403 for a key that is not an
// admin's, and work with an admin key; with --auth=off (the fault suite)
// they work without one.
func TestTestHooksNeedAnAdminKeyWithAuthOn(t *testing.T) {
	adminKey, adminSum, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	agentKey, agentSum, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tn := newTestNodes(t)
	secured := tn.startCfg("secured", 1, anyAddrs, func(c *Config) {
		c.Auth = AuthRequired
		c.APIKeys = "ops:default:admin:" + adminSum + ",agents:default:agent:" + agentSum
		c.Security.GossipKey = testGossipKey
	}).HTTPAddr()
	open := tn.startCfg("open", 1, anyAddrs, nil).HTTPAddr()

	type hook struct{ method, path, body string }
	digest := hook{http.MethodGet, "/debug/digest", ""}
	getOffset := hook{http.MethodGet, "/debug/clock-offset", ""}
	setOffset := hook{http.MethodPut, "/debug/clock-offset", `{"offset_ms":1234}`}
	sneakOffset := hook{http.MethodPut, "/debug/clock-offset", `{"offset_ms":999}`}
	call := func(addr string, h hook, key string) (int, map[string]any) {
		t.Helper()
		var body io.Reader
		if h.body != "" {
			body = strings.NewReader(h.body)
		}
		req, err := http.NewRequest(h.method, "http://"+addr+h.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", h.method, h.path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}

	for _, tc := range []struct {
		name string
		addr string
		hook hook
		key  string
		want int
		// offset, when set, is the offset_ms the answer must show.
		offset any
	}{
		{"auth on, digest without a key", secured, digest, "", http.StatusUnauthorized, nil},
		{"auth on, clock offset without a key", secured, getOffset, "", http.StatusUnauthorized, nil},
		{"auth on, setting the clock without a key", secured, sneakOffset, "", http.StatusUnauthorized, nil},
		{"auth on, a bad key", secured, sneakOffset, "ik_" + strings.Repeat("x", 43), http.StatusUnauthorized, nil},
		{"auth on, an agent's key", secured, sneakOffset, agentKey, http.StatusForbidden, nil},
		{"auth on, the clock did not move", secured, getOffset, adminKey, http.StatusOK, float64(0)},
		{"auth on, digest with an admin key", secured, digest, adminKey, http.StatusOK, nil},
		{"auth on, setting the clock with an admin key", secured, setOffset, adminKey, http.StatusOK, float64(1234)},
		{"auth on, the clock moved", secured, getOffset, adminKey, http.StatusOK, float64(1234)},
		{"auth off, digest", open, digest, "", http.StatusOK, nil},
		{"auth off, setting the clock", open, setOffset, "", http.StatusOK, float64(1234)},
		{"auth off, the clock moved", open, getOffset, "", http.StatusOK, float64(1234)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := call(tc.addr, tc.hook, tc.key)
			if code != tc.want {
				t.Fatalf("%s %s = %d %v, want %d", tc.hook.method, tc.hook.path, code, out, tc.want)
			}
			switch {
			case code == http.StatusUnauthorized && out["code"] != httpapi.CodeUnauthenticated,
				code == http.StatusForbidden && out["code"] != httpapi.CodeForbidden:
				t.Errorf("answer %v is not the API's problem", out)
			case code == http.StatusOK && tc.hook == digest && out["digest"] == nil:
				t.Errorf("digest answer %v", out)
			case tc.offset != nil && out["offset_ms"] != tc.offset:
				t.Errorf("offset_ms = %v, want %v", out["offset_ms"], tc.offset)
			}
		})
	}
}
