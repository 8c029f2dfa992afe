package idemproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/client"
)

// Defaults of Config.
const (
	DefaultMaxBody         = 64 << 10
	DefaultMaxPayload      = 64 << 10
	DefaultMaxResult       = 64 << 10
	DefaultUpstreamTimeout = 30 * time.Second
	DefaultLedgerTimeout   = 10 * time.Second
	DefaultReportTimeout   = 30 * time.Second
	DefaultMaxWait         = 30 * time.Second
	// maxLongPoll bounds one long-poll of a wait_in_flight request, below
	// the SDK's 30 s HTTP timeout.
	maxLongPoll = 20 * time.Second
)

// Config configures a Handler.
type Config struct {
	// TracerProvider records a span per claimed request (SpanRequest),
	// the child of the caller's traceparent and the parent of the ledger
	// calls and the upstream request; nil records none (the caller's
	// trace context is still passed on).
	TracerProvider trace.TracerProvider
	// Upstream is the base URL requests are forwarded to.
	Upstream *url.URL
	// Ledger is the intentd cluster (a *client.Client).
	Ledger LedgerClient
	// LedgerURL is the base URL of the ledger named in pending-approval
	// answers ("http://ledger:8100").
	LedgerURL string
	// Router finds each request's route.
	Router *Router
	// MaxBody bounds request bodies (413 body-too-large past it).
	MaxBody int64
	// MaxPayload and MaxResult are the ledger's --max-payload-bytes and
	// --max-result-bytes: claim payloads and recorded responses are made
	// to fit them.
	MaxPayload int
	MaxResult  int
	// UpstreamTimeout bounds one upstream exchange, headers to end of body.
	UpstreamTimeout time.Duration
	// LedgerTimeout bounds how long a claim may stay without a definite
	// answer before the client gets 503.
	LedgerTimeout time.Duration
	// ReportTimeout bounds how long the proxy keeps trying to record an
	// upstream answer (and to release a claim it gave up on).
	ReportTimeout time.Duration
	// MaxWait bounds the wait of a wait_in_flight request.
	MaxWait time.Duration
	// Commit acknowledges each executed intent (executed → committed) in
	// the background after its answer was written, as client.Do does. Off
	// by default: it is a third ledger write per request that changes
	// nothing a retry sees (executed and committed intents replay alike),
	// and it cost a third of the throughput in make bench-proxy.
	Commit bool
	// Transport sends upstream requests (default: a clone of
	// http.DefaultTransport without transparent compression).
	Transport http.RoundTripper
	Logger    *slog.Logger
	Metrics   *Metrics
	// NewOwner names one claim attempt (default "intent-proxy/" +
	// client.NewOwner()).
	NewOwner func() string
}

// MaxIdleConnsPerHost is how many idle connections NewTransport keeps to
// each host: enough for every request a busy proxy has in flight, where
// net/http's default of 2 would open (and leave in TIME_WAIT) a new
// connection for nearly every request past the second concurrent one.
const MaxIdleConnsPerHost = 256

// NewTransport returns the HTTP transport the proxy uses for the upstream
// (by default) and cmd/intent-proxy for the ledger: a clone of
// http.DefaultTransport that keeps MaxIdleConnsPerHost idle connections
// per host.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * MaxIdleConnsPerHost
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return t
}

// Handler is the proxy: an http.Handler in front of the upstream.
type Handler struct {
	cfg  Config
	pass *httputil.ReverseProxy
	bg   client.Background // commits, and releases of claims whose answers were lost
}

// New returns a Handler; zero fields of cfg take the defaults.
func New(cfg Config) (*Handler, error) {
	if cfg.Upstream == nil || cfg.Upstream.Scheme == "" || cfg.Upstream.Host == "" {
		return nil, errors.New("proxy: an upstream URL (http://host:port) is required")
	}
	if cfg.Ledger == nil || cfg.Router == nil {
		return nil, errors.New("proxy: a ledger and a router are required")
	}
	pick := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	pickD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	pick(&cfg.MaxPayload, DefaultMaxPayload)
	pick(&cfg.MaxResult, DefaultMaxResult)
	pickD(&cfg.UpstreamTimeout, DefaultUpstreamTimeout)
	pickD(&cfg.LedgerTimeout, DefaultLedgerTimeout)
	pickD(&cfg.ReportTimeout, DefaultReportTimeout)
	pickD(&cfg.MaxWait, DefaultMaxWait)
	if cfg.Transport == nil {
		t := NewTransport()
		t.DisableCompression = true // the client's Accept-Encoding decides, as the bytes are recorded
		cfg.Transport = t
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.NewOwner == nil {
		cfg.NewOwner = func() string { return "intent-proxy/" + client.NewOwner() }
	}
	h := &Handler{cfg: cfg}
	h.pass = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			stripGrantHeaders(pr.Out.Header) // before SetXForwarded, which sets some of them anew
			pr.SetURL(cfg.Upstream)
			pr.SetXForwarded()
		},
		Transport:     cfg.Transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			cfg.Logger.Warn("pass-through request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			p := NewProblem(CodeUpstreamError, "the upstream failed a request the proxy passes through without a key: "+err.Error())
			if timedOut(err) {
				p.WithStatus(http.StatusGatewayTimeout)
			}
			p.Write(w)
		},
	}
	return h, nil
}

// Wait blocks until the background work of earlier requests (commits, and
// releases of claims whose answers were lost) is done, or ctx ends.
func (h *Handler) Wait(ctx context.Context) error {
	return h.bg.Wait(ctx)
}

// ServeHTTP answers one request: it passes it through or claims it, as its
// route says.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	stripGrantHeaders(r.Header)
	if tp := r.Header.Get(client.HeaderTraceparent); tp != "" {
		// The caller's trace goes on to the ledger (the SDK sends it from
		// the context); the upstream gets the header as sent.
		r = r.WithContext(client.WithTraceparent(r.Context(), tp, r.Header.Get(client.HeaderTracestate)))
	}
	if safeMethod(r.Method) {
		h.passThrough(w, r, "-")
		return
	}
	route, ok := h.cfg.Router.Match(r)
	if !ok {
		h.passThrough(w, r, "unmatched")
		return
	}
	if route.Key == KeyPass {
		h.passThrough(w, r, route.Name)
		return
	}
	key, err := ParseIdempotencyKey(r.Header.Values(HeaderIdempotencyKey))
	switch {
	case errors.Is(err, ErrMissingKey) && route.Key == KeyOptional:
		h.passThrough(w, r, route.Name)
		return
	case errors.Is(err, ErrMissingKey):
		h.cfg.Metrics.request(route.Name, ResultMissingKey)
		NewProblem(CodeMissingKey, fmt.Sprintf("%s %s needs an %s header (an RFC 8941 string, e.g. %s: \"8e03978e-40d5-43e8-bc93-6894a57f9324\")",
			r.Method, route.Path, HeaderIdempotencyKey, HeaderIdempotencyKey)).Write(w)
		return
	case err != nil:
		h.cfg.Metrics.request(route.Name, ResultInvalidKey)
		NewProblem(CodeInvalidKey, err.Error()).Write(w)
		return
	}
	body, p, res := h.readBody(r)
	if p != nil {
		h.cfg.Metrics.request(route.Name, res)
		p.Write(w)
		return
	}
	payload, err := BuildPayload(Request{
		Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header,
		ContentType: r.Header.Get("Content-Type"), Body: body,
	}, route.FingerprintHeaders, h.cfg.MaxPayload)
	if err != nil {
		h.cfg.Metrics.request(route.Name, ResultBodyTooLarge)
		NewProblem(CodeBodyTooLarge, err.Error()).Write(w)
		return
	}
	r, span := h.startSpan(r, route.Name)
	defer span.End()
	ex := &exchange{
		h: h, w: w, r: r, route: route, body: body,
		key:       LedgerKey(route.Scope, ScopeDigest(r.Header, route.ScopeHeaders), key),
		claim:     client.ClaimRequest{Tool: route.Tool, Payload: payload, Owner: h.cfg.NewOwner(), Policy: route.Policy, Lease: time.Duration(route.Lease)},
		startedAt: time.Now(),
	}
	ex.claim.Key = ex.key
	ex.log = h.cfg.Logger.With("route", route.Name, "key", ex.key, "owner", ex.claim.Owner)
	ex.run()
}

// readBody buffers the request body up to MaxBody; a refusal comes with
// its problem and result.
func (h *Handler) readBody(r *http.Request) ([]byte, *Problem, Result) {
	tooLarge := func() (*Problem, Result) {
		return NewProblem(CodeBodyTooLarge, fmt.Sprintf("the body is over the proxy's limit of %d bytes (--max-body); nothing was claimed or sent", h.cfg.MaxBody)),
			ResultBodyTooLarge
	}
	if r.ContentLength > h.cfg.MaxBody {
		p, res := tooLarge()
		return nil, p, res
	}
	if r.Body == nil {
		return nil, nil, ""
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.cfg.MaxBody+1))
	if err != nil {
		return nil, NewProblem(CodeBadRequest, "reading the request body: "+err.Error()), ResultBadRequest
	}
	if int64(len(body)) > h.cfg.MaxBody {
		p, res := tooLarge()
		return nil, p, res
	}
	return body, nil, ""
}

// passThrough forwards r untouched: no claim, nothing recorded.
func (h *Handler) passThrough(w http.ResponseWriter, r *http.Request, route string) {
	h.cfg.Metrics.request(route, ResultPassthrough)
	h.pass.ServeHTTP(w, r)
}
