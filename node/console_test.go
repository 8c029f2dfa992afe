package node

import (
	"crypto/rand"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/console"
)

// TestConsoleIsServedAndOpensNothing: a node with auth on serves the
// console's files under /ui/ without a key (they are public, like
// /healthz), with the console's CSP, while every API call still needs a
// key: mounting the console opens no route of the API, and a path that
// climbs out of /ui/ reaches no API route.
func TestConsoleIsServedAndOpensNothing(t *testing.T) {
	_, sum, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tn := newTestNodes(t)
	addr := tn.startCfg("n1", 1, anyAddrs, func(c *Config) {
		c.Auth = AuthRequired
		c.APIKeys = "ops:default:admin:" + sum
		c.Security.GossipKey = testGossipKey
	}).HTTPAddr()
	fetch := func(path string) (int, http.Header, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, p := range []string{"/ui/", "/ui/approvals", "/ui/assets/app.js"} {
		code, h, body := fetch(p)
		if code != http.StatusOK || h.Get("Content-Security-Policy") != console.ContentSecurityPolicy || body == "" {
			t.Errorf("GET %s without a key = %d, CSP %q", p, code, h.Get("Content-Security-Policy"))
		}
	}
	for _, p := range []string{"/v1/intents", "/v1/whoami", "/v1/audit"} {
		if code, _, _ := fetch(p); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a key = %d, want 401", p, code)
		}
	}
	if code, _, body := fetch("/ui/%2e%2e/v1/intents"); code != http.StatusNotFound || strings.Contains(body, "intents") {
		t.Errorf("GET /ui/../v1/intents = %d %s, want the console's 404", code, body)
	}
}
