package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/intentledger/intentd/internal/namespace"
	"github.com/labstack/echo/v4"
)

// testRoles is the role each route of testServer needs, as a server's
// route table says it (httpapi's is the real one).
var testRoles = map[string]Role{
	"GET /healthz":                   Public,
	"GET /v1/cluster":                Authenticated,
	"POST /v1/intents":               RoleAgent,
	"POST /v1/intents/:key/complete": Settle,
	"GET /v1/intents/:key":           RoleReader,
	"GET /v1/intents":                RoleReader,
	"GET /v1/intents/:key/audit":     RoleReader,
	"POST /v1/intents/:key/approve":  RoleApprover,
	"POST /v1/intents/:key/resolve":  Resolve,
	"POST /v1/tokens/verify":         RoleTool,
	"POST /v1/admin/snapshot":        RoleAdmin,
}

// testServer serves every testRoles route; each handler answers with the
// principal it sees. Its error handler answers what Middleware refused
// with 401 or 403 and the error's text, and records the error.
func testServer(t *testing.T, ks *Keyset) (*echo.Echo, *error) {
	t.Helper()
	e := echo.New()
	var refused error
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		refused = err
		status := http.StatusInternalServerError
		var he *echo.HTTPError
		switch {
		case errors.Is(err, ErrForbidden):
			status = http.StatusForbidden
		case errors.Is(err, ErrNoCredentials), errors.Is(err, ErrInvalidCredentials):
			status = http.StatusUnauthorized
		case errors.As(err, &he):
			status = he.Code
		}
		_ = c.JSON(status, map[string]any{"error": err.Error()})
	}
	e.Use(Middleware(ks, func(c echo.Context) Role { return testRoles[c.Request().Method+" "+c.Path()] }))
	h := func(c echo.Context) error {
		p, ok := PrincipalFrom(c)
		return c.JSON(http.StatusOK, map[string]any{"ok": ok, "name": p.Name, "namespace": p.Namespace})
	}
	for route := range testRoles {
		method, path, _ := strings.Cut(route, " ")
		e.Add(method, path, h)
	}
	return e, &refused
}

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func do(t *testing.T, e *echo.Echo, method, path string, authz ...string) answer {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for _, a := range authz {
		req.Header.Add("Authorization", a)
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	a := answer{status: rec.Code, raw: rec.Body.String()}
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
	e, refused := testServer(t, ks)
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
	)
	tests := []struct {
		name   string
		call   string
		authz  []string
		status int
		// err is the kind of refusal, for 401 and 403.
		err error
		// principal is the name seen by the handler (200) or refused (403);
		// role the one a 403 says is missing.
		principal string
		role      Role
	}{
		// 401.
		{"no header", claim, nil, 401, ErrNoCredentials, "", ""},
		{"basic auth", claim, []string{"Basic YWdlbnQ6cHc="}, 401, ErrNoCredentials, "", ""},
		{"bearer without token", claim, []string{"Bearer"}, 401, ErrInvalidCredentials, "", ""},
		{"bearer with blank token", claim, []string{"Bearer   "}, 401, ErrInvalidCredentials, "", ""},
		{"two tokens", claim, []string{"Bearer " + agent + " " + agent}, 401, ErrInvalidCredentials, "", ""},
		{"two headers", claim, []string{bearer(agent), bearer(agent)}, 401, ErrInvalidCredentials, "", ""},
		{"token without scheme", claim, []string{agent}, 401, ErrNoCredentials, "", ""},
		{"unknown key", claim, []string{bearer(unknown)}, 401, ErrInvalidCredentials, "", ""},
		{"not an API key", claim, []string{"Bearer eyJhbGciOiJub25lIn0.e30."}, 401, ErrInvalidCredentials, "", ""},
		{"cluster needs a key", cluster, nil, 401, ErrNoCredentials, "", ""},
		// 403.
		{"agent approves", approve, []string{bearer(agent)}, 403, ErrForbidden, "agents", RoleApprover},
		{"agent verifies a token", verify, []string{bearer(agent)}, 403, ErrForbidden, "agents", RoleTool},
		{"approver claims", claim, []string{bearer(approver)}, 403, ErrForbidden, "approvers", RoleAgent},
		{"tool claims", claim, []string{bearer(tool)}, 403, ErrForbidden, "tools", RoleAgent},
		{"tool reads", get, []string{bearer(tool)}, 403, ErrForbidden, "tools", RoleReader},
		{"reader claims", claim, []string{bearer(reader)}, 403, ErrForbidden, "dash", RoleAgent},
		{"reader completes", complete, []string{bearer(reader)}, 403, ErrForbidden, "dash", Settle},
		{"agent on an admin route", snapshot, []string{bearer(agent)}, 403, ErrForbidden, "agents", RoleAdmin},
		// Passes.
		{"agent claims", claim, []string{bearer(agent)}, 200, nil, "agents", ""},
		{"scheme is case-insensitive", claim, []string{"bearer " + agent}, 200, nil, "agents", ""},
		{"agent completes", complete, []string{bearer(agent)}, 200, nil, "agents", ""},
		{"agent reads", get, []string{bearer(agent)}, 200, nil, "agents", ""},
		{"agent lists", list, []string{bearer(agent)}, 200, nil, "agents", ""},
		{"approver approves", approve, []string{bearer(approver)}, 200, nil, "approvers", ""},
		{"approver resolves", resolve, []string{bearer(approver)}, 200, nil, "approvers", ""},
		{"approver reads the audit", audit, []string{bearer(approver)}, 200, nil, "approvers", ""},
		{"tool verifies", verify, []string{bearer(tool)}, 200, nil, "tools", ""},
		{"reader reads", get, []string{bearer(reader)}, 200, nil, "dash", ""},
		{"every key reads the cluster: tool", cluster, []string{bearer(tool)}, 200, nil, "tools", ""},
		{"every key reads the cluster: agent", cluster, []string{bearer(agent)}, 200, nil, "agents", ""},
		// Admin passes everything.
		{"admin claims", claim, []string{bearer(admin)}, 200, nil, "root", ""},
		{"admin approves", approve, []string{bearer(admin)}, 200, nil, "root", ""},
		{"admin verifies", verify, []string{bearer(admin)}, 200, nil, "root", ""},
		{"admin reads", get, []string{bearer(admin)}, 200, nil, "root", ""},
		{"admin snapshots", snapshot, []string{bearer(admin)}, 200, nil, "root", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			*refused = nil
			method, path, _ := strings.Cut(tt.call, " ")
			a := do(t, e, method, path, tt.authz...)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d: %s", a.status, tt.status, a.raw)
			}
			for _, k := range []string{agent, approver, tool, reader, admin, unknown} {
				if strings.Contains(a.raw, k) || strings.Contains(a.raw, k[len(KeyPrefix):]) {
					t.Fatal("the refusal echoes an API key")
				}
			}
			if tt.status == 200 {
				if *refused != nil || a.body["ok"] != true || a.body["name"] != tt.principal {
					t.Fatalf("handler saw %v (refused %v), want principal %q", a.body, *refused, tt.principal)
				}
				return
			}
			if !errors.Is(*refused, tt.err) {
				t.Fatalf("refused with %v, want %v", *refused, tt.err)
			}
			var fe *ForbiddenError
			switch {
			case tt.err == ErrForbidden && (!errors.As(*refused, &fe) || fe.Principal.Name != tt.principal || fe.Role != tt.role):
				t.Fatalf("refused with %#v, want key %q lacking %s", *refused, tt.principal, tt.role)
			case tt.err != ErrForbidden && errors.As(*refused, &fe):
				t.Fatalf("a 401 is a ForbiddenError: %v", *refused)
			}
		})
	}
}

func TestMiddlewarePublicRoutes(t *testing.T) {
	_, h := testKey(t, 1)
	ks, err := ParseEnv("a:payments:agent:" + h)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := testServer(t, ks)
	unknown, _ := testKey(t, 6)
	for _, authz := range [][]string{nil, {"Bearer " + unknown}, {"Basic x"}} {
		// Nothing is checked, and no principal is stored.
		if a := do(t, e, "GET", "/healthz", authz...); a.status != 200 || a.body["ok"] != false {
			t.Fatalf("GET /healthz with %v: %d %s", authz, a.status, a.raw)
		}
	}
}

func TestMiddlewareDevelopmentMode(t *testing.T) {
	for name, ks := range map[string]*Keyset{"nil": nil, "Disabled": Disabled()} {
		t.Run(name, func(t *testing.T) {
			e, _ := testServer(t, ks)
			for _, call := range [][2]string{{"POST", "/v1/intents"}, {"POST", "/v1/admin/snapshot"}, {"GET", "/healthz"}} {
				a := do(t, e, call[0], call[1])
				if a.status != 200 || a.body["ok"] != true || a.body["namespace"] != namespace.Default || a.body["name"] != "dev" {
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
	e, _ := testServer(t, live)
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
