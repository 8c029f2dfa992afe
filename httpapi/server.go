// Package httpapi serves the intent ledger's HTTP API (v1): it decodes
// requests, calls ledger.Service, maps answers and errors to HTTP (problem
// documents per RFC 9457) and forwards writes and linearizable reads that
// reach a follower to the leader. It holds no business logic: validation
// and every decision belong to the ledger.
package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/peerauth"
	"github.com/intentledger/intentd/ledger"
)

// HeaderForwardedBy marks a request a node forwarded to the leader; its
// value is the forwarding node's ID. A request carrying it is never
// forwarded again.
const HeaderForwardedBy = peerauth.HeaderForwardedBy

// HeaderIdempotencyKey may carry the key of a claim instead of the body.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderLocalAnswer names the node that answered a duplicate claim from
// its own copy of the ledger, without the leader (intentd
// --local-duplicates); absent on every other answer.
const HeaderLocalAnswer = "X-Intentd-Local-Answer"

// ContentTypeProblem is the media type of error answers.
const ContentTypeProblem = "application/problem+json"

// DefaultForwardTimeout bounds one forwarded request when Config gives no
// ForwardClient.
const DefaultForwardTimeout = 10 * time.Second

// Config configures a Server. Service is required; other zero fields take
// defaults.
type Config struct {
	// Service answers every intent call. Its limits bound request bodies
	// too (bodyLimit).
	Service *ledger.Service
	// Cluster feeds GET /v1/cluster and /readyz; nil reports not ready.
	Cluster ClusterInfo
	// Registry receives the API's metrics and is served on /metrics; nil
	// uses a fresh registry.
	Registry *prometheus.Registry
	// Logger logs internal errors and failed forwards; nil discards.
	Logger *slog.Logger
	// ForwardClient carries requests forwarded to the leader; nil uses a
	// client with DefaultForwardTimeout that does not follow redirects.
	ForwardClient *http.Client
	// NodeID identifies this node in HeaderForwardedBy.
	NodeID string
	// Now is the clock for Retry-After computations; nil means time.Now.
	Now func() time.Time
	// Auth holds the API keys every request but the public ones must
	// present; nil (or a disabled keyset) means auth is off: every request
	// acts in the default namespace, as the actor its body names, and may
	// read every audit log.
	Auth *auth.Keyset
	// RateLimits bound requests per client and per intent key (429); nil
	// means DefaultRateLimits, a zero RateLimits turns them off.
	RateLimits *RateLimits
	// Identify says who a request acts as; nil derives it from Auth.
	Identify func(c echo.Context) (Identity, bool)
	// Snapshots serves /v1/admin/snapshot (backup and restore); nil
	// answers not_configured.
	Snapshots Snapshotter
	// MaxSnapshotBytes bounds an uploaded snapshot; 0 means
	// DefaultMaxSnapshotBytes.
	MaxSnapshotBytes int64
	// PeerAuth signs the requests this node forwards and verifies those
	// it receives; nil trusts no forwarding header.
	PeerAuth PeerAuth
	// ForwardTLS forwards over HTTPS whatever scheme the leader's
	// advertised address names (TLS is on: a member advertising http://
	// must not receive a client's request in the clear).
	ForwardTLS bool
	// TracerProvider makes every request a server span (tracing.go);
	// nil traces nothing and installs no middleware.
	TracerProvider trace.TracerProvider
}

// Server is the HTTP API of one node.
type Server struct {
	svc     *ledger.Service
	cluster ClusterInfo
	reg     *prometheus.Registry
	log     *slog.Logger
	fwd     *http.Client
	nodeID  string
	// maxBody bounds request bodies (bodyLimit of the service's limits).
	maxBody  int64
	now      func() time.Time
	identify func(c echo.Context) (Identity, bool)
	metrics  *metrics
	echo     *echo.Echo
	// keys authenticates requests; nil when auth is off.
	keys *auth.Keyset
	// clientLimits and keyLimits are the rate limits (nil: off).
	clientLimits, keyLimits *limiterSet
	// authFailures limits failed authentications per address (nil: off).
	authFailures *limiterSet
	// snaps and maxSnapshot serve the admin endpoints (snapshots.go).
	snaps       Snapshotter
	maxSnapshot int64
	// peers verifies forwarded requests (peerauth.go).
	peers PeerAuth
	// forwardTLS forces https when forwarding.
	forwardTLS bool
	// tracer records the requests' spans; nil when tracing is off.
	tracer trace.Tracer
	// roles is the role each route needs, by "METHOD /template", and
	// publicPaths the templates of the public routes (routes.go).
	roles       map[string]auth.Role
	publicPaths map[string]bool
}

// New returns a Server for cfg. It panics if cfg.Service is nil or the
// registry holds conflicting metrics (both programming errors).
func New(cfg Config) *Server {
	if cfg.Service == nil {
		panic("httpapi: Config.Service is required")
	}
	s := &Server{
		svc: cfg.Service, cluster: cfg.Cluster, reg: cfg.Registry, log: cfg.Logger,
		fwd: cfg.ForwardClient, nodeID: cfg.NodeID, maxBody: bodyLimit(cfg.Service.Limits()), now: cfg.Now, identify: cfg.Identify,
		peers: cfg.PeerAuth, forwardTLS: cfg.ForwardTLS,
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.fwd == nil {
		s.fwd = &http.Client{
			Timeout: DefaultForwardTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	if s.nodeID == "" {
		s.nodeID = "unknown"
	}
	limits := DefaultRateLimits
	if cfg.RateLimits != nil {
		limits = *cfg.RateLimits
	}
	s.clientLimits = newLimiterSet(limits.PerClient, limits.ClientBurst, time.Now)
	s.keyLimits = newLimiterSet(limits.PerKey, limits.KeyBurst, time.Now)
	s.authFailures = newLimiterSet(limits.AuthFailures, limits.AuthFailureBurst, time.Now)
	if cfg.Auth != nil && !cfg.Auth.IsDisabled() {
		s.keys = cfg.Auth
		if s.identify == nil {
			s.identify = identifyPrincipal
		}
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.snaps, s.maxSnapshot = cfg.Snapshots, cfg.MaxSnapshotBytes
	if s.maxSnapshot <= 0 {
		s.maxSnapshot = DefaultMaxSnapshotBytes
	}
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer("github.com/intentledger/intentd/httpapi")
	}
	s.metrics = newMetrics(s.reg)
	register(s.reg, newUsageCollector(s))
	s.echo = s.router()
	return s
}

// Handler returns the http.Handler serving the API.
func (s *Server) Handler() http.Handler { return s.echo }

// router makes the echo server: the middleware chain, then every route
// of the table (routes.go).
func (s *Server) router() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(s.trustForwarding)
	e.Use(s.observe)
	if s.tracer != nil {
		e.Use(s.traced)
	}
	if s.keys != nil {
		e.Use(s.limitAuthFailures)
		e.Use(auth.Middleware(s.keys, s.roleOf))
	}
	e.Use(s.rateLimit)
	e.Use(s.requireUTF8)
	s.register(e)
	return e
}

// observe is the middleware that records metrics, turns panics into 500
// problems and errors into answers, so the metrics see the final status.
// Every label comes from a fixed set, whatever the client sends: route is
// the template of a route of the table (routes.go) or "unmatched", method
// is one of httpMethods or "other", code is the status.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := s.safely(next, c)
		if err != nil {
			s.handleError(err, c)
		}
		method := methodLabel(c.Request().Method)
		route := c.Path()
		if !s.routed(method, route) {
			route = "unmatched"
		}
		code := codeLabel(c.Response().Status)
		s.metrics.requests.WithLabelValues(route, method, code).Inc()
		s.metrics.duration.WithLabelValues(route, method, code).Observe(time.Since(start).Seconds())
		return nil
	}
}

// httpMethods are the methods the metrics name; any other is "other".
var httpMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

// methodLabel is method if it is one of httpMethods, else "other".
func methodLabel(method string) string {
	for _, m := range httpMethods {
		if method == m {
			return m
		}
	}
	return "other"
}

// codeLabel is the status code, or "other" outside 100-599.
func codeLabel(status int) string {
	if status < 100 || status > 599 {
		return "other"
	}
	return strconv.Itoa(status)
}

// safely runs h, turning a panic into an error.
func (s *Server) safely(h echo.HandlerFunc, c echo.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("httpapi: panic serving request", "method", c.Request().Method, "route", c.Path(),
				"panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return h(c)
}

// handleError answers an error that reached the top of a request: auth's
// refusal of its credentials (401, 403), echo's own (unknown route, wrong
// method) or an unexpected one.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var he *echo.HTTPError
	var p *problem
	switch {
	case refusedByAuth(err):
		p = authProblem(err, callOf(c))
	case errors.As(err, &he) && he.Code == http.StatusNotFound:
		p = newProblem(CodeNoRoute, fmt.Sprintf("no endpoint %s %s", c.Request().Method, c.Request().URL.Path))
	case errors.As(err, &he) && he.Code == http.StatusMethodNotAllowed:
		p = newProblem(CodeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s", c.Request().Method, c.Request().URL.Path))
	case errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge:
		p = newProblem(CodeTooLarge, fmt.Sprint(he.Message))
	case errors.As(err, &he) && he.Code == http.StatusBadRequest:
		p = newProblem(CodeBadRequest, fmt.Sprint(he.Message))
	default:
		s.log.Error("httpapi: request failed", "method", c.Request().Method, "route", c.Path(), "err", err)
		p = newProblem(CodeInternal, "the node failed to handle the request; see its log")
	}
	if werr := s.writeProblem(c, p); werr != nil {
		s.log.Debug("httpapi: writing a problem", "err", werr)
	}
}

// writeJSON sends v as application/json.
func writeJSON(c echo.Context, status int, v any) error {
	return writeBody(c, status, echo.MIMEApplicationJSON, v)
}

// writeBody encodes v without HTML escaping, so payloads and results read
// back byte for byte as the ledger stores them.
func writeBody(c echo.Context, status int, contentType string, v any) error {
	if a, ok := v.(jsonAppender); ok {
		b := a.appendJSON(make([]byte, 0, 1536))
		return c.Blob(status, contentType, append(b, '\n'))
	}
	b, err := encodeJSON(v)
	if err != nil {
		return err
	}
	return c.Blob(status, contentType, b)
}

// encodeJSON encodes v as one line of JSON without HTML escaping.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return buf.Bytes(), nil
}

// fail answers an error from the ledger service: it forwards to the leader
// when this node is not it and the request was not forwarded already, and
// otherwise sends the matching problem. body is the buffered request body.
func (s *Server) fail(c echo.Context, err error, body []byte) error {
	write := isWrite(c.Request())
	var nl *ledger.NotLeaderError
	if errors.As(err, &nl) && nl.LeaderHTTP != "" && !claimsForwarded(c.Request()) {
		return s.forward(c, nl.LeaderHTTP, body, write)
	}
	p, internal := errorProblem(err, write, s.now())
	if internal {
		s.log.Error("httpapi: ledger call failed", "method", c.Request().Method, "route", c.Path(), "err", err)
	}
	return s.writeProblem(c, p)
}

// isWrite reports whether r may change the ledger.
func isWrite(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead
}

// forwarded reports whether r was forwarded by another node (after
// trustForwarding, only a signed forward still carries the header).
func forwarded(r *http.Request) bool {
	return len(r.Header.Values(HeaderForwardedBy)) > 0
}

// bodyLimit bounds a request body for the service's limits: room for a
// maximal payload or result with its escaping, and the other fields.
func bodyLimit(l ledger.Limits) int64 {
	return int64(2*max(l.MaxPayloadBytes, l.MaxResultBytes) + 16<<10)
}

// readBody buffers the request body, bounded by bodyLimit, so it can be
// decoded and, if need be, forwarded.
func (s *Server) readBody(c echo.Context) ([]byte, *problem) {
	r := c.Request()
	if r.ContentLength > s.maxBody {
		return nil, s.tooLarge(r.ContentLength)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody+1))
	if int64(len(b)) > s.maxBody {
		return nil, s.tooLarge(-1)
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, s.tooLarge(-1)
		}
		return nil, newProblem(CodeBadRequest, "reading the request body: "+err.Error())
	}
	return b, nil
}

func (s *Server) tooLarge(n int64) *problem {
	if n < 0 {
		return newProblem(CodeTooLarge, fmt.Sprintf("the request body is over the limit of %d bytes", s.maxBody))
	}
	return newProblem(CodeTooLarge, fmt.Sprintf("the request body of %d bytes is over the limit of %d bytes", n, s.maxBody))
}

// decode buffers and decodes the request body into v.
func (s *Server) decode(c echo.Context, v any) ([]byte, *problem) {
	body, p := s.readBody(c)
	if p != nil {
		return nil, p
	}
	return body, decodeBody(body, v)
}

// answer sends a ledger result: its success body, or the refusal's
// problem.
func (s *Server) answer(c echo.Context, r *fsm.Result) error {
	traceResult(c, r)
	code, ok := successCode(r)
	if !ok {
		return s.writeProblem(c, refusalProblem(r, s.now()))
	}
	return writeJSON(c, codes[code].status, &intentResponse{Status: r.Status, Intent: newIntentView(r.Intent)})
}
