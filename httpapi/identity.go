package httpapi

import (
	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/internal/namespace"
	"github.com/intentledger/intentd/ledger"
)

// Identity is who a request acts as, from its credentials.
type Identity struct {
	// Name identifies the caller; it is the actor of approvals,
	// rejections, resolves and policy changes. Empty when the request is
	// unauthenticated (auth off): the body's actor is used.
	Name string
	// Namespace is the namespace the caller acts in.
	Namespace string
	// Admin may read other namespaces' audit logs.
	Admin bool
}

// identifyPrincipal is the Identity of the request's authenticated API
// key.
func identifyPrincipal(c echo.Context) (Identity, bool) {
	p, ok := auth.PrincipalFrom(c)
	if !ok {
		return Identity{}, false
	}
	return Identity{Name: p.Name, Namespace: p.Namespace, Admin: p.Has(auth.RoleAdmin)}, true
}

// namespaceOf is the namespace a request acts in.
func (s *Server) namespaceOf(c echo.Context) string {
	if s.identify != nil {
		if id, ok := s.identify(c); ok && id.Namespace != "" {
			return id.Namespace
		}
	}
	return namespace.Default
}

// actorOf is the actor a request acts as: the authenticated caller, else
// the actor the body names.
func (s *Server) actorOf(c echo.Context, bodyActor string) string {
	if s.identify != nil {
		if id, ok := s.identify(c); ok && id.Name != "" {
			return id.Name
		}
	}
	return bodyActor
}

// isAdmin reports whether the request may act across namespaces. It fails
// closed: with auth on, a request without an identity is not an admin.
// Only development mode (auth off: no keys and no Identify) makes every
// caller an admin, as Config.Auth documents.
func (s *Server) isAdmin(c echo.Context) bool {
	if s.identify == nil {
		return s.keys == nil // New sets identify whenever auth is on
	}
	id, ok := s.identify(c)
	return ok && id.Admin
}

// callerOf is the API key a claim or report acts for: its name, which the
// grant is bound to, and whether its roles let it settle grants other
// keys hold (reconciler, admin). With auth off there is no key: the zero
// Caller, and grants bound to none. A forwarded request is answered by
// the leader, which authenticates the caller's own header again, so the
// caller is the same on every node.
func (s *Server) callerOf(c echo.Context) ledger.Caller {
	if s.identify == nil {
		return ledger.Caller{}
	}
	var caller ledger.Caller
	if id, ok := s.identify(c); ok {
		caller = ledger.Caller{Principal: id.Name, Override: id.Admin}
	}
	if p, ok := auth.PrincipalFrom(c); ok && p.Has(auth.RoleReconciler) {
		caller.Override = true
	}
	return caller
}
