package auth

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// principalKey is the echo context key the principal is stored under.
const principalKey = "intentd.auth.principal"

// Middleware turns the bearer API key of every request to an echo server
// into its Principal, stored in the request's context (PrincipalFrom).
//
// required says which role the matched route needs: Public for a route
// that needs no key (nothing is checked or stored), any other role for
// Check. It must not be nil. A request Check refuses reaches no handler:
// the middleware returns Check's error (wrapping ErrNoCredentials,
// ErrInvalidCredentials, or ErrForbidden as a *ForbiddenError), for the
// server's error handler to answer (401 or 403). If ks is nil or disabled,
// every request passes as the development principal (namespace "default",
// every role), public routes included.
func Middleware(ks *Keyset, required func(c echo.Context) Role) echo.MiddlewareFunc {
	if required == nil {
		panic("auth: Middleware needs a required func")
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if ks.IsDisabled() {
				c.Set(principalKey, devPrincipal())
				return next(c)
			}
			role := required(c)
			if role == Public {
				return next(c)
			}
			p, err := ks.Check(c.Request(), role)
			if err != nil {
				return err
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}

// Check is the one API key check: it authenticates r's bearer token and
// checks that its key holds role. It fails with ErrNoCredentials or
// ErrInvalidCredentials (401), or with a *ForbiddenError (403, wrapping
// ErrForbidden) and the key's principal. No error holds the presented
// key. In development mode (nil or disabled ks) every request is the
// development principal.
func (ks *Keyset) Check(r *http.Request, role Role) (Principal, error) {
	if ks.IsDisabled() {
		return devPrincipal(), nil
	}
	tok, err := bearerToken(r.Header)
	if err != nil {
		return Principal{}, err
	}
	p, err := ks.Authenticate(tok)
	if err != nil {
		return Principal{}, err
	}
	if !p.Has(role) {
		return p, &ForbiddenError{Principal: p, Role: role}
	}
	return p, nil
}

// PrincipalFrom returns the principal Middleware stored for this request;
// false on a public route (outside development mode) or without the
// middleware.
func PrincipalFrom(c echo.Context) (Principal, bool) {
	p, ok := c.Get(principalKey).(Principal)
	return p, ok
}

// bearerToken extracts the token of the one Authorization: Bearer header
// (RFC 6750 section 2.1; the scheme is case-insensitive).
func bearerToken(h http.Header) (string, error) {
	values := h.Values(echo.HeaderAuthorization)
	switch len(values) {
	case 0:
		return "", fmt.Errorf("%w: send Authorization: Bearer <API key>", ErrNoCredentials)
	case 1:
	default:
		return "", fmt.Errorf("%w: %d Authorization headers", ErrInvalidCredentials, len(values))
	}
	scheme, rest, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: the Authorization scheme must be Bearer", ErrNoCredentials)
	}
	tok := strings.Trim(rest, " \t")
	if tok == "" || strings.ContainsAny(tok, " \t") {
		return "", fmt.Errorf("%w: Authorization: Bearer must be followed by exactly one API key", ErrInvalidCredentials)
	}
	return tok, nil
}
