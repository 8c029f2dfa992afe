package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// Problem codes this package answers with, in the API's problem documents.
const (
	// CodeUnauthenticated (401): no API key, or one that is malformed or
	// unknown.
	CodeUnauthenticated = "unauthenticated"
	// CodeForbidden (403): a valid key without the role the call needs.
	CodeForbidden = "forbidden"
)

// ProblemTypeBase prefixes a problem's "type"; the code follows. It is the
// same base the rest of the API uses (docs/problems.md).
const ProblemTypeBase = "https://github.com/intentledger/intentd/blob/main/docs/problems.md#"

// contentTypeProblem is RFC 9457's media type.
const contentTypeProblem = "application/problem+json"

// realm names the protection space in WWW-Authenticate challenges.
const realm = "intentd"

// principalKey is the echo context key the principal is stored under.
const principalKey = "intentd.auth.principal"

// problem is an RFC 9457 problem document, in the shape the API uses.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// Middleware authenticates and authorizes every request to an echo server.
//
// required says what the matched route needs: the role, or public = true
// for a route that needs no key (health, readiness, metrics, the token key
// set). ByRoute builds one from a table. It must not be nil.
//
// A request to a protected route without a usable bearer token gets 401
// (code unauthenticated) with a WWW-Authenticate: Bearer challenge; one
// whose key lacks the role gets 403 (code forbidden). Both are
// application/problem+json and never echo the presented key. A request
// that passes has its Principal in the context (PrincipalFrom). If ks is
// nil or disabled, every request passes as the development principal
// (namespace "default", every role), public routes included.
//
// Register it after any middleware that should see its answers (metrics,
// logging): it writes the 401 and 403 itself and returns nil.
func Middleware(ks *Keyset, required func(c echo.Context) (role Role, public bool)) echo.MiddlewareFunc {
	if required == nil {
		panic("auth: Middleware needs a required func")
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if ks.IsDisabled() {
				c.Set(principalKey, devPrincipal())
				return next(c)
			}
			role, public := required(c)
			if public || role == Public {
				return next(c)
			}
			p, err := ks.Check(c.Request(), role)
			if err != nil {
				call := "this call"
				if route := c.Path(); route != "" {
					call = c.Request().Method + " " + route
				}
				return refuse(c.Response(), p, role, call, err)
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}

// Require wraps a plain net/http handler (outside the echo API, e.g. the
// fault suite's debug hooks) so that it serves only requests whose API key
// holds role, with the same check (Keyset.Check) and the same 401 and 403
// answers as Middleware. A nil or disabled ks lets every request through.
func Require(ks *Keyset, role Role, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ks.IsDisabled() {
			next.ServeHTTP(w, r)
			return
		}
		call := "this call"
		if r.Pattern != "" {
			call = r.Pattern
		}
		p, err := ks.Check(r, role)
		if err != nil {
			if werr := refuse(w, p, role, call, err); werr != nil {
				http.Error(w, werr.Error(), http.StatusInternalServerError)
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Check is the one API key check, shared by Middleware and Require: it
// authenticates r's bearer token and checks that its key holds role. It
// fails with ErrNoCredentials or ErrInvalidCredentials (401), or with
// ErrForbidden (403) and the key's principal. In development mode (nil or
// disabled ks) every request is the development principal.
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
		return p, fmt.Errorf("%w: key %q lacks role %s", ErrForbidden, p.Name, role)
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

// refuse answers a failed Check: 403 for ErrForbidden, else 401. call
// names the refused call in a 403's detail.
func refuse(w http.ResponseWriter, p Principal, role Role, call string, err error) error {
	if errors.Is(err, ErrForbidden) {
		return forbidden(w, p, role, call)
	}
	return unauthenticated(w, err)
}

func unauthenticated(w http.ResponseWriter, err error) error {
	challenge := `Bearer realm="` + realm + `"`
	if !errors.Is(err, ErrNoCredentials) {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set(echo.HeaderWWWAuthenticate, challenge)
	return writeProblem(w, problem{
		Type: ProblemTypeBase + CodeUnauthenticated, Title: "Authentication required: a valid API key is needed",
		Status: http.StatusUnauthorized, Detail: err.Error(), Code: CodeUnauthenticated,
	})
}

func forbidden(w http.ResponseWriter, p Principal, role Role, call string) error {
	w.Header().Set(echo.HeaderWWWAuthenticate,
		`Bearer realm="`+realm+`", error="insufficient_scope", scope="`+string(role)+`"`)
	return writeProblem(w, problem{
		Type: ProblemTypeBase + CodeForbidden, Title: "The API key lacks the role this call needs",
		Status: http.StatusForbidden, Code: CodeForbidden,
		Detail: fmt.Sprintf("key %q has roles %v; %s needs %s", p.Name, p.Roles, call, role),
	})
}

func writeProblem(w http.ResponseWriter, p problem) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return fmt.Errorf("encode problem: %w", err)
	}
	w.Header().Set(echo.HeaderContentType, contentTypeProblem)
	w.WriteHeader(p.Status)
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write problem: %w", err)
	}
	return nil
}
