package auth

import (
	"maps"

	"github.com/labstack/echo/v4"
)

// ByRoute returns a required func for Middleware from a table keyed by
// "METHOD /route/pattern", the pattern as registered with echo (c.Path(),
// e.g. "POST /v1/intents/:key/complete"). A route the table does not list
// (including unmatched paths and methods) needs RoleAdmin: forgetting a new
// route locks it down instead of opening it. The table is copied.
func ByRoute(table map[string]Role) func(c echo.Context) (Role, bool) {
	t := maps.Clone(table)
	return func(c echo.Context) (Role, bool) {
		role, ok := t[c.Request().Method+" "+c.Path()]
		if !ok {
			return RoleAdmin, false
		}
		return role, role == Public
	}
}

// DefaultRoutes returns the route table for the v1 API, a fresh map for
// ByRoute that the caller may extend (admin routes need no entry):
//
//	public         GET /healthz, /readyz, /metrics, /v1/keys
//	authenticated  GET /v1/cluster (every SDK reads it to find the leader)
//	agent          POST /v1/intents
//	agent or reconciler (Settle)    POST .../complete, .../renew, .../commit
//	approver       POST .../approve, .../reject
//	approver or reconciler (Resolve) POST .../resolve
//	reader         GET /v1/intents, /v1/intents/:key, .../audit
//	tool           POST /v1/tokens/verify
//	admin          everything else
func DefaultRoutes() map[string]Role {
	return map[string]Role{
		"GET /healthz": Public,
		"GET /readyz":  Public,
		"GET /metrics": Public,
		"GET /v1/keys": Public,

		"GET /v1/cluster": Authenticated,

		"POST /v1/intents":               RoleAgent,
		"POST /v1/intents/:key/complete": Settle,
		"POST /v1/intents/:key/renew":    Settle,
		"POST /v1/intents/:key/commit":   Settle,

		"POST /v1/intents/:key/approve": RoleApprover,
		"POST /v1/intents/:key/reject":  RoleApprover,
		"POST /v1/intents/:key/resolve": Resolve,

		"GET /v1/intents":            RoleReader,
		"GET /v1/intents/:key":       RoleReader,
		"GET /v1/intents/:key/audit": RoleReader,

		"POST /v1/tokens/verify": RoleTool,

		"GET /v1/audit":          RoleReader,
		"GET /v1/policies":       RoleReader,
		"GET /v1/policies/:name": RoleReader,
		"GET /v1/settings":       RoleReader,
	}
}
