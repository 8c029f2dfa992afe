package idemproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/intentledger/intentd/internal/toolname"
)

// KeyMode says what a route does with the Idempotency-Key header.
type KeyMode string

// The key modes.
const (
	// KeyRequired: an unsafe request without a key is refused (400
	// missing-key); with one it is claimed.
	KeyRequired KeyMode = "required"
	// KeyOptional: with a key the request is claimed; without one it
	// passes through untouched.
	KeyOptional KeyMode = "optional"
	// KeyPass: the route is not deduplicated: every request passes through.
	KeyPass KeyMode = "pass"
)

// On5xx says what an upstream 5xx answer records.
type On5xx string

// The 5xx policies.
const (
	// On5xxRecord records the 5xx as the intent's result (executed) and
	// replays it to every retry: at most once first. The default.
	On5xxRecord On5xx = "record"
	// On5xxRetry records the attempt failed, so the next request with the
	// key runs again: for upstreams known to roll back on 5xx.
	On5xxRetry On5xx = "retry"
	// On5xxInDoubt records nothing: the lease passes and the intent turns
	// in_doubt for reconciliation.
	On5xxInDoubt On5xx = "in_doubt"
)

// Duration is a time.Duration written as a Go duration string ("30s") in
// the routes file.
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Route is one entry of the routes file: which requests it matches and how
// they are deduplicated.
type Route struct {
	// Name labels the route in logs and metrics; default "METHOD PATH".
	Name string `json:"name,omitempty"`
	// Method restricts the route to one method; empty matches every
	// method. GET, HEAD, OPTIONS and TRACE always pass through untouched.
	Method string `json:"method,omitempty"`
	// Path is a Go 1.22 http.ServeMux path pattern ("/v1/charges",
	// "/v1/orders/{id}/refunds", "/v1/" for a subtree, optionally with a
	// host first).
	Path string `json:"path"`
	// Key is required (default), optional or pass.
	Key KeyMode `json:"key,omitempty"`
	// Tool is the intent's tool in the ledger (policies select by it). It
	// must follow the ledger's tool grammar (lowercase segments
	// [a-z0-9][a-z0-9_-]* joined by single dots, at most 256 bytes): a
	// route with another spelling is refused when the routes are read.
	Tool string `json:"tool,omitempty"`
	// Scope is the namespace of Idempotency-Keys inside the ledger key;
	// default the tool. Routes with the same scope share keys (and a key
	// reused across them is a fingerprint mismatch).
	Scope string `json:"scope,omitempty"`
	// ScopeHeaders are request headers (Authorization, X-Tenant) whose
	// values, hashed, scope the key too: two clients with different values
	// never share a key, so one can never be replayed the other's answer.
	// Empty, Normalize sets DefaultScopeHeaders (the caller's credentials)
	// unless SingleCaller opts out.
	ScopeHeaders []string `json:"scope_headers,omitempty"`
	// SingleCaller opts out of the per-caller scope: every client of the
	// route shares its keys, so one client's recorded answer is replayed to
	// any other that sends the same key and request. Only for a route
	// behind which a single trusted caller sends requests. It cannot be
	// combined with ScopeHeaders.
	SingleCaller bool `json:"single_caller,omitempty"`
	// Policy, when set, is a check, not a choice: the ledger picks the
	// policy of a claim by its tool and refuses a claim that names another
	// one (422 policy_mismatch, answered 502 ledger-refused). Empty lets
	// the ledger pick without the check.
	Policy string `json:"policy,omitempty"`
	// Lease is the claim's lease, renewed every Lease/3 while the upstream
	// works; zero takes the ledger's default (client.DefaultLease).
	Lease Duration `json:"lease,omitempty"`
	// FingerprintHeaders are request headers included in the fingerprint
	// beside method, path, query and body.
	FingerprintHeaders []string `json:"fingerprint_headers,omitempty"`
	// On5xx is record (default), retry or in_doubt.
	On5xx On5xx `json:"on_5xx,omitempty"`
	// WaitInFlight makes a request that finds its key in flight wait for
	// the first one's answer (long-polling the ledger) and replay it,
	// instead of answering 409 in-flight at once.
	WaitInFlight bool `json:"wait_in_flight,omitempty"`
	// UpstreamTimeout bounds one upstream exchange of the route's claimed
	// requests, headers to end of body; zero takes the proxy's
	// --upstream-timeout. Past it the request is answered 504 and its key
	// goes in_doubt: the upstream may have acted.
	UpstreamTimeout Duration `json:"upstream_timeout,omitempty"`
}

// upstreamTimeout is the bound on one upstream exchange of the route: its
// own, else the proxy's (def).
func (r *Route) upstreamTimeout(def time.Duration) time.Duration {
	if d := time.Duration(r.UpstreamTimeout); d > 0 {
		return d
	}
	return def
}

// DefaultTool is the tool of the default route when none is configured.
const DefaultTool = "http"

// DefaultScopeHeaders are the request headers that scope keys on a route
// that names no scope_headers and is not single_caller: the caller's
// credentials. Two clients that authenticate differently never share a
// key; clients that send neither header share one scope.
var DefaultScopeHeaders = []string{"Authorization", "Cookie"}

// ledger limits the routes are checked against (ledger/limits.go).
const (
	maxNameBytes = 256
	minLease     = 100 * time.Millisecond
	maxLease     = time.Hour
	// maxUpstreamTimeout bounds a route's upstream timeout: the lease is
	// renewed while the upstream works, so a long one is allowed, but not
	// an unbounded one.
	maxUpstreamTimeout = 24 * time.Hour
)

// ParseRoutes reads a routes file: a JSON array of Route. Its tool, key,
// on_5xx and lease, when a route leaves them empty, are base's (the flags'
// default route), then the package defaults (key required, on_5xx
// record). Unknown fields are refused, so a
// typo never silently changes what is deduplicated.
func ParseRoutes(data []byte, base Route) ([]Route, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("routes: want a JSON array of routes: %w", err)
	}
	for i, r := range raw {
		if _, ok := r["dedupe_window"]; ok {
			return nil, fmt.Errorf("routes[%d]: dedupe_window: the ledger takes no dedupe window per claim; "+
				"set dedupe_window_ms on a ledger policy and name it in \"policy\" (or select it by tool)", i)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var routes []Route
	if err := dec.Decode(&routes); err != nil {
		return nil, fmt.Errorf("routes: %w", err)
	}
	if len(routes) == 0 {
		return nil, errors.New("routes: the file lists no route")
	}
	for i := range routes {
		r := &routes[i]
		if r.Tool == "" {
			r.Tool = base.Tool
		}
		if r.Key == "" {
			r.Key = base.Key
		}
		if r.On5xx == "" {
			r.On5xx = base.On5xx
		}
		if r.Lease == 0 {
			r.Lease = base.Lease
		}
		if err := r.Normalize(); err != nil {
			return nil, fmt.Errorf("routes[%d] (%s): %w", i, r.Path, err)
		}
	}
	return routes, nil
}

// Normalize fills a route's defaults and checks it against what the ledger
// accepts.
func (r *Route) Normalize() error {
	if r.Key == "" {
		r.Key = KeyRequired
	}
	if r.On5xx == "" {
		r.On5xx = On5xxRecord
	}
	if r.Tool == "" {
		r.Tool = DefaultTool
	}
	if r.Scope == "" {
		r.Scope = r.Tool
	}
	r.Method = strings.ToUpper(r.Method)
	if r.Name == "" {
		r.Name = strings.TrimSpace(r.Method + " " + r.Path)
	}
	switch r.Key {
	case KeyRequired, KeyOptional, KeyPass:
	default:
		return fmt.Errorf("key: %q is not required, optional or pass", r.Key)
	}
	switch r.On5xx {
	case On5xxRecord, On5xxRetry, On5xxInDoubt:
	default:
		return fmt.Errorf("on_5xx: %q is not record, retry or in_doubt", r.On5xx)
	}
	if r.Path == "" || strings.ContainsAny(r.Path, " \t") {
		return errors.New("path: a ServeMux path pattern such as /v1/charges is required (the method goes in \"method\")")
	}
	if r.Method != "" && (!isToken(r.Method) || safeMethod(r.Method)) {
		if safeMethod(r.Method) {
			return fmt.Errorf("method: %s requests always pass through untouched", r.Method)
		}
		return fmt.Errorf("method: %q is not an HTTP method", r.Method)
	}
	if err := validTool(r.Tool); err != nil {
		return fmt.Errorf("tool: %w", err)
	}
	for _, f := range []struct{ field, v string }{{"scope", r.Scope}, {"policy", r.Policy}} {
		if len(f.v) > maxNameBytes || !printable(f.v) {
			return fmt.Errorf("%s: must be printable UTF-8 of at most %d bytes", f.field, maxNameBytes)
		}
	}
	if l := time.Duration(r.Lease); l != 0 && (l < minLease || l > maxLease) {
		return fmt.Errorf("lease: %v is outside the ledger's %v..%v", l, minLease, maxLease)
	}
	if d := time.Duration(r.UpstreamTimeout); d < 0 || d > maxUpstreamTimeout {
		return fmt.Errorf("upstream_timeout: %v is outside 0..%v (0: the proxy's --upstream-timeout)", d, maxUpstreamTimeout)
	}
	var err error
	if r.FingerprintHeaders, err = headerNames("fingerprint_headers", r.FingerprintHeaders); err != nil {
		return err
	}
	if r.ScopeHeaders, err = headerNames("scope_headers", r.ScopeHeaders); err != nil {
		return err
	}
	switch {
	case r.SingleCaller && len(r.ScopeHeaders) > 0:
		return errors.New("single_caller shares keys between every client of the route; scope_headers separates them: set one or the other")
	case !r.SingleCaller && len(r.ScopeHeaders) == 0:
		r.ScopeHeaders = slices.Clone(DefaultScopeHeaders)
	}
	return nil
}

// ErrBadTool is a tool name outside the ledger's grammar
// (internal/toolname).
var ErrBadTool = toolname.ErrInvalid

// validTool checks a tool name against the ledger's grammar, as the ledger
// does before it accepts a claim (400 otherwise).
func validTool(name string) error { return toolname.Valid(name) }

// headerNames canonicalizes and checks a list of header names.
func headerNames(field string, names []string) ([]string, error) {
	out := make([]string, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		if !isToken(n) {
			return nil, fmt.Errorf("%s: %q is not a header name", field, n)
		}
		c := http.CanonicalHeaderKey(n)
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// safeMethod reports whether m is a method the proxy never claims.
func safeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// printable reports whether s is valid UTF-8 of printable characters, as
// the ledger requires of names.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
