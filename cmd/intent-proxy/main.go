// Command intent-proxy is a reverse proxy that gives any upstream HTTP API
// the semantics of the Idempotency-Key header
// (draft-ietf-httpapi-idempotency-key-header), with an intentd cluster as
// the replicated store: a request is run at most once per key, a retry
// gets the recorded answer replayed, a concurrent one 409, one with
// another request under the same key 422, and one whose first attempt got
// no answer 409 in-doubt until someone resolves it.
//
//	intent-proxy --upstream http://127.0.0.1:9000 \
//	  --ledger http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103 \
//	  --listen 127.0.0.1:8480 --routes routes.json
//
// Every flag can also be set through the environment as
// INTENT_PROXY_<FLAG> (upper case, dashes as underscores); --api-key also
// reads INTENTD_API_KEY. Flags win. docs/proxy.md is the guide.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/frontend/idemproxy"
	"github.com/intentledger/intentd/internal/cli"
	"github.com/intentledger/intentd/internal/probe"
	"github.com/intentledger/intentd/internal/tracing"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stderr))
}

// run parses flags and the environment, serves until ctx ends, then shuts
// down gracefully. It returns the process exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "intent-proxy:", err)
		return 2
	}
	logger, err := cli.NewLogger(stderr, cfg.logFormat, cfg.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "intent-proxy:", err)
		return 2
	}
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("stopped", "err", err)
		return 1
	}
	return 0
}

// Admin paths on the proxy's own listener; every other path is proxied.
const (
	pathHealthz = "/-/healthz"
	pathReadyz  = "/-/readyz"
	pathMetrics = "/-/metrics"
)

// serve runs the proxy (and the metrics listener) until ctx ends.
func serve(ctx context.Context, cfg config, logger *slog.Logger) error {
	routes, err := cfg.loadRoutes()
	if err != nil {
		return err
	}
	router, err := idemproxy.NewRouter(routes)
	if err != nil {
		return err
	}
	// The SDK's default HTTP client keeps 2 idle connections per node; the
	// proxy has up to one claim per request in flight.
	opts := []client.Option{client.WithHTTPClient(&http.Client{Timeout: client.DefaultHTTPTimeout, Transport: idemproxy.NewTransport()})}
	if cfg.apiKey != "" {
		opts = append(opts, client.WithAPIKey(cfg.apiKey))
	}
	ledger, err := client.New(cfg.ledger, opts...)
	if err != nil {
		return err
	}
	tp, err := tracing.New(ctx, tracing.Config{Endpoint: cfg.otlpEndpoint, Service: "intent-proxy"})
	if err != nil {
		return err
	}
	var tracer trace.TracerProvider
	if tp != nil {
		tracer = tp
		defer func() {
			// The spans still queued go out before the process ends.
			sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				logger.Warn("flushing spans", "err", err)
			}
		}()
	}
	reg := probe.NewRegistry()
	h, err := idemproxy.New(idemproxy.Config{
		TracerProvider: tracer,
		Upstream:       cfg.upstream, Ledger: ledger, LedgerURL: ledger.Addrs()[0], Router: router,
		MaxBody: cfg.maxBody, MaxPayload: cfg.maxPayload, MaxResult: cfg.maxResult,
		UpstreamTimeout: cfg.upstreamTimeout, LedgerTimeout: cfg.ledgerTimeout, ReportTimeout: cfg.reportTimeout, MaxWait: cfg.maxWait,
		Commit: cfg.commit, Logger: logger, Metrics: idemproxy.NewMetrics(reg),
	})
	if err != nil {
		return err
	}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	healthz := probe.Healthz()
	readyz := probe.Readyz(ledger.LeaderID)

	var adminMux map[string]http.Handler
	if cfg.metricsListen == "" {
		adminMux = map[string]http.Handler{pathHealthz: healthz, pathReadyz: readyz, pathMetrics: metrics}
	} else {
		adminMux = map[string]http.Handler{pathHealthz: healthz, pathReadyz: readyz}
	}
	front := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a, ok := adminMux[r.URL.Path]; ok && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
				a.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	servers := []*http.Server{front}
	listeners := []net.Listener{ln}
	if cfg.metricsListen != "" {
		mux := http.NewServeMux()
		probe.Mount(mux, ledger.LeaderID, reg)
		mln, err := net.Listen("tcp", cfg.metricsListen)
		if err != nil {
			ln.Close()
			return err
		}
		servers = append(servers, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, mln)
	}
	if cfg.pprof != "" {
		pln, err := net.Listen("tcp", cfg.pprof)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return fmt.Errorf("--pprof: %w", err)
		}
		servers = append(servers, &http.Server{Handler: probe.PprofMux(), ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, pln)
		logger.Warn("pprof enabled: profiling endpoints served", "addr", pln.Addr().String())
	}
	errc := make(chan error, len(servers))
	for i, s := range servers {
		go func() { errc <- s.Serve(listeners[i]) }()
	}
	logger.Info("intent-proxy serving", "listen", ln.Addr().String(), "upstream", cfg.upstream.String(),
		"ledger", strings.Join(ledger.Addrs(), ","), "routes", len(routes), "metrics", metricsWhere(cfg))

	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	logger.Info("shutting down: finishing requests in flight", "timeout", cfg.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	var first error
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil && first == nil {
			first = fmt.Errorf("shutdown: %w", err)
		}
	}
	if err := h.Wait(sctx); err != nil && first == nil {
		first = fmt.Errorf("shutdown: background releases: %w", err)
	}
	if first == nil {
		logger.Info("stopped")
	}
	return first
}

// metricsWhere says where the metrics are served, for the start-up line.
func metricsWhere(cfg config) string {
	if cfg.metricsListen != "" {
		return "http://" + cfg.metricsListen + "/metrics"
	}
	return pathMetrics + " on the proxy's listener"
}

// config is the parsed command line.
type config struct {
	listen, metricsListen string
	pprof                 string
	otlpEndpoint          string // traces over OTLP/HTTP; "" is none
	upstream              *url.URL
	ledger                []string
	apiKey                string
	routesFile            string
	defaultRoute          idemproxy.Route
	maxBody               int64
	maxPayload, maxResult int
	upstreamTimeout       time.Duration
	ledgerTimeout         time.Duration
	reportTimeout         time.Duration
	maxWait               time.Duration
	commit                bool
	shutdownTimeout       time.Duration
	logLevel, logFormat   string
}

// loadRoutes reads the routes file, or makes the default route (every
// path) from the flags.
func (c config) loadRoutes() ([]idemproxy.Route, error) {
	if c.routesFile == "" {
		r := c.defaultRoute
		r.Name, r.Path = "default", "/"
		if err := r.Normalize(); err != nil {
			return nil, fmt.Errorf("default route: %w", err)
		}
		return []idemproxy.Route{r}, nil
	}
	data, err := os.ReadFile(c.routesFile)
	if err != nil {
		return nil, fmt.Errorf("--routes: %w", err)
	}
	routes, err := idemproxy.ParseRoutes(data, c.defaultRoute)
	if err != nil {
		return nil, fmt.Errorf("--routes %s: %w", c.routesFile, err)
	}
	return routes, nil
}

// envPrefix is the prefix of the environment variables that set flags.
const envPrefix = "INTENT_PROXY_"

// parseConfig reads flags, with INTENT_PROXY_* environment variables as
// defaults.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("intent-proxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var upstream, ledger, key, on5xx, fpHeaders, scopeHeaders string
	var lease time.Duration
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8480", "address the proxy serves on")
	fs.StringVar(&upstream, "upstream", "", "base URL of the upstream API (required), e.g. http://127.0.0.1:9000")
	fs.StringVar(&ledger, "ledger", "", "comma-separated intentd node addresses (required), e.g. http://127.0.0.1:8101,http://127.0.0.1:8102")
	fs.StringVar(&c.apiKey, "api-key", "", "intentd API key (role agent) the proxy claims with; also INTENT_PROXY_API_KEY or INTENTD_API_KEY")
	fs.StringVar(&c.routesFile, "routes", "", "JSON file of routes (see docs/proxy.md); without it one default route covers every path")
	fs.StringVar(&c.defaultRoute.Tool, "tool", idemproxy.DefaultTool, "tool of the default route (and of routes that name none): what ledger policies select by")
	fs.StringVar(&key, "key", string(idemproxy.KeyRequired), "Idempotency-Key on the default route (and routes that say nothing): required, optional or pass")
	fs.StringVar(&c.defaultRoute.Policy, "policy", "", "ledger policy of the default route's claims")
	fs.DurationVar(&lease, "lease", 0, "lease of claims (default route and routes that name none), renewed while the upstream works; 0 takes the ledger's default ("+client.DefaultLease.String()+")")
	fs.StringVar(&on5xx, "on-5xx", string(idemproxy.On5xxRecord), "what an upstream 5xx records (default route and routes that say nothing): record, retry or in_doubt")
	fs.BoolVar(&c.defaultRoute.WaitInFlight, "wait-in-flight", false, "default route: wait for a request in flight with the same key and replay its answer, instead of 409")
	fs.StringVar(&fpHeaders, "fingerprint-headers", "", "default route: comma-separated request headers included in the fingerprint")
	fs.StringVar(&scopeHeaders, "scope-headers", "", "default route: comma-separated request headers whose values scope the keys (default: the caller's credentials, Authorization and Cookie)")
	fs.BoolVar(&c.defaultRoute.SingleCaller, "single-caller", false, "default route: no per-caller scope, every client shares keys (and is replayed the others' answers); only for a single trusted caller")
	fs.Int64Var(&c.maxBody, "max-body", idemproxy.DefaultMaxBody, "largest request body on claimed routes, in bytes (buffered for the fingerprint); larger: 413 body-too-large")
	fs.IntVar(&c.maxPayload, "max-payload", idemproxy.DefaultMaxPayload, "the ledger's --max-payload-bytes: claim payloads are made to fit it")
	fs.IntVar(&c.maxResult, "max-result", idemproxy.DefaultMaxResult, "the ledger's --max-result-bytes: recorded answers are made to fit it (a larger body is not recorded)")
	fs.DurationVar(&c.upstreamTimeout, "upstream-timeout", idemproxy.DefaultUpstreamTimeout, "bound on one upstream exchange of a claimed request, headers to end of body")
	fs.DurationVar(&c.ledgerTimeout, "ledger-timeout", idemproxy.DefaultLedgerTimeout, "how long a claim may stay without a definite answer from the ledger before the client gets 503")
	fs.DurationVar(&c.reportTimeout, "report-timeout", idemproxy.DefaultReportTimeout, "how long the proxy keeps trying to record an upstream answer")
	fs.DurationVar(&c.maxWait, "max-wait", idemproxy.DefaultMaxWait, "longest wait of a wait_in_flight request")
	fs.BoolVar(&c.commit, "commit", false, "acknowledge each executed intent (executed -> committed) after its answer, as client.Do does: a third ledger write per request that changes nothing a retry sees")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this separate address; empty: /-/metrics, /-/healthz, /-/readyz on --listen")
	fs.StringVar(&c.otlpEndpoint, "otlp-endpoint", "", "export a span per claimed request over OTLP/HTTP to this collector (http://collector:4318); empty: "+tracing.EnvTracesEndpoint+" or "+tracing.EnvEndpoint+" if set, else no tracing (the caller's traceparent is passed on either way)")
	fs.StringVar(&c.pprof, "pprof", "", "serve Go's /debug/pprof/ profiling endpoints on this separate address (e.g. 127.0.0.1:6061; off when empty)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long requests in flight may take to finish and record")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")

	_, envErr := cli.SetFromEnv(fs, envPrefix, getenv)
	if envErr != nil {
		return c, envErr
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.apiKey == "" {
		c.apiKey = getenv("INTENTD_API_KEY")
	}
	otlp, err := tracing.Endpoint(c.otlpEndpoint, getenv)
	if err != nil {
		return c, err
	}
	c.otlpEndpoint = otlp
	c.defaultRoute.Key, c.defaultRoute.On5xx, c.defaultRoute.Lease = idemproxy.KeyMode(key), idemproxy.On5xx(on5xx), idemproxy.Duration(lease)
	c.defaultRoute.FingerprintHeaders, c.defaultRoute.ScopeHeaders = cli.SplitList(fpHeaders), cli.SplitList(scopeHeaders)
	if upstream == "" {
		return c, errors.New("--upstream is required")
	}
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("--upstream %q: want http(s)://host[:port][/base]", upstream)
	}
	c.upstream = u
	if c.ledger = cli.SplitList(ledger); len(c.ledger) == 0 {
		return c, errors.New("--ledger is required: the intentd node addresses")
	}
	switch {
	case c.maxBody <= 0, c.maxPayload <= 0, c.maxResult <= 0:
		return c, errors.New("--max-body, --max-payload and --max-result must be positive")
	case c.upstreamTimeout <= 0, c.ledgerTimeout <= 0, c.reportTimeout <= 0, c.maxWait <= 0, c.shutdownTimeout <= 0:
		return c, errors.New("timeouts must be positive")
	}
	// The default route is checked here, so a bad flag fails at start.
	probe := c.defaultRoute
	probe.Path = "/"
	if err := probe.Normalize(); err != nil {
		return c, fmt.Errorf("default route flags: %w", err)
	}
	return c, nil
}
