package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// testServer serves every DefaultRoutes route plus an admin-only route no
// table lists; each handler answers with the principal it sees.
func testServer(t *testing.T, ks *Keyset) *echo.Echo {
	t.Helper()
	e := echo.New()
	e.Use(Middleware(ks, ByRoute(DefaultRoutes())))
	h := func(c echo.Context) error {
		p, ok := PrincipalFrom(c)
		return c.JSON(http.StatusOK, map[string]any{"ok": ok, "name": p.Name, "namespace": p.Namespace})
	}
	for route := range DefaultRoutes() {
		method, path, _ := strings.Cut(route, " ")
		e.Add(method, path, h)
	}
	e.POST("/v1/admin/snapshot", h)
	return e
}

type answer struct {
	status    int
	challenge string
	ctype     string
	body      map[string]any
	raw       string
}

func do(t *testing.T, e *echo.Echo, method, path string, authz ...string) answer {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for _, a := range authz {
		req.Header.Add("Authorization", a)
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	a := answer{status: rec.Code, challenge: rec.Header().Get("WWW-Authenticate"), ctype: rec.Header().Get("Content-Type"), raw: rec.Body.String()}
	_ = json.Unmarshal(rec.Body.Bytes(), &a.body)
	return a
}

func TestMiddleware(t *testing.T) {
	agent, hAgent := testKey(t, 1)
	approver, hApprover := testKey(t, 2)
	tool, hTool := testKey(t, 3)
	reader, hReader := testKey(t, 4)
	admin, hAdmin := testKey(t, 5)
	unknown, _ := testKey(t, 6)
	ks, err := ParseEnv(strings.Join([]string{
		"agents:payments:agent:" + hAgent, "approvers:payments:approver:" + hApprover,
		"tools:payments:tool:" + hTool, "dash:payments:reader:" + hReader, "root:ops:admin:" + hAdmin,
	}, ","))
	if err != nil {
		t.Fatal(err)
	}
	e := testServer(t, ks)
	bearer := func(k string) string { return "Bearer " + k }

	const (
		claim    = "POST /v1/intents"
		complete = "POST /v1/intents/charge%3A1/complete"
		get      = "GET /v1/intents/charge%3A1"
		list     = "GET /v1/intents?state=declared"
		audit    = "GET /v1/intents/k/audit"
		approve  = "POST /v1/intents/k/approve"
		resolve  = "POST /v1/intents/k/resolve"
		verify   = "POST /v1/tokens/verify"
		cluster  = "GET /v1/cluster"
		snapshot = "POST /v1/admin/snapshot"
		unrouted = "GET /v1/nowhere"
		badVerb  = "DELETE /v1/intents/k"
	)
	tests := []struct {
		name      string
		call      string
		authz     []string
		status    int
		code      string // problem code, for 401 and 403
		principal string // name seen by the handler, for 200
	}{
		// 401.
		{"no header", claim, nil, 401, CodeUnauthenticated, ""},
		{"basic auth", claim, []string{"Basic YWdlbnQ6cHc="}, 401, CodeUnauthenticated, ""},
		{"bearer without token", claim, []string{"Bearer"}, 401, CodeUnauthenticated, ""},
		{"bearer with blank token", claim, []string{"Bearer   "}, 401, CodeUnauthenticated, ""},
		{"two tokens", claim, []string{"Bearer " + agent + " " + agent}, 401, CodeUnauthenticated, ""},
		{"two headers", claim, []string{bearer(agent), bearer(agent)}, 401, CodeUnauthenticated, ""},
		{"token without scheme", claim, []string{agent}, 401, CodeUnauthenticated, ""},
		{"unknown key", claim, []string{bearer(unknown)}, 401, CodeUnauthenticated, ""},
		{"not an API key", claim, []string{"Bearer eyJhbGciOiJub25lIn0.e30."}, 401, CodeUnauthenticated, ""},
		{"unrouted path without key", unrouted, nil, 401, CodeUnauthenticated, ""},
		// 403.
		{"agent approves", approve, []string{bearer(agent)}, 403, CodeForbidden, ""},
		{"agent verifies a token", verify, []string{bearer(agent)}, 403, CodeForbidden, ""},
		{"approver claims", claim, []string{bearer(approver)}, 403, CodeForbidden, ""},
		{"tool claims", claim, []string{bearer(tool)}, 403, CodeForbidden, ""},
		{"tool reads", get, []string{bearer(tool)}, 403, CodeForbidden, ""},
		{"reader claims", claim, []string{bearer(reader)}, 403, CodeForbidden, ""},
		{"reader completes", complete, []string{bearer(reader)}, 403, CodeForbidden, ""},
		{"agent on an admin route", snapshot, []string{bearer(agent)}, 403, CodeForbidden, ""},
		{"agent on an unrouted path", unrouted, []string{bearer(agent)}, 403, CodeForbidden, ""},
		// Passes.
		{"agent claims", claim, []string{bearer(agent)}, 200, "", "agents"},
		{"scheme is case-insensitive", claim, []string{"bearer " + agent}, 200, "", "agents"},
		{"agent completes", complete, []string{bearer(agent)}, 200, "", "agents"},
		{"agent reads", get, []string{bearer(agent)}, 200, "", "agents"},
		{"agent lists", list, []string{bearer(agent)}, 200, "", "agents"},
		{"approver approves", approve, []string{bearer(approver)}, 200, "", "approvers"},
		{"approver resolves", resolve, []string{bearer(approver)}, 200, "", "approvers"},
		{"approver reads the audit", audit, []string{bearer(approver)}, 200, "", "approvers"},
		{"tool verifies", verify, []string{bearer(tool)}, 200, "", "tools"},
		{"reader reads", get, []string{bearer(reader)}, 200, "", "dash"},
		{"every key reads the cluster: tool", cluster, []string{bearer(tool)}, 200, "", "tools"},
		{"every key reads the cluster: agent", cluster, []string{bearer(agent)}, 200, "", "agents"},
		{"cluster needs a key", cluster, nil, 401, CodeUnauthenticated, ""},
		// Admin passes everything.
		{"admin claims", claim, []string{bearer(admin)}, 200, "", "root"},
		{"admin approves", approve, []string{bearer(admin)}, 200, "", "root"},
		{"admin verifies", verify, []string{bearer(admin)}, 200, "", "root"},
		{"admin reads", get, []string{bearer(admin)}, 200, "", "root"},
		{"admin snapshots", snapshot, []string{bearer(admin)}, 200, "", "root"},
		{"admin on an unrouted path gets the router's 404", unrouted, []string{bearer(admin)}, 404, "", ""},
		{"admin with a wrong method gets the router's 405", badVerb, []string{bearer(admin)}, 405, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, path, _ := strings.Cut(tt.call, " ")
			a := do(t, e, method, path, tt.authz...)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d: %s", a.status, tt.status, a.raw)
			}
			for _, k := range []string{agent, approver, tool, reader, admin, unknown} {
				if strings.Contains(a.raw, k) || strings.Contains(a.raw, k[len(KeyPrefix):]) {
					t.Fatal("the answer echoes an API key")
				}
			}
			switch tt.status {
			case 200:
				if a.body["ok"] != true || a.body["name"] != tt.principal {
					t.Fatalf("handler saw %v, want principal %q", a.body, tt.principal)
				}
			case 401, 403:
				if a.ctype != "application/problem+json" {
					t.Fatalf("content type %q", a.ctype)
				}
				if a.body["code"] != tt.code || a.body["status"] != float64(tt.status) ||
					a.body["type"] != ProblemTypeBase+tt.code || a.body["title"] == "" || a.body["detail"] == "" {
					t.Fatalf("problem %v", a.body)
				}
				if !strings.HasPrefix(a.challenge, `Bearer realm="intentd"`) {
					t.Fatalf("WWW-Authenticate %q", a.challenge)
				}
				if tt.status == 403 && !strings.Contains(a.challenge, `error="insufficient_scope"`) {
					t.Fatalf("WWW-Authenticate %q", a.challenge)
				}
			}
		})
	}

	// The challenge says whether credentials were missing or bad (RFC 6750 3.1).
	if a := do(t, e, "POST", "/v1/intents"); strings.Contains(a.challenge, "error=") {
		t.Fatalf("challenge without credentials %q", a.challenge)
	}
	if a := do(t, e, "POST", "/v1/intents", bearer(unknown)); !strings.Contains(a.challenge, `error="invalid_token"`) {
		t.Fatalf("challenge for a bad key %q", a.challenge)
	}
}

func TestMiddlewarePublicRoutes(t *testing.T) {
	_, h := testKey(t, 1)
	ks, err := ParseEnv("a:payments:agent:" + h)
	if err != nil {
		t.Fatal(err)
	}
	e := testServer(t, ks)
	unknown, _ := testKey(t, 6)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/keys"} {
		for _, authz := range [][]string{nil, {"Bearer " + unknown}, {"Basic x"}} {
			a := do(t, e, "GET", path, authz...)
			if a.status != 200 || a.body["ok"] != false {
				t.Fatalf("GET %s with %v: %d %s", path, authz, a.status, a.raw)
			}
		}
	}
	// Public means public for GET only.
	if a := do(t, e, "POST", "/healthz"); a.status != 401 {
		t.Fatalf("POST /healthz without key: %d", a.status)
	}
}

func TestMiddlewareDevelopmentMode(t *testing.T) {
	for name, ks := range map[string]*Keyset{"nil": nil, "Disabled": Disabled()} {
		t.Run(name, func(t *testing.T) {
			e := testServer(t, ks)
			for _, call := range [][2]string{{"POST", "/v1/intents"}, {"POST", "/v1/admin/snapshot"}, {"GET", "/healthz"}} {
				a := do(t, e, call[0], call[1])
				if a.status != 200 || a.body["ok"] != true || a.body["namespace"] != DefaultNamespace || a.body["name"] != "dev" {
					t.Fatalf("%v: %d %s", call, a.status, a.raw)
				}
			}
		})
	}
}

func TestMiddlewareReload(t *testing.T) {
	pa, ha := testKey(t, 1)
	pb, hb := testKey(t, 2)
	first, err := ParseEnv("a:payments:agent:" + ha)
	if err != nil {
		t.Fatal(err)
	}
	second, err := ParseEnv("b:payments:agent:" + hb)
	if err != nil {
		t.Fatal(err)
	}
	live := &Keyset{}
	live.Replace(first)
	e := testServer(t, live)
	if a := do(t, e, "POST", "/v1/intents", "Bearer "+pa); a.status != 200 {
		t.Fatalf("a before reload: %d", a.status)
	}
	live.Replace(second)
	if a := do(t, e, "POST", "/v1/intents", "Bearer "+pa); a.status != 401 {
		t.Fatalf("a after reload: %d", a.status)
	}
	if a := do(t, e, "POST", "/v1/intents", "Bearer "+pb); a.status != 200 {
		t.Fatalf("b after reload: %d", a.status)
	}
}

func TestByRoute(t *testing.T) {
	table := map[string]Role{"GET /x": Public, "POST /x": RoleAgent}
	required := ByRoute(table)
	table["POST /x"] = RoleAdmin // ByRoute copied the table
	e := echo.New()
	for _, tt := range []struct {
		method, path string
		role         Role
		public       bool
	}{
		{"GET", "/x", Public, true},
		{"POST", "/x", RoleAgent, false},
		{"PUT", "/x", RoleAdmin, false},
		{"GET", "/y", RoleAdmin, false},
	} {
		c := e.NewContext(httptest.NewRequest(tt.method, tt.path, nil), httptest.NewRecorder())
		c.SetPath(tt.path)
		if role, public := required(c); role != tt.role || public != tt.public {
			t.Errorf("%s %s = %s, %v; want %s, %v", tt.method, tt.path, role, public, tt.role, tt.public)
		}
	}
}
