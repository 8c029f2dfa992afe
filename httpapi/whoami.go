package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/internal/namespace"
)

// whoamiView is the body of GET /v1/whoami.
type whoamiView struct {
	// Auth is "required" or "off" (development: every call is allowed).
	Auth string `json:"auth"`
	// Name is the API key's name, the actor of its approvals, rejections,
	// resolves and policy changes; empty with auth off.
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace"`
	// Roles are the roles the key was given.
	Roles []auth.Role `json:"roles"`
	// Acts are the requirements of the route table (routes.go) the key
	// meets, implied ones included (admin implies every role, approver
	// implies reader, resolve is approver or reconciler ...): what a
	// client such as the web console may offer, decided by auth's one
	// rule (auth.Principal.Has).
	Acts []auth.Role `json:"acts"`
}

// whoamiRequirements are the requirements Acts reports on, in order.
var whoamiRequirements = []auth.Role{
	auth.RoleAgent, auth.RoleTool, auth.RoleApprover, auth.RoleReconciler, auth.RoleReader, auth.RoleAdmin,
	auth.Settle, auth.Resolve,
}

// whoami serves GET /v1/whoami: who the caller's API key is, where it
// acts and what it may do. It reads nothing from the ledger. With auth
// off the caller is anyone, in the default namespace, with every role.
func (s *Server) whoami(c echo.Context) error {
	v := whoamiView{Auth: "required"}
	p, ok := auth.PrincipalFrom(c)
	if s.keys == nil || !ok {
		v.Auth = "off"
		p = auth.Principal{Namespace: namespace.Default, Roles: auth.Roles()}
	} else {
		v.Name = p.Name
	}
	v.Namespace, v.Roles, v.Acts = p.Namespace, p.Roles, []auth.Role{}
	for _, r := range whoamiRequirements {
		if p.Has(r) {
			v.Acts = append(v.Acts, r)
		}
	}
	return writeJSON(c, http.StatusOK, v)
}
