package httpapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/auth"
)

// realm names the protection space in WWW-Authenticate challenges.
const realm = "intentd"

// refusedByAuth reports whether err is auth's refusal of a request's
// credentials (auth.Keyset.Check): no key, a bad key, or a key without
// the role.
func refusedByAuth(err error) bool {
	return errors.Is(err, auth.ErrNoCredentials) || errors.Is(err, auth.ErrInvalidCredentials) ||
		errors.Is(err, auth.ErrForbidden)
}

// authProblem answers a refusal (refusedByAuth): 403 forbidden for a key
// without the role call needs, else 401 unauthenticated, with a Bearer
// challenge that says whether credentials were missing or bad (RFC 6750
// section 3.1). Neither echoes the presented key.
func authProblem(err error, call string) *problem {
	if errors.Is(err, auth.ErrForbidden) {
		detail := call + " needs a role the API key lacks"
		scope := ""
		var fe *auth.ForbiddenError
		if errors.As(err, &fe) {
			detail = fmt.Sprintf("key %q has roles %v; %s needs %s", fe.Principal.Name, fe.Principal.Roles, call, fe.Role)
			scope = fmt.Sprintf(`, scope="%s"`, fe.Role)
		}
		p := newProblem(CodeForbidden, detail)
		p.challenge = `Bearer realm="` + realm + `", error="insufficient_scope"` + scope
		return p
	}
	p := newProblem(CodeUnauthenticated, err.Error())
	p.challenge = `Bearer realm="` + realm + `"`
	if !errors.Is(err, auth.ErrNoCredentials) {
		p.challenge += `, error="invalid_token"`
	}
	return p
}

// callOf names the request's call in a 403's detail: "METHOD /template",
// or "this call" when no route matched.
func callOf(c echo.Context) string {
	if route := c.Path(); route != "" {
		return c.Request().Method + " " + route
	}
	return "this call"
}

// Require wraps a plain net/http handler outside the API's router (e.g.
// cmd/intentd's test hooks) so that it serves only requests whose API key
// holds role, with the API's key check (auth.Keyset.Check) and its 401 and
// 403 problems. A nil or disabled ks lets every request through.
func Require(ks *auth.Keyset, role auth.Role, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ks.IsDisabled() {
			next.ServeHTTP(w, r)
			return
		}
		if _, err := ks.Check(r, role); err != nil {
			call := "this call"
			if r.Pattern != "" {
				call = r.Pattern
			}
			if werr := sendProblem(w, authProblem(err, call)); werr != nil {
				http.Error(w, werr.Error(), http.StatusInternalServerError)
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}
