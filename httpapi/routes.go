package httpapi

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/intentledger/intentd/auth"
)

// route is one endpoint of the API: its method and path template (as
// echo routes them, c.Path()), the role a caller's API key needs, and
// its handler.
type route struct {
	method, path string
	role         auth.Role
	handler      echo.HandlerFunc
}

// routes is the one table of the API's endpoints, each with the role it
// needs; the server registers exactly these (router), and authorizes by
// them (roleOf):
//
//	public         GET /healthz, /readyz, /metrics, /v1/keys
//	authenticated  GET /v1/cluster (every SDK reads it to find the leader),
//	               /v1/whoami (the key's name, namespace and roles)
//	agent          POST /v1/intents
//	agent or reconciler (auth.Settle)     POST .../complete, .../renew, .../commit
//	approver       POST .../approve, .../reject
//	approver or reconciler (auth.Resolve) POST .../resolve
//	reader         GET /v1/intents, /v1/intents/:key, .../audit, /v1/audit,
//	               /v1/policies, /v1/policies/:name, /v1/settings,
//	               /v1/namespaces/:ns/usage (its own namespace; admin any)
//	tool           POST /v1/tokens/verify
//	admin          PUT and DELETE /v1/policies/:name, PUT /v1/settings,
//	               POST /v1/keys/rotate, /v1/admin/snapshot[/restore],
//	               /v1/cluster/peers/:id/remove, /v1/cluster/leader/transfer
//
// A request no route matches (an unknown path or method) needs admin: it
// fails closed, 401 or 403 without an admin key and the router's 404 or
// 405 with one.
func (s *Server) routes() []route {
	return []route{
		{http.MethodGet, "/healthz", auth.Public, s.healthz},
		{http.MethodGet, "/readyz", auth.Public, s.readyz},
		{http.MethodGet, "/metrics", auth.Public, echo.WrapHandler(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))},
		{http.MethodGet, "/v1/keys", auth.Public, s.jwks},

		{http.MethodGet, "/v1/cluster", auth.Authenticated, s.clusterStatus},
		{http.MethodGet, "/v1/whoami", auth.Authenticated, s.whoami},

		{http.MethodPost, "/v1/intents", auth.RoleAgent, s.claim},
		{http.MethodPost, "/v1/intents/:key/complete", auth.Settle, s.complete},
		{http.MethodPost, "/v1/intents/:key/renew", auth.Settle, s.renew},
		{http.MethodPost, "/v1/intents/:key/commit", auth.Settle, s.commit},
		{http.MethodPost, "/v1/intents/:key/approve", auth.RoleApprover, s.decide(true)},
		{http.MethodPost, "/v1/intents/:key/reject", auth.RoleApprover, s.decide(false)},
		{http.MethodPost, "/v1/intents/:key/resolve", auth.Resolve, s.resolve},
		{http.MethodGet, "/v1/intents", auth.RoleReader, s.list},
		{http.MethodGet, "/v1/intents/:key", auth.RoleReader, s.get},
		{http.MethodGet, "/v1/intents/:key/audit", auth.RoleReader, s.audit},

		{http.MethodPost, "/v1/tokens/verify", auth.RoleTool, s.verifyToken},
		{http.MethodPost, "/v1/keys/rotate", auth.RoleAdmin, s.rotateKey},

		{http.MethodGet, "/v1/audit", auth.RoleReader, s.auditLog},
		{http.MethodGet, "/v1/policies", auth.RoleReader, s.listPolicies},
		{http.MethodGet, "/v1/policies/:name", auth.RoleReader, s.getPolicy},
		{http.MethodPut, "/v1/policies/:name", auth.RoleAdmin, s.putPolicy},
		{http.MethodDelete, "/v1/policies/:name", auth.RoleAdmin, s.deletePolicy},
		{http.MethodGet, "/v1/settings", auth.RoleReader, s.getSettings},
		{http.MethodGet, "/v1/namespaces/:ns/usage", auth.RoleReader, s.namespaceUsage},
		{http.MethodPut, "/v1/settings", auth.RoleAdmin, s.putSettings},

		// Operator endpoints (snapshots.go).
		{http.MethodGet, "/v1/admin/snapshot", auth.RoleAdmin, s.snapshotSave},
		{http.MethodPost, "/v1/admin/snapshot/restore", auth.RoleAdmin, s.snapshotRestore},
		{http.MethodPost, "/v1/cluster/peers/:id/remove", auth.RoleAdmin, s.removePeer},
		{http.MethodPost, "/v1/cluster/leader/transfer", auth.RoleAdmin, s.transferLeader},
	}
}

// register adds every route to e and indexes the roles they need. A
// route without a role, or one listed twice, panics: a programming error
// caught by any test that makes a Server.
func (s *Server) register(e *echo.Echo) {
	s.roles = map[string]auth.Role{}
	s.publicPaths = map[string]bool{}
	for _, r := range s.routes() {
		id := r.method + " " + r.path
		if r.role == "" {
			panic(fmt.Sprintf("httpapi: route %s has no role", id))
		}
		if _, dup := s.roles[id]; dup {
			panic(fmt.Sprintf("httpapi: route %s is listed twice", id))
		}
		s.roles[id] = r.role
		if r.role == auth.Public {
			s.publicPaths[r.path] = true
		}
		e.Add(r.method, r.path, r.handler)
	}
}

// roleOf is the role the request's route needs; auth.RoleAdmin when no
// route matches (fail closed).
func (s *Server) roleOf(c echo.Context) auth.Role {
	if role, ok := s.roles[c.Request().Method+" "+c.Path()]; ok {
		return role
	}
	return auth.RoleAdmin
}

// routed reports whether the request matched a route (for the metrics'
// route label).
func (s *Server) routed(method, path string) bool {
	_, ok := s.roles[method+" "+path]
	return ok
}

// public reports whether the request's path is one of a public route's:
// those are never rate limited.
func (s *Server) public(c echo.Context) bool { return s.publicPaths[c.Path()] }
