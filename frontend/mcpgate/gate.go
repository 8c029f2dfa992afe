package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Gate; zero fields take the defaults.
type Config struct {
	// TracerProvider records a span per tools/call (SpanCall), the child
	// of the caller's _meta traceparent and the parent of the ledger
	// calls and the upstream call; nil records none (the caller's trace
	// context is still passed on).
	TracerProvider trace.TracerProvider
	// Upstreams are the MCP servers behind the gate, in order: when two
	// list the same downstream name, the first one's tool is listed.
	Upstreams []Upstream
	// Tools are the per-tool rules (first match wins).
	Tools []ToolRule
	// Keys is how keys are found (scope, host id keys, window, default
	// mode).
	Keys KeyPolicy
	// Ledger is the intentd cluster (a *client.Client).
	Ledger LedgerClient
	// LedgerURL is the ledger's base URL named in answers (approve and
	// resolve links).
	LedgerURL string
	// Lease is the claims' lease, renewed every lease/3 while the upstream
	// works; zero sends none, so the ledger's policy for the tool (or its
	// default, 30 s) decides. CallTimeout bounds one upstream call.
	Lease       time.Duration
	CallTimeout time.Duration
	// MaxWait bounds how long a call whose key is in flight waits for the
	// first call's result.
	MaxWait time.Duration
	// LedgerTimeout bounds how long a claim may stay without a definite
	// answer; ReportTimeout how long the gate keeps trying to record a
	// result.
	LedgerTimeout time.Duration
	ReportTimeout time.Duration
	// Commit acknowledges each executed intent (executed → committed) in
	// the background after its result is recorded, as client.Do does: a
	// third ledger write per call that changes nothing a retry sees (it
	// replays the same result either way). Off by default, as intent-proxy's
	// --commit is.
	Commit bool
	// MaxPayload and MaxResult are the ledger's --max-payload-bytes and
	// --max-result-bytes.
	MaxPayload int
	MaxResult  int
	// Logger logs (never to stdout: stdio hosts read it).
	Logger *slog.Logger
	// UpstreamStderr receives the stderr of upstream commands.
	UpstreamStderr io.Writer
	// NewOwner names one claim attempt (default "intent-mcp/" +
	// client.NewOwner()).
	NewOwner func() string
	// Now is the clock of derived keys' windows.
	Now func() time.Time
	// Version is the gate's version in its MCP implementation info.
	Version string
	// Metrics records the gate's Prometheus series (nil: none).
	Metrics *Metrics
	// StartTimeout bounds how long tools/list and tools/call wait for the
	// upstreams' first connection attempts after Launch (default
	// DefaultStartTimeout); the handshake never waits.
	StartTimeout time.Duration
}

// DefaultStartTimeout is Config.StartTimeout's default.
const DefaultStartTimeout = 60 * time.Second

// protocolVersionNew is the first MCP version of the sessionless protocol
// (SEP-2575: server/discover, per-request metadata).
const protocolVersionNew = "2026-07-28"

// ProtocolVersions are the MCP protocol versions the gate accepts from
// hosts, newest first: the same on every transport. The go-sdk serves
// 2026-07-28 on stdio but not on a stateful streamable-HTTP handler (it
// needs sessions: list_changed, progress, a caller bound to its session),
// so the gate offers the versions both can serve. A host that asks for a
// newer one is refused at negotiation: server/discover is answered with
// -32022 (unsupported protocol version) listing these, and initialize with
// the newest of them, as the lifecycle spec says.
func ProtocolVersions() []string {
	var out []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v < protocolVersionNew {
			out = append(out, v)
		}
	}
	return out
}

// Gate is the MCP gateway: Server is what hosts connect to, Start
// connects the upstreams.
type Gate struct {
	cfg      Config
	server   *mcp.Server
	ups      []*upstream
	progress *progressRouter
	links    links

	syncMu sync.Mutex // one tool sync at a time
	mu     sync.RWMutex
	plans  map[string]*toolPlan // by downstream name

	bg     client.Background // commits, and releases of claims whose answers were lost
	calls  sync.WaitGroup    // gated calls under way: Close lets them record
	cancel context.CancelFunc
	done   sync.WaitGroup

	launch   sync.Once
	launched chan struct{} // closed by Launch
	started  chan struct{} // closed once every upstream was tried once
	deadline time.Time     // Launch + StartTimeout: set before launched closes
}

// toolPlan is how the gate serves one downstream tool.
type toolPlan struct {
	name       string    // downstream
	up         *upstream // where it runs
	tool       *mcp.Tool // the upstream's definition
	def        *mcp.Tool // the definition listed downstream
	mode       Mode
	derive     bool
	window     time.Duration
	lease      time.Duration
	timeout    time.Duration
	policy     string
	ledgerTool string
}

// New returns a gate for cfg; Start connects its upstreams.
func New(cfg Config) (*Gate, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("mcpgate: a ledger is required")
	}
	if cfg.Keys.Scope == "" {
		cfg.Keys.Scope = DefaultScope
	}
	if cfg.Keys.Window == 0 {
		cfg.Keys.Window = Duration(DefaultWindow)
	}
	if cfg.Keys.HostIDKeys == nil {
		cfg.Keys.HostIDKeys = DefaultHostIDKeys
	}
	if err := validateSetup(cfg.Upstreams, cfg.Tools, cfg.Keys); err != nil {
		return nil, err
	}
	pickD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	pickD(&cfg.CallTimeout, DefaultCallTimeout)
	pickD(&cfg.MaxWait, DefaultMaxWait)
	pickD(&cfg.LedgerTimeout, DefaultLedgerTimeout)
	pickD(&cfg.ReportTimeout, DefaultReportTimeout)
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if cfg.MaxResult <= 0 {
		cfg.MaxResult = DefaultMaxResult
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.UpstreamStderr == nil {
		cfg.UpstreamStderr = os.Stderr
	}
	if cfg.NewOwner == nil {
		cfg.NewOwner = func() string { return "intent-mcp/" + client.NewOwner() }
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	pickD(&cfg.StartTimeout, DefaultStartTimeout)
	g := &Gate{cfg: cfg, progress: newProgressRouter(), plans: map[string]*toolPlan{}, links: links{base: cfg.LedgerURL},
		launched: make(chan struct{}), started: make(chan struct{})}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "intent-mcp", Version: cfg.Version}, &mcp.ServerOptions{
		Logger:                    cfg.Logger,
		SupportedProtocolVersions: ProtocolVersions(),
		// Tools come and go with the upstreams' lists: say so from the start.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		Instructions: "Tool calls through this server run at most once per logical call. A repeated call returns the first " +
			"call's result (marked _meta[\"dev.intentd/replayed\"]). Answers with structuredContent.status in_doubt mean: do not " +
			"retry, tell the user. pending_approval means: poll " + StatusTool + ", then call again with the same arguments.",
	})
	g.server.AddTool(statusToolDef(), g.status)
	g.server.AddReceivingMiddleware(g.middleware)
	for _, spec := range cfg.Upstreams {
		g.ups = append(g.ups, newUpstream(g, spec, effectivePrefix(spec, len(cfg.Upstreams))))
	}
	return g, nil
}

// Server is the MCP server hosts connect to (over any transport).
func (g *Gate) Server() *mcp.Server { return g.server }

// Launch starts connecting the upstreams and keeps them connected until
// Close; it does not wait. Hosts may be served at once: their handshake is
// answered whatever the upstreams are doing, and tools/list and
// tools/call wait (up to Config.StartTimeout) until every upstream was
// tried once, so the first listing sees every upstream that could be
// reached; the others are connected in the background and their tools
// appear then (notifications/tools/list_changed).
func (g *Gate) Launch() {
	g.launch.Do(func() {
		runCtx, cancel := context.WithCancel(context.Background())
		g.cancel = cancel
		g.deadline = time.Now().Add(g.cfg.StartTimeout)
		for _, u := range g.ups {
			g.done.Add(1)
			go func() {
				defer g.done.Done()
				u.run(runCtx)
			}()
		}
		go func() {
			for _, u := range g.ups {
				if u.waitTried(runCtx) != nil {
					return
				}
			}
			close(g.started)
			g.cfg.Logger.Info("every upstream tried once")
		}()
		close(g.launched)
	})
}

// Start is Launch, then waits until every upstream was tried once (or ctx
// ends).
func (g *Gate) Start(ctx context.Context) error {
	g.Launch()
	select {
	case <-g.started:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcpgate: upstreams %s not tried yet: %w", g.untried(), ctx.Err())
	}
}

// untried names the upstreams whose first connection attempt is still
// under way.
func (g *Gate) untried() string {
	var names []string
	for _, u := range g.ups {
		select {
		case <-u.tried:
		default:
			names = append(names, u.spec.Name)
		}
	}
	return strings.Join(names, ", ")
}

// awaitStart waits until every upstream was tried once, up to the start
// deadline; a gate not launched yet does not wait.
func (g *Gate) awaitStart(ctx context.Context) error {
	select {
	case <-g.launched:
	default:
		return nil
	}
	select {
	case <-g.started:
		return nil
	default:
	}
	timer := time.NewTimer(time.Until(g.deadline))
	defer timer.Stop()
	select {
	case <-g.started:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		select {
		case <-g.started:
			return nil
		default:
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
			"intent-mcp: upstream %s is still connecting after the start timeout (%s); try again later",
			g.untried(), g.cfg.StartTimeout)}
	}
}

// middleware is the gate's receiving middleware: tools/list and tools/call
// wait for the upstreams' start, listed tool annotations keep the
// upstream's absences, and no error leaves without a JSON-RPC code.
func (g *Gate) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/list" || method == "tools/call" {
			if err := g.awaitStart(ctx); err != nil {
				return nil, err
			}
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return nil, codedError(method, err)
		}
		if lr, ok := res.(*mcp.ListToolsResult); ok {
			return listToolsResult{lr}, nil
		}
		return res, nil
	}
}

// codedError gives an error without a JSON-RPC code one: the SDK would
// send code 0, which no JSON-RPC peer expects. A repeated initialize is an
// invalid request; anything else an internal error.
func codedError(method string, err error) error {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) || errors.Is(err, context.Canceled) {
		return err
	}
	code := int64(jsonrpc.CodeInternalError)
	if method == "initialize" {
		code = jsonrpc.CodeInvalidRequest
	}
	return &jsonrpc.Error{Code: code, Message: err.Error()}
}

// listToolsResult is a tools/list result whose tools' annotations omit
// readOnlyHint and idempotentHint when false. The SDK decodes an
// upstream's annotations into booleans and spells every false out again;
// false is both hints' default, so omitting it gives back what an
// upstream that left them out sent, and means what one that sent false
// meant.
type listToolsResult struct{ *mcp.ListToolsResult }

func (r listToolsResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.ListToolsResult)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(m["tools"], &tools); err != nil {
		return b, nil
	}
	changed := false
	for _, t := range tools {
		var ann map[string]json.RawMessage
		if raw, ok := t["annotations"]; !ok || json.Unmarshal(raw, &ann) != nil {
			continue
		}
		for _, k := range []string{"readOnlyHint", "idempotentHint"} {
			if string(ann[k]) == "false" {
				delete(ann, k)
				changed = true
			}
		}
		if t["annotations"], err = json.Marshal(ann); err != nil {
			return nil, err
		}
	}
	if !changed {
		return b, nil
	}
	if m["tools"], err = json.Marshal(tools); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// Close waits up to ctx for the gated calls under way to finish and
// record (their callers may have left: a call is seen through), then
// disconnects the upstreams and waits up to ctx for background work of
// earlier calls (commits, releases). Serve no new calls meanwhile.
func (g *Gate) Close(ctx context.Context) error {
	var errs []error
	if err := waitGroup(ctx, &g.calls); err != nil {
		errs = append(errs, fmt.Errorf("mcpgate: calls under way: %w", err))
	}
	if g.cancel != nil {
		g.cancel()
	}
	g.done.Wait()
	if err := g.bg.Wait(ctx); err != nil {
		errs = append(errs, fmt.Errorf("mcpgate: background reports: %w", err))
	}
	return errors.Join(errs...)
}

// waitGroup waits for wg or until ctx ends.
func waitGroup(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// planOf returns the plan of a downstream tool, or nil.
func (g *Gate) planOf(name string) *toolPlan {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.plans[name]
}

// syncTools makes the downstream tool list follow the upstreams' listings:
// new tools are added, changed ones replaced, gone ones removed; the
// server then sends notifications/tools/list_changed to the hosts.
func (g *Gate) syncTools() {
	g.syncMu.Lock()
	defer g.syncMu.Unlock()
	want := map[string]*toolPlan{}
	for _, u := range g.ups {
		for _, t := range u.listing() {
			name := DownstreamName(u.prefix, t.Name)
			switch {
			case name == StatusTool:
				u.log.Warn("not listing an upstream tool under the gate's own tool name", "tool", t.Name)
				continue
			case want[name] != nil:
				u.log.Warn("not listing a tool whose name another upstream lists first", "tool", t.Name, "name", name)
				continue
			}
			p, err := g.plan(u, t, name)
			if err != nil {
				u.log.Warn("not listing a tool", "tool", t.Name, "err", err)
				continue
			}
			if p.mode != ModeBlock {
				want[name] = p
			}
		}
	}
	g.mu.RLock()
	old := g.plans
	g.mu.RUnlock()
	var gone []string
	for name := range old {
		if want[name] == nil {
			gone = append(gone, name)
		}
	}
	for name, p := range want {
		if o := old[name]; o != nil && reflect.DeepEqual(o.def, p.def) {
			continue
		}
		if err := g.addTool(p); err != nil {
			p.up.log.Warn("not listing a tool", "tool", p.tool.Name, "err", err)
			delete(want, name)
			if old[name] != nil {
				gone = append(gone, name)
			}
		}
	}
	g.mu.Lock()
	g.plans = want
	g.mu.Unlock()
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
}

// addTool lists a tool downstream (the SDK panics on a definition it
// refuses; that is an error here).
func (g *Gate) addTool(p *toolPlan) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the MCP SDK refuses its definition: %v", r)
		}
	}()
	name := p.name
	g.server.AddTool(p.def, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return g.callTool(ctx, name, req)
	})
	return nil
}

// plan decides how tool t of upstream u is served under name.
func (g *Gate) plan(u *upstream, t *mcp.Tool, name string) (*toolPlan, error) {
	rule := matchRule(g.cfg.Tools, name)
	p := &toolPlan{name: name, up: u, tool: t, mode: Classify(rule, g.cfg.Keys.DefaultMode, t.Annotations), derive: true,
		window: time.Duration(g.cfg.Keys.Window), lease: g.cfg.Lease, timeout: g.cfg.CallTimeout,
		ledgerTool: DefaultLedgerTool(u.spec.Name, t.Name)}
	if rule != nil {
		if rule.Derive != nil {
			p.derive = *rule.Derive
		}
		if rule.Window > 0 {
			p.window = time.Duration(rule.Window)
		}
		if rule.Lease > 0 {
			p.lease = time.Duration(rule.Lease)
		}
		if rule.Timeout > 0 {
			p.timeout = time.Duration(rule.Timeout)
		}
		if rule.LedgerTool != "" {
			p.ledgerTool = rule.LedgerTool
		}
		p.policy = rule.Policy
	}
	def := *t
	def.Name = name
	def.Meta = withMeta(forwardMeta(t.Meta), MetaGate, string(p.mode))
	schema, err := objectSchema(t.InputSchema)
	if err != nil {
		return nil, err
	}
	def.InputSchema = schema
	p.def = &def
	return p, nil
}

// objectSchema checks that an upstream's input schema is an object schema
// (what MCP requires and the SDK checks); a schema without a type gets
// "type": "object".
func objectSchema(s any) (any, error) {
	if s == nil {
		return map[string]any{"type": "object"}, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("input schema is not a JSON object: %w", err)
	}
	switch m["type"] {
	case nil:
		m["type"] = "object"
	case "object":
	default:
		return nil, fmt.Errorf("input schema has type %v, not object", m["type"])
	}
	return m, nil
}
