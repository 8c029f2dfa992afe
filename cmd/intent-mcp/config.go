package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/frontend/mcpgate"
	"github.com/intentledger/intentd/internal/cli"
	"github.com/intentledger/intentd/internal/tracing"
)

// config is the parsed command line, environment and configuration file.
type config struct {
	listen, metricsListen       string
	ledger                      []string
	apiKey, ledgerURL           string
	upstreams                   []mcpgate.Upstream
	tools                       []mcpgate.ToolRule
	keys                        mcpgate.KeyPolicy
	lease, callTimeout, maxWait time.Duration
	ledgerTimeout               time.Duration
	reportTimeout               time.Duration
	commit                      bool
	startTimeout                time.Duration
	shutdownTimeout             time.Duration
	maxPayload, maxResult       int
	logLevel, logFormat         string
	pprof                       string
	otlpEndpoint                string // traces over OTLP/HTTP; "" is none
	// callers authenticates --listen callers (--caller-keys); nil with
	// insecureNoCallerAuth (loopback development only) or on stdio.
	callers              *auth.Keyset
	insecureNoCallerAuth bool
}

// envPrefix is the prefix of the environment variables that set flags.
const envPrefix = "INTENT_MCP_"

// upstreamFlags collects repeated --upstream flags. The first --upstream on
// the command line replaces the one INTENT_MCP_UPSTREAM gave, as every other
// flag given on the command line wins over its environment variable.
type upstreamFlags struct {
	list    []mcpgate.Upstream
	fromEnv bool // list holds the environment's value only
}

func (u *upstreamFlags) String() string { return fmt.Sprint(len(u.list)) }

func (u *upstreamFlags) Set(s string) error {
	up, err := mcpgate.ParseUpstreamFlag(s)
	if err != nil {
		return err
	}
	if u.fromEnv {
		u.list, u.fromEnv = nil, false
	}
	u.list = append(u.list, up)
	return nil
}

// parseConfig reads flags (with INTENT_MCP_* environment variables as
// defaults) and the configuration file; flags set explicitly win over the
// file, the file over the flags' defaults. A command after "--" is one more
// upstream, named by --name.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("intent-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: intent-mcp --ledger ADDRS [flags] [-- COMMAND [ARGS...]]")
		fs.PrintDefaults()
	}
	var ledger, configFile, name, hostIDs, mode, scope, callerKeys string
	var ups upstreamFlags
	var window time.Duration
	fs.StringVar(&ledger, "ledger", "", "comma-separated intentd node addresses (required), e.g. http://127.0.0.1:8101,http://127.0.0.1:8102")
	fs.StringVar(&c.apiKey, "api-key", "", "intentd API key (role agent) the gate claims with; also INTENT_MCP_API_KEY or INTENTD_API_KEY")
	fs.StringVar(&c.ledgerURL, "ledger-url", "", "the ledger's base URL named in answers (approve and resolve links); default: the first --ledger address")
	fs.StringVar(&configFile, "config", "", "JSON configuration file: upstreams, tool rules, key policy (docs/mcp.md)")
	fs.Var(&ups, "upstream", "an upstream MCP server, repeatable: NAME=http(s)://host/mcp (streamable HTTP) or NAME=COMMAND ARGS... (stdio, split on spaces)")
	fs.StringVar(&name, "name", mcpgate.DefaultUpstreamName, "name of the upstream given after --")
	fs.StringVar(&c.listen, "listen", "", "serve streamable HTTP at http://ADDR/mcp instead of stdio (with /healthz, /readyz and /metrics)")
	fs.StringVar(&callerKeys, "caller-keys", "", "--listen: JSON file of the API keys callers present as Authorization: Bearer (the ledger's keys-file format; a key needs the agent role); each caller's keys and results are its own")
	fs.BoolVar(&c.insecureNoCallerAuth, "insecure-no-caller-auth", false, "--listen without --caller-keys, on a loopback address only: every caller is one and shares keys and results (development)")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "serve /metrics, /healthz and /readyz on this separate address (on stdio the only way to reach them)")
	fs.StringVar(&scope, "scope", mcpgate.DefaultScope, "key scope: gates with the same scope (and ledger namespace) share keys")
	fs.DurationVar(&window, "window", mcpgate.DefaultWindow, "derivation window: identical calls without a key inside it are one call")
	fs.StringVar(&hostIDs, "host-id-keys", strings.Join(mcpgate.DefaultHostIDKeys, ","), "comma-separated _meta keys read as a host's call id, in order; \"none\" for none")
	fs.StringVar(&mode, "default-mode", string(mcpgate.ModeAuto), "mode of tools no rule names: auto (from annotations), gate or pass")
	fs.DurationVar(&c.lease, "lease", 0, "lease of claims, renewed every lease/3 while the upstream works; a crashed gate's calls turn in_doubt this long after; 0 leaves it to the ledger policy of the tool (or the ledger's default, "+client.DefaultLease.String()+")")
	fs.DurationVar(&c.callTimeout, "call-timeout", mcpgate.DefaultCallTimeout, "bound on one upstream call; past it the call is in doubt")
	fs.DurationVar(&c.maxWait, "max-wait", mcpgate.DefaultMaxWait, "how long a call whose key is in flight waits for the first call's result")
	fs.DurationVar(&c.ledgerTimeout, "ledger-timeout", mcpgate.DefaultLedgerTimeout, "how long a claim may stay without a definite answer from the ledger")
	fs.DurationVar(&c.reportTimeout, "report-timeout", mcpgate.DefaultReportTimeout, "how long the gate keeps trying to record a result")
	fs.BoolVar(&c.commit, "commit", false, "acknowledge each executed intent (executed -> committed) after its result, as client.Do does: a third ledger write per call that changes nothing a retry sees")
	fs.IntVar(&c.maxPayload, "max-payload", mcpgate.DefaultMaxPayload, "the ledger's --max-payload-bytes: claim payloads are made to fit it")
	fs.IntVar(&c.maxResult, "max-result", mcpgate.DefaultMaxResult, "the ledger's --max-result-bytes: larger results are recorded by size and digest only")
	fs.DurationVar(&c.startTimeout, "start-timeout", mcpgate.DefaultStartTimeout, "how long tools/list and tools/call wait for each upstream's first connection attempt (the handshake never waits)")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long calls in flight may take to finish and record")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&c.otlpEndpoint, "otlp-endpoint", "", "export a span per gated tools/call over OTLP/HTTP to this collector (http://collector:4318); empty: "+tracing.EnvTracesEndpoint+" or "+tracing.EnvEndpoint+" if set, else no tracing (the caller's _meta traceparent is passed on either way)")
	fs.StringVar(&c.pprof, "pprof", "", "serve Go's profiling endpoints (/debug/pprof/) on this address; off when empty (never expose it)")

	fromEnv, envErr := cli.SetFromEnv(fs, envPrefix, getenv)
	if envErr != nil {
		return c, envErr
	}
	ups.fromEnv = len(ups.list) > 0
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name := range fromEnv {
		set[name] = true
	}
	if c.apiKey == "" {
		c.apiKey = getenv("INTENTD_API_KEY")
	}
	otlp, err := tracing.Endpoint(c.otlpEndpoint, getenv)
	if err != nil {
		return c, err
	}
	c.otlpEndpoint = otlp
	if c.ledger = cli.SplitList(ledger); len(c.ledger) == 0 {
		return c, errors.New("--ledger is required: the intentd node addresses")
	}

	var file mcpgate.File
	if configFile != "" {
		data, err := os.ReadFile(configFile)
		if err != nil {
			return c, fmt.Errorf("--config: %w", err)
		}
		f, err := mcpgate.ParseFile(data)
		if err != nil {
			return c, fmt.Errorf("--config %s: %w", configFile, err)
		}
		file = *f
	}
	c.upstreams = append(append(c.upstreams, file.Upstreams...), ups.list...)
	if rest := fs.Args(); len(rest) > 0 {
		c.upstreams = append(c.upstreams, mcpgate.Upstream{Name: name, Command: rest})
	}
	c.tools = file.Tools
	c.keys = file.KeyPolicy
	if set["scope"] || c.keys.Scope == "" {
		c.keys.Scope = scope
	}
	if set["window"] || c.keys.Window == 0 {
		c.keys.Window = mcpgate.Duration(window)
	}
	if set["default-mode"] || c.keys.DefaultMode == "" {
		c.keys.DefaultMode = mcpgate.Mode(mode)
	}
	if set["host-id-keys"] || c.keys.HostIDKeys == nil {
		c.keys.HostIDKeys = []string{} // never nil: nil is the gate's default
		if hostIDs != "none" {
			c.keys.HostIDKeys = append(c.keys.HostIDKeys, cli.SplitList(hostIDs)...)
		}
	}
	if file.Lease > 0 && !set["lease"] {
		c.lease = time.Duration(file.Lease)
	}
	if file.CallTimeout > 0 && !set["call-timeout"] {
		c.callTimeout = time.Duration(file.CallTimeout)
	}
	if err := c.callerAuth(callerKeys); err != nil {
		return c, err
	}
	switch {
	case len(c.upstreams) == 0:
		return c, errors.New("no upstream: give --upstream NAME=COMMAND|URL, a command after --, or upstreams in --config")
	case c.maxPayload <= 0, c.maxResult <= 0:
		return c, errors.New("--max-payload and --max-result must be positive")
	case c.lease < 0, c.callTimeout <= 0, c.maxWait <= 0, c.ledgerTimeout <= 0, c.reportTimeout <= 0, c.startTimeout <= 0, c.shutdownTimeout <= 0:
		return c, errors.New("durations must be positive")
	}
	return c, nil
}

// callerAuth checks how --listen callers are authenticated and loads
// --caller-keys (path). Over HTTP every caller must present a key, unless
// --insecure-no-caller-auth says otherwise for a loopback address; on
// stdio the one caller is the process that launched the gate.
func (c *config) callerAuth(path string) error {
	switch {
	case c.listen == "" && path != "":
		return errors.New("--caller-keys authenticates --listen callers; on stdio the one caller is the process that launched the gate")
	case c.listen == "":
		return nil
	case path != "" && c.insecureNoCallerAuth:
		return errors.New("--caller-keys and --insecure-no-caller-auth: give one")
	case path == "" && !c.insecureNoCallerAuth:
		return errors.New("--listen serves any caller that can connect: give --caller-keys FILE (callers present Authorization: Bearer <key>, " +
			"and each caller's keys and results are its own), or --insecure-no-caller-auth for development on a loopback address")
	case path == "":
		if !loopback(c.listen) {
			return fmt.Errorf("--insecure-no-caller-auth: --listen %s is not a loopback address; give --caller-keys FILE", c.listen)
		}
		return nil
	}
	ks, err := auth.LoadFile(path)
	if err != nil {
		return fmt.Errorf("--caller-keys: %w", err)
	}
	c.callers = ks
	return nil
}

// loopback reports whether addr (host:port) listens on a loopback address
// only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
