package httpapi

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
)

// wantRoles is the role each route needs, written out independently of
// the route table: a route added, dropped or given another role must show
// up here.
var wantRoles = map[string]auth.Role{
	"GET /healthz":    auth.Public,
	"GET /readyz":     auth.Public,
	"GET /metrics":    auth.Public,
	"GET /v1/keys":    auth.Public,
	"GET /v1/cluster": auth.Authenticated,
	"GET /v1/whoami":  auth.Authenticated,

	"POST /v1/intents":               auth.RoleAgent,
	"POST /v1/intents/:key/complete": auth.Settle,
	"POST /v1/intents/:key/renew":    auth.Settle,
	"POST /v1/intents/:key/commit":   auth.Settle,
	"POST /v1/intents/:key/approve":  auth.RoleApprover,
	"POST /v1/intents/:key/reject":   auth.RoleApprover,
	"POST /v1/intents/:key/resolve":  auth.Resolve,
	"GET /v1/intents":                auth.RoleReader,
	"GET /v1/intents/:key":           auth.RoleReader,
	"GET /v1/intents/:key/audit":     auth.RoleReader,

	"POST /v1/tokens/verify": auth.RoleTool,
	"POST /v1/keys/rotate":   auth.RoleAdmin,

	"GET /v1/audit":             auth.RoleReader,
	"GET /v1/policies":          auth.RoleReader,
	"GET /v1/policies/:name":    auth.RoleReader,
	"PUT /v1/policies/:name":    auth.RoleAdmin,
	"DELETE /v1/policies/:name": auth.RoleAdmin,
	"GET /v1/settings":          auth.RoleReader,
	"PUT /v1/settings":          auth.RoleAdmin,

	"GET /v1/namespaces/:ns/usage": auth.RoleReader,

	"GET /v1/admin/snapshot":            auth.RoleAdmin,
	"POST /v1/admin/snapshot/restore":   auth.RoleAdmin,
	"POST /v1/cluster/peers/:id/remove": auth.RoleAdmin,
	"POST /v1/cluster/leader/transfer":  auth.RoleAdmin,
}

// TestRouteTable: the table is the one source of the routes and their
// roles: it says what wantRoles says, and the router serves exactly its
// routes.
func TestRouteTable(t *testing.T) {
	e := newEnv(t)
	if !maps.Equal(e.api.roles, wantRoles) {
		for id, role := range e.api.roles {
			if wantRoles[id] != role {
				t.Errorf("%s needs %q, want %q", id, role, wantRoles[id])
			}
		}
		for id := range wantRoles {
			if _, ok := e.api.roles[id]; !ok {
				t.Errorf("%s is not in the route table", id)
			}
		}
	}
	var served []string
	for _, r := range e.api.echo.Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	slices.Sort(served)
	if table := slices.Sorted(maps.Keys(e.api.roles)); !slices.Equal(served, table) {
		t.Errorf("the router serves %v, the table lists %v", served, table)
	}
}

// TestEveryRouteNeedsItsRole walks the route table with a key of every
// role and without a key: a key whose roles do not cover the route's is
// refused 403 forbidden before any handler runs, one whose roles do gets
// past authorization, no key is 401 unless the route is public. Paths no
// route matches need admin.
func TestEveryRouteNeedsItsRole(t *testing.T) {
	roles := map[string]string{}
	for _, r := range auth.Roles() {
		roles[string(r)] = string(r) // one key per role, named after it
	}
	e, keys := keyedEnv(t, roles, func(c *Config) { c.RateLimits = &RateLimits{} })
	h := e.api.Handler()
	const from = "192.0.2.9:1"
	for _, rt := range e.api.routes() {
		path := strings.NewReplacer(":key", "route-test", ":name", "route-test").Replace(rt.path)
		call := rt.method + " " + path
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			r := serveFrom(t, h, from, rt.method, path, nil)
			switch {
			case rt.role == auth.Public && (r.status == http.StatusUnauthorized || r.status == http.StatusForbidden):
				t.Errorf("%s without a key = %s, want it public", call, r)
			case rt.role != auth.Public:
				problemOf(t, r, http.StatusUnauthorized, CodeUnauthenticated)
			}
			for _, role := range auth.Roles() {
				before := proposed(e.mem)
				r := serveFrom(t, h, from, rt.method, path, nil, bearer(keys[string(role)])...)
				if (auth.Principal{Roles: []auth.Role{role}}).Has(rt.role) {
					if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden && strings.Contains(string(r.body), `"code":"forbidden"`) {
						t.Errorf("%s with a %s key = %s, want it past authorization", call, role, r)
					}
					continue
				}
				problemOf(t, r, http.StatusForbidden, CodeForbidden)
				if n := proposed(e.mem) - before; n != 0 {
					t.Errorf("%s refused to a %s key proposed %d commands", call, role, n)
				}
				if want := `error="insufficient_scope", scope="` + string(rt.role) + `"`; !strings.Contains(r.header.Get("WWW-Authenticate"), want) {
					t.Errorf("%s with a %s key: WWW-Authenticate %q, want %s", call, role, r.header.Get("WWW-Authenticate"), want)
				}
			}
		})
	}

	// Unknown paths and methods fail closed: admin only, then the
	// router's 404 or 405.
	for _, tc := range []struct{ method, path, code string }{
		{http.MethodGet, "/v1/nowhere", CodeNoRoute},
		{http.MethodDelete, "/v1/intents/k", CodeMethodNotAllowed},
		{http.MethodPost, "/healthz", CodeMethodNotAllowed},
	} {
		problemOf(t, serveFrom(t, h, from, tc.method, tc.path, nil), http.StatusUnauthorized, CodeUnauthenticated)
		problemOf(t, serveFrom(t, h, from, tc.method, tc.path, nil, bearer(keys["agent"])...), http.StatusForbidden, CodeForbidden)
		want := http.StatusNotFound
		if tc.code == CodeMethodNotAllowed {
			want = http.StatusMethodNotAllowed
		}
		problemOf(t, serveFrom(t, h, from, tc.method, tc.path, nil, bearer(keys["admin"])...), want, tc.code)
	}
}
