package httpapi

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/fsm"
)

// authEnv is a node with API keys: agents in two namespaces, an
// approver, a tool and an admin.
func authEnv(t *testing.T) (*testEnv, map[string]string) {
	t.Helper()
	keys := map[string]string{}
	var cfg strings.Builder
	cfg.WriteString(`{"keys":[`)
	for i, k := range []struct{ name, ns, roles string }{
		{"agent-a", "alpha", `["agent"]`}, {"agent-b", "beta", `["agent"]`}, {"approver-a", "alpha", `["approver"]`},
		{"approver-a2", "alpha", `["approver"]`}, {"tool-a", "alpha", `["tool"]`}, {"admin", "alpha", `["admin"]`},
	} {
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[k.name] = plain
		if i > 0 {
			cfg.WriteString(",")
		}
		fmt.Fprintf(&cfg, `{"name":%q,"namespace":%q,"roles":%s,"sha256":%q}`, k.name, k.ns, k.roles, sum)
	}
	cfg.WriteString(`]}`)
	ks, err := auth.Parse([]byte(cfg.String()))
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(c *Config) { c.Auth = ks }), keys
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

func TestAuthRolesAndNamespaces(t *testing.T) {
	e, keys := authEnv(t)
	claim := newClaim("k", "o")

	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claim), http.StatusUnauthorized, CodeUnauthenticated)
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claim, bearer("ik_wrong")...), http.StatusUnauthorized, CodeUnauthenticated)
	problemOf(t, e.do(t, http.MethodPost, "/v1/intents", claim, bearer(keys["tool-a"])...), http.StatusForbidden, CodeForbidden)
	problemOf(t, e.do(t, http.MethodPut, "/v1/policies/p", `{"tools":["x"]}`, bearer(keys["agent-a"])...), http.StatusForbidden, CodeForbidden)
	if n := proposed(e.mem); n != 0 {
		t.Fatalf("refused requests proposed %d commands", n)
	}
	// Public endpoints need no key.
	for _, p := range []string{"/healthz", "/v1/keys", "/metrics"} {
		if r := e.do(t, http.MethodGet, p, nil); r.status != http.StatusOK {
			t.Fatalf("GET %s = %s", p, r)
		}
	}

	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", claim, bearer(keys["agent-a"])...), http.StatusCreated)
	if g.Intent.Namespace != "alpha" {
		t.Fatalf("namespace = %q, want the key's", g.Intent.Namespace)
	}
	// The same key in another namespace is another intent; alpha's is
	// invisible from beta.
	problemOf(t, e.do(t, http.MethodGet, keyPath("k"), nil, bearer(keys["agent-b"])...), http.StatusNotFound, string(fsm.StatusNotFound))
	gb := answer(t, e.do(t, http.MethodPost, "/v1/intents", claim, bearer(keys["agent-b"])...), http.StatusCreated)
	if gb.Intent.Namespace != "beta" || gb.FencingToken == g.FencingToken {
		t.Fatalf("beta's claim = %+v", gb.Intent)
	}
	var page listWire
	_ = json.Unmarshal(e.do(t, http.MethodGet, "/v1/intents", nil, bearer(keys["agent-b"])...).body, &page)
	if len(page.Intents) != 1 || page.Intents[0].Namespace != "beta" {
		t.Fatalf("beta lists %+v", page.Intents)
	}

	// A tool of alpha cannot spend beta's token.
	problemOf(t, e.do(t, http.MethodPost, "/v1/tokens/verify", map[string]string{"execution_token": gb.ExecutionToken}, bearer(keys["tool-a"])...),
		http.StatusUnprocessableEntity, CodeTokenInvalid)
	answer(t, e.do(t, http.MethodPost, "/v1/tokens/verify", map[string]string{"execution_token": g.ExecutionToken}, bearer(keys["tool-a"])...), http.StatusOK)

	// The actor is the key's name, whatever the body says: an approver
	// cannot approve twice by changing the actor field.
	admin := bearer(keys["admin"])
	answer(t, e.do(t, http.MethodPut, "/v1/policies/gate", `{"tools":["gated.*"],"require_approval":true,"approvals_required":2}`, admin...), http.StatusOK)
	gc := newClaim("g", "o")
	gc.Tool = "gated.tool"
	answer(t, e.do(t, http.MethodPost, "/v1/intents", gc, bearer(keys["agent-a"])...), http.StatusAccepted)
	a := answer(t, e.do(t, http.MethodPost, keyPath("g", "approve"), map[string]string{"actor": "someone-else"}, bearer(keys["approver-a"])...), http.StatusOK)
	if len(a.Intent.Approvals) != 1 || a.Intent.Approvals[0].Actor != "approver-a" {
		t.Fatalf("approvals = %+v, want the key's name", a.Intent.Approvals)
	}
	problemOf(t, e.do(t, http.MethodPost, keyPath("g", "approve"), map[string]string{"actor": "third"}, bearer(keys["approver-a"])...),
		http.StatusConflict, string(fsm.StatusAlreadyApproved))
	a = answer(t, e.do(t, http.MethodPost, keyPath("g", "approve"), map[string]string{}, bearer(keys["approver-a2"])...), http.StatusOK)
	if a.Intent.State != "approved" {
		t.Fatalf("after two approvers: %s", a.Intent.State)
	}

	// Audit logs: each namespace reads its own; only an admin reads
	// another's.
	problemOf(t, e.do(t, http.MethodGet, "/v1/audit?namespace=beta", nil, bearer(keys["agent-a"])...), http.StatusForbidden, CodeForbidden)
	if evs := verifyAuditChain(t, e, "beta", admin...); len(evs) != 1 {
		t.Fatalf("beta's audit log holds %d events, want its one claim", len(evs))
	}
	if evs := verifyAuditChain(t, e, fsm.SystemNamespace, admin...); len(evs) == 0 {
		t.Fatal("the system audit log does not show the policy change")
	}
}

// TestRefusalsAreProblems: auth's refusals are answered by the API's one
// problem writer: problem+json with the code's type and title, a detail
// that never echoes the key, and a Bearer challenge that says whether the
// key was missing, bad (RFC 6750 section 3.1) or short of a role.
func TestRefusalsAreProblems(t *testing.T) {
	e, keys := authEnv(t)
	unknown := "ik_" + strings.Repeat("u", 43)
	for _, tc := range []struct {
		name      string
		header    []string
		status    int
		code      string
		challenge string
		detail    string
	}{
		{"no key", nil, http.StatusUnauthorized, CodeUnauthenticated, `Bearer realm="intentd"`, "no API key presented"},
		{"unknown key", bearer(unknown), http.StatusUnauthorized, CodeUnauthenticated,
			`Bearer realm="intentd", error="invalid_token"`, "invalid API key"},
		{"malformed key", bearer("ik_wrong"), http.StatusUnauthorized, CodeUnauthenticated,
			`Bearer realm="intentd", error="invalid_token"`, "invalid API key"},
		{"key without the role", bearer(keys["agent-a"]), http.StatusForbidden, CodeForbidden,
			`Bearer realm="intentd", error="insufficient_scope", scope="approver"`,
			`key "agent-a" has roles [agent]; POST /v1/intents/:key/approve needs approver`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, http.MethodPost, keyPath("k", "approve"), map[string]string{}, tc.header...)
			p := problemOf(t, r, tc.status, tc.code)
			if got := r.header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if p.Title != codes[tc.code].title || !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("problem %s, want title %q and a detail with %q", r.body, codes[tc.code].title, tc.detail)
			}
			for _, k := range append(slices.Collect(maps.Values(keys)), unknown) {
				if strings.Contains(string(r.body), k) || strings.Contains(string(r.body), k[len(auth.KeyPrefix):]) {
					t.Fatal("the answer echoes an API key")
				}
			}
		})
	}
}

// TestRequire: a handler outside the router that Require guards answers
// like the API: the same key check, the same 401 and 403 problems.
func TestRequire(t *testing.T) {
	admin, hAdmin, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	reader, hReader, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := auth.ParseEnv("root:ops:admin:" + hAdmin + ",dash:ops:reader:" + hReader)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	served := 0
	mux.Handle("PUT /debug/thing", Require(ks, auth.RoleAdmin, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served++
		w.WriteHeader(http.StatusNoContent)
	})))
	dev := Require(auth.Disabled(), auth.RoleAdmin, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tc := range []struct {
		name      string
		h         http.Handler
		authz     string
		status    int
		code      string
		challenge string
	}{
		{"no key", mux, "", http.StatusUnauthorized, CodeUnauthenticated, `Bearer realm="intentd"`},
		{"bad key", mux, "Bearer ik_nope", http.StatusUnauthorized, CodeUnauthenticated, `Bearer realm="intentd", error="invalid_token"`},
		{"reader", mux, "Bearer " + reader, http.StatusForbidden, CodeForbidden, `Bearer realm="intentd", error="insufficient_scope", scope="admin"`},
		{"admin", mux, "Bearer " + admin, http.StatusNoContent, "", ""},
		{"development mode", dev, "", http.StatusNoContent, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var header []string
			if tc.authz != "" {
				header = []string{"Authorization", tc.authz}
			}
			r := serveFrom(t, tc.h, "192.0.2.1:1", http.MethodPut, "/debug/thing", nil, header...)
			if r.status != tc.status || r.header.Get("WWW-Authenticate") != tc.challenge {
				t.Fatalf("answer %s, WWW-Authenticate %q", r, r.header.Get("WWW-Authenticate"))
			}
			if tc.code == "" {
				return
			}
			p := problemOf(t, r, tc.status, tc.code)
			if tc.code == CodeForbidden && !strings.Contains(p.Detail, "PUT /debug/thing needs admin") {
				t.Errorf("detail %q does not name the call", p.Detail)
			}
			if strings.Contains(string(r.body), admin) || strings.Contains(string(r.body), reader) {
				t.Fatal("the answer echoes an API key")
			}
		})
	}
	if served != 1 {
		t.Fatalf("the handler ran %d times, want once (for the admin)", served)
	}
}
