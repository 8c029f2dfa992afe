// Command intent-mcp is an MCP gateway that runs every side-effecting
// tools/call at most once per logical call, with an intentd cluster as the
// replicated store of keys and recorded results. Hosts launch it (stdio) or
// connect to it (streamable HTTP, --listen) in place of the MCP servers it
// fronts:
//
//	intent-mcp --ledger http://127.0.0.1:8101,http://127.0.0.1:8102 -- npx -y some-mcp-server
//	intent-mcp --ledger http://127.0.0.1:8101 --config gate.json --listen 127.0.0.1:8490 --caller-keys callers.json
//
// Over HTTP every caller presents a bearer API key of --caller-keys (the
// ledger's keys-file format), and each caller's keys and recorded results
// are its own; --listen without it refuses to start unless
// --insecure-no-caller-auth is given for a loopback address.
//
// Every flag can also be set through the environment as
// INTENT_MCP_<FLAG> (upper case, dashes as underscores); --api-key also
// reads INTENTD_API_KEY. Flags win over the environment and the
// configuration file. It logs to stderr only: on stdio, stdout is the
// protocol. docs/mcp.md is the guide.
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
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/frontend/mcpgate"
	"github.com/intentledger/intentd/internal/cli"
	"github.com/intentledger/intentd/internal/probe"
	"github.com/intentledger/intentd/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// run parses flags, the environment and the configuration file, serves
// until ctx ends (or, on stdio, the host closes stdin), then shuts down.
// It returns the process exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "intent-mcp:", err)
		return 2
	}
	logger, err := cli.NewLogger(stderr, cfg.logFormat, cfg.logLevel)
	if err != nil {
		fmt.Fprintln(stderr, "intent-mcp:", err)
		return 2
	}
	if err := serve(ctx, cfg, logger, stdin, stdout, stderr); err != nil {
		logger.Error("stopped", "err", err)
		return 1
	}
	return 0
}

// serve runs the gate on stdio or on --listen until ctx ends.
func serve(ctx context.Context, cfg config, logger *slog.Logger, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) error {
	opts := []client.Option{client.WithHTTPClient(&http.Client{Timeout: client.DefaultHTTPTimeout, Transport: ledgerTransport()})}
	if cfg.apiKey != "" {
		opts = append(opts, client.WithAPIKey(cfg.apiKey))
	}
	ledger, err := client.New(cfg.ledger, opts...)
	if err != nil {
		return err
	}
	ledgerURL := cfg.ledgerURL
	if ledgerURL == "" {
		ledgerURL = ledger.Addrs()[0]
	}
	tp, err := tracing.New(ctx, tracing.Config{Endpoint: cfg.otlpEndpoint, Service: "intent-mcp"})
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
	gate, err := mcpgate.New(mcpgate.Config{
		TracerProvider: tracer,
		Upstreams:      cfg.upstreams, Tools: cfg.tools, Keys: cfg.keys, Ledger: ledger, LedgerURL: ledgerURL,
		Lease: cfg.lease, CallTimeout: cfg.callTimeout, MaxWait: cfg.maxWait, LedgerTimeout: cfg.ledgerTimeout,
		ReportTimeout: cfg.reportTimeout, Commit: cfg.commit, MaxPayload: cfg.maxPayload, MaxResult: cfg.maxResult,
		Logger: logger, UpstreamStderr: stderr, Version: version(), Metrics: mcpgate.NewMetrics(reg),
		StartTimeout: cfg.startTimeout,
	})
	if err != nil {
		return err
	}
	if cfg.metricsListen != "" {
		stop, err := serveMetrics(cfg.metricsListen, reg, ledger, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	if cfg.pprof != "" {
		stop, err := servePprof(cfg.pprof, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	// Serve hosts at once: a host's handshake never waits for an upstream
	// (a host gives up on a silent server); tools/list and tools/call wait
	// up to --start-timeout for the upstreams' first connection attempts.
	gate.Launch()
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
		defer ccancel()
		if err := gate.Close(cctx); err != nil {
			logger.Warn("shutdown", "err", err)
		}
	}()
	names := make([]string, len(cfg.upstreams))
	for i, u := range cfg.upstreams {
		names[i] = u.Name
	}
	if cfg.listen == "" {
		logger.Info("intent-mcp serving on stdio", "upstreams", strings.Join(names, ","), "ledger", strings.Join(ledger.Addrs(), ","))
		err := gate.Server().Run(ctx, mcpgate.LiftSEP3182(stdin, stdout))
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) {
			return err
		}
		logger.Info("stdio closed; stopping")
		return nil
	}
	return serveHTTP(ctx, cfg, logger, gate, ledger, reg, names)
}

// serveHTTP serves the streamable-HTTP transport at /mcp, and /healthz,
// /readyz and (unless --metrics-listen moved it) /metrics, until ctx ends.
func serveHTTP(ctx context.Context, cfg config, logger *slog.Logger, gate *mcpgate.Gate, ledger *client.Client, reg *prometheus.Registry, names []string) error {
	mux := http.NewServeMux()
	if cfg.callers == nil {
		logger.Warn("CALLER AUTH IS OFF (--insecure-no-caller-auth): every caller that can connect is one caller, " +
			"shares its keys and is replayed the others' results")
	}
	mux.Handle("/mcp", mcpHandler(gate, cfg.callers, logger))
	var metrics prometheus.Gatherer // on --metrics-listen instead when it is set
	if cfg.metricsListen == "" {
		metrics = reg
	}
	probe.Mount(mux, ledger.LeaderID, metrics)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("intent-mcp serving streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp",
		"upstreams", strings.Join(names, ","), "ledger", strings.Join(ledger.Addrs(), ","))
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	logger.Info("shutting down: finishing calls in flight", "timeout", cfg.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// mcpHandler is the streamable-HTTP endpoint of the gate. With callers
// (--caller-keys) every request must carry Authorization: Bearer <key> of
// a key with the agent role (401 without a valid key, 403 without the
// role); the key's name is the caller the gate scopes keys by
// (mcpgate.CallerOf), and the go-sdk binds each session to it, so no other
// key can use a session. Without callers (--insecure-no-caller-auth)
// every caller is one.
func mcpHandler(gate *mcpgate.Gate, callers *auth.Keyset, logger *slog.Logger) http.Handler {
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return gate.Server() },
		&mcp.StreamableHTTPOptions{Logger: logger})
	h = mcpgate.LiftSEP3182HTTP(h, mcp.DefaultMaxRequestBodyBytes)
	if callers == nil {
		return h
	}
	return sdkauth.RequireBearerToken(callerVerifier(callers), &sdkauth.RequireBearerTokenOptions{
		Scopes: []string{string(auth.RoleAgent)}, AllowMissingExpiration: true, // API keys do not expire; they are removed
	})(h)
}

// callerVerifier authenticates a caller's bearer key against callers: its
// name is the caller, and it has the "agent" scope when the key may act as
// an agent.
func callerVerifier(callers *auth.Keyset) sdkauth.TokenVerifier {
	return func(_ context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
		p, err := callers.Authenticate(token)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", sdkauth.ErrInvalidToken, err)
		}
		info := &sdkauth.TokenInfo{UserID: p.Name}
		if p.Has(auth.RoleAgent) {
			info.Scopes = []string{string(auth.RoleAgent)}
		}
		return info, nil
	}
}

// ledgerIdleConns is how many idle connections the gate keeps to each
// ledger node: every call in flight holds one for its claim, complete and
// commit, and net/http's default of 2 made the gate dial a new connection
// for most ledger requests under concurrent calls (make bench-mcp).
const ledgerIdleConns = 256

// ledgerTransport is http.DefaultTransport keeping ledgerIdleConns idle
// connections per node.
func ledgerTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * ledgerIdleConns
	t.MaxIdleConnsPerHost = ledgerIdleConns
	return t
}

// servePprof serves Go's profiling endpoints (/debug/pprof/...) on addr
// until stop is called.
func servePprof(addr string, logger *slog.Logger) (stop func(), err error) {
	stop, bound, err := serveOn(addr, "--pprof", probe.PprofMux(), logger)
	if err == nil {
		logger.Warn("pprof enabled: profiling endpoints served", "addr", bound)
	}
	return stop, err
}

// serveMetrics serves /metrics, /healthz and /readyz on their own listener
// (--metrics-listen: the only way to reach them when the gate speaks stdio)
// until stop.
func serveMetrics(addr string, reg *prometheus.Registry, ledger *client.Client, logger *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	probe.Mount(mux, ledger.LeaderID, reg)
	stop, bound, err := serveOn(addr, "--metrics-listen", mux, logger)
	if err == nil {
		logger.Info("metrics served", "url", "http://"+bound+"/metrics")
	}
	return stop, err
}

// serveOn serves h on its own listener at addr (given by flag, named in
// errors) until stop, and returns the bound address.
func serveOn(addr, flag string, h http.Handler, logger *slog.Logger) (stop func(), bound string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", flag, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }, ln.Addr().String(), nil
}

// version is the module version the binary was built from.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
