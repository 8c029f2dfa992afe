package canary

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/frontend/mcpgate"
)

// The _meta keys that carry an episode's identity through the MCP gate,
// as the Canary-* headers do over HTTP: the agent sets them on its
// tools/call, the fault proxy reads and rewrites them, the gate passes
// them to the tool (it forwards every _meta key but its own and the
// protocol's), and the tool sends them on to the provider.
const (
	// MetaEpisode names the episode (as HeaderEpisode).
	MetaEpisode = "canary/episode"
	// MetaDelivery names one delivery of the call (as HeaderDelivery).
	MetaDelivery = "canary/delivery"
	// MetaCrash tells the tool where to die (as HeaderCrash).
	MetaCrash = "canary/crash"
)

// mcpPath is where the gate and the plain MCP tool serve streamable HTTP.
const mcpPath = "/mcp"

// mcpTool is the name of the plain MCP tool's one tool; the gate lists it
// under the same name (one upstream: no prefix).
const mcpTool = "charge"

// mcpUpstream names the tool's server behind the gate, and mcpScope is
// the gate's key scope.
const (
	mcpUpstream = "canary"
	mcpScope    = "canary"
)

// codeRejectedByTransport is the code of the go-sdk's "rejected by
// transport" error: its streamable-HTTP client wraps every failed POST in
// it (a connection that died before the answer, a 502, 503, 504 or 429),
// so it says the call got no answer, not that the server refused it.
const codeRejectedByTransport = -32005

// errToolCrashed is what the plain MCP tool's handler returns after an
// in-process crash: its server is closed, so the answer never gets out.
var errToolCrashed = errors.New("canary: the tool crashed")

// chargeSchema is the input schema of the plain MCP tool's charge.
var chargeSchema = map[string]any{
	"type":                 "object",
	"properties":           map[string]any{"amount": map[string]any{"type": "integer", "minimum": 1}},
	"required":             []string{"amount"},
	"additionalProperties": false,
}

// NewMCPTool returns the tool as a plain MCP server that knows nothing of
// the ledger: its charge tool ({"amount":N}, annotated destructive)
// performs the charge at the provider and answers structuredContent
// {"txn":...}, every time it is called. The episode, the delivery and the
// crash point come from the call's _meta (MetaEpisode, MetaDelivery,
// MetaCrash). At a crash point it calls cfg.Die, which must stop any
// answer from getting out: a tool process kills itself, an in-process
// lane closes the tool's HTTP server (then the call ends unanswered).
func NewMCPTool(cfg PlainToolConfig) *mcp.Server {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	tc := ToolConfig{Provider: cfg.Provider, HTTP: cfg.HTTP}
	s := mcp.NewServer(&mcp.Implementation{Name: "canary-tool", Version: "1"}, nil)
	destructive := true
	s.AddTool(&mcp.Tool{Name: mcpTool, Description: "Charge an amount at the provider (every call charges).",
		InputSchema: chargeSchema, Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var call plainCharge
			if err := decodeStrict(bytes.NewReader(req.Params.Arguments), &call); err != nil || call.Amount <= 0 {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("bad charge arguments: %v", err)}
			}
			meta := req.Params.Meta
			crash := metaString(meta, MetaCrash)
			died := func(where string) bool {
				if crash != where {
					return false
				}
				if cfg.Die != nil {
					cfg.Die()
				}
				return true
			}
			if died("before") {
				return nil, errToolCrashed
			}
			txn, err := tc.charge(ctx, metaString(meta, MetaEpisode), metaString(meta, MetaDelivery), call.Amount)
			if err != nil {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "provider: " + err.Error()}}}, nil
			}
			if died("after") {
				return nil, errToolCrashed
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "charged " + txn}},
				StructuredContent: plainAnswer{Txn: txn}}, nil
		})
	return s
}

// metaString reads a string from _meta ("" when absent or not a string).
func metaString(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// mcpHandler serves s over streamable HTTP, stateless with JSON answers:
// every POST is a message of its own, so the fault proxy can copy, hold
// and redirect one tools/call without a session to keep.
func mcpHandler(s *mcp.Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(mcpPath, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	return mux
}

// mcpLane is the MCP gate (mcpgate) in front of the plain MCP tool: the
// tool serves streamable HTTP on a loopback port of its own and is the
// gate's one upstream; Handler serves the gate.
type mcpLane struct {
	gate *mcpgate.Gate
	// stopTool closes the tool's server with every connection.
	stopTool func()
	// Handler serves the gate over streamable HTTP at mcpPath.
	Handler http.Handler

	mu      sync.Mutex
	crashed bool
}

// startMCPLane starts the plain MCP tool and the gate in front of it,
// claiming with lease. die is what the tool does at a crash point; nil
// closes the lane's tool server (an in-process crash: the gate sees its
// call die unanswered). broken makes the gate pass the tool's calls
// through without the ledger (a misconfigured gate: mode pass).
func startMCPLane(ctx context.Context, ledger *client.Client, tool PlainToolConfig, lease time.Duration, broken bool, die func()) (*mcpLane, error) {
	l := &mcpLane{}
	tool.Die = die
	if die == nil {
		tool.Die = l.killTool
	}
	toolURL, stop, err := serveOne(mcpHandler(NewMCPTool(tool)))
	if err != nil {
		return nil, err
	}
	l.stopTool = stop
	mode := mcpgate.ModeGate
	if broken {
		mode = mcpgate.ModePass
	}
	l.gate, err = mcpgate.New(mcpgate.Config{
		Upstreams: []mcpgate.Upstream{{Name: mcpUpstream, URL: toolURL + mcpPath}},
		Tools:     []mcpgate.ToolRule{{Match: mcpTool, Mode: mode, LedgerTool: toolName}},
		Keys:      mcpgate.KeyPolicy{Scope: mcpScope},
		Ledger:    ledger, LedgerURL: ledger.Addrs()[0], Lease: lease, MaxWait: 30 * time.Second,
	})
	if err != nil {
		l.stopTool()
		return nil, fmt.Errorf("canary: MCP gate: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := l.gate.Start(sctx); err != nil {
		l.close()
		return nil, fmt.Errorf("canary: MCP gate: %w", err)
	}
	if err := listsTool(sctx, l.gate.Server(), mcpTool); err != nil {
		l.close()
		return nil, fmt.Errorf("canary: MCP gate: %w", err)
	}
	l.Handler = mcpHandler(l.gate.Server())
	return l, nil
}

// listsTool checks that s lists the tool name, over an in-memory session:
// Start returns after the first attempt to reach the upstream, which may
// have failed.
func listsTool(ctx context.Context, s *mcp.Server, name string) error {
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		return err
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "canary-check", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	for _, t := range res.Tools {
		if t.Name == name {
			return nil
		}
	}
	return fmt.Errorf("the gate does not list %q: its upstream could not be reached", name)
}

// killTool is an in-process crash: the tool's server closes with every
// connection, so the gate's call dies unanswered.
func (l *mcpLane) killTool() {
	l.mu.Lock()
	l.crashed = true
	l.mu.Unlock()
	l.stopTool()
}

// serveOne serves h on a loopback port of its own until stop, which
// closes the server with every connection.
func serveOne(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("canary: listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return "http://" + ln.Addr().String(), func() {
		_ = srv.Close()
		<-done
	}, nil
}

// close stops the tool and the gate (waiting, bounded, for the gate's
// background reports) and says whether the tool crashed in-process.
func (l *mcpLane) close() string {
	l.stopTool()
	ctx, cancel := context.WithTimeout(context.Background(), mcpgate.DefaultReportTimeout)
	defer cancel()
	_ = l.gate.Close(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.crashed {
		return "the tool's server closed at the crash point"
	}
	return ""
}

// mcpLedgerKey is the ledger key the gate claims for an episode's explicit
// key.
func mcpLedgerKey(key string) string {
	k, _, err := mcpgate.ResolveKey(mcpgate.KeyInput{Meta: map[string]any{mcpgate.MetaIdempotencyKey: key},
		Scope: []string{mcpScope}, Upstream: mcpUpstream, Tool: mcpTool, LedgerTool: toolName})
	if err != nil {
		return key
	}
	return k.Ledger
}

// mcpCall is an agent's tools/call as the fault proxy reads it: the
// JSON-RPC request, the episode and delivery from its _meta.
type mcpCall struct {
	label, delivery string
	// msg is the request's members; params its params' members, meta its
	// _meta.
	msg, params map[string]json.RawMessage
	meta        map[string]any
	body        []byte
}

// parseMCPCall reads an MCP POST: a tools/call that names an episode in
// its _meta, or nil for anything else (discovery, initialization,
// notifications), which the fault proxy passes through untouched.
func parseMCPCall(method string, body []byte) *mcpCall {
	if method != http.MethodPost {
		return nil
	}
	c := &mcpCall{body: body}
	var name string
	if json.Unmarshal(body, &c.msg) != nil || json.Unmarshal(c.msg["method"], &name) != nil || name != "tools/call" ||
		json.Unmarshal(c.msg["params"], &c.params) != nil {
		return nil
	}
	if raw, ok := c.params["_meta"]; !ok || json.Unmarshal(raw, &c.meta) != nil {
		return nil
	}
	ep, ok := c.meta[MetaEpisode]
	if !ok {
		return nil
	}
	c.label, _ = ep.(string)
	c.delivery = metaString(c.meta, MetaDelivery)
	return c
}

// rewrite returns the call as the fault proxy delivers it: unchanged for
// the agent's own delivery; a copy gets its delivery name and a JSON-RPC
// id of its own (a host that dispatches a call twice sends two requests),
// and a crash delivery the crash point.
func (c *mcpCall) rewrite(delivery, crash string) []byte {
	if delivery == c.delivery && crash == "" {
		return c.body
	}
	meta := make(map[string]any, len(c.meta)+1)
	for k, v := range c.meta {
		meta[k] = v
	}
	meta[MetaDelivery] = delivery
	if crash != "" {
		meta[MetaCrash] = crash
	}
	params := make(map[string]json.RawMessage, len(c.params))
	for k, v := range c.params {
		params[k] = v
	}
	params["_meta"], _ = json.Marshal(meta)
	msg := make(map[string]json.RawMessage, len(c.msg))
	for k, v := range c.msg {
		msg[k] = v
	}
	msg["params"], _ = json.Marshal(params)
	if delivery != c.delivery {
		msg["id"], _ = json.Marshal(fmt.Sprintf("%s/%s", bytes.Trim(c.msg["id"], `"`), delivery))
	}
	out, _ := json.Marshal(msg)
	return out
}

// mcpAnswerOutcome reads the gate's HTTP answer to a tools/call: a
// JSON-RPC response, as JSON or as server-sent events (a JSON-RPC error
// may come with a 4xx status: the stateless transport answers the
// divergent error with 400).
func mcpAnswerOutcome(status int, header http.Header, body []byte) (outcome, detail string) {
	var resp struct {
		Result json.RawMessage `json:"result"`
		Error  *jsonrpc.Error  `json:"error"`
	}
	msg := mcpAnswerMessage(header, body)
	switch {
	case json.Unmarshal(msg, &resp) == nil && resp.Error != nil:
		return mcpOutcome(nil, resp.Error)
	case status != http.StatusOK:
		return "error", fmt.Sprintf("%d %s", status, bytes.TrimSpace(body))
	case resp.Error == nil && len(resp.Result) == 0:
		return "", ""
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(resp.Result, &res); err != nil {
		return "error", "unreadable result: " + err.Error()
	}
	return mcpOutcome(&res, nil)
}

// mcpAnswerMessage is the JSON-RPC response in the gate's HTTP answer to
// a tools/call: the body, or the data of its last event that carries an
// id when the answer is server-sent events.
func mcpAnswerMessage(header http.Header, body []byte) []byte {
	if !strings.HasPrefix(header.Get("Content-Type"), "text/event-stream") {
		return body
	}
	var msg []byte
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, maxToolBody)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.Contains(d, `"id"`) {
			msg = []byte(d)
		}
	}
	return msg
}

// mcpAnswerStatus is the gate's status (structuredContent "status") in
// its HTTP answer to a tools/call, "" when the answer has none.
func mcpAnswerStatus(header http.Header, body []byte) mcpgate.Status {
	var resp struct {
		Result struct {
			StructuredContent struct {
				Status mcpgate.Status `json:"status"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if json.Unmarshal(mcpAnswerMessage(header, body), &resp) != nil {
		return ""
	}
	return resp.Result.StructuredContent.Status
}

// mcpOutcome maps the gate's answer to a charge onto the canary's
// outcomes: the divergent JSON-RPC error (data code
// idempotency_key_conflict) is divergent; a result whose
// structuredContent status is in_doubt or in_flight is that; the tool's
// result is executed, or duplicate when _meta says dev.intentd/replayed;
// any other answer is an error the agent retries, and a call that got no
// answer (err not a JSON-RPC error, or the transport's own) is "".
func mcpOutcome(res *mcp.CallToolResult, err error) (outcome, detail string) {
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, &werr) && werr.Code == codeRejectedByTransport:
		return "", err.Error()
	case errors.As(err, &werr):
		var data struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(werr.Data, &data) == nil && data.Code == mcpgate.ConflictCode {
			return "divergent", werr.Message
		}
		return "error", werr.Error()
	case err != nil:
		return "", err.Error()
	case res == nil:
		return "", "no result"
	}
	var sc struct {
		Status mcpgate.Status `json:"status"`
		Txn    string         `json:"txn"`
	}
	if raw, err := json.Marshal(res.StructuredContent); err == nil {
		_ = json.Unmarshal(raw, &sc)
	}
	text := ""
	if len(res.Content) > 0 {
		if t, ok := res.Content[0].(*mcp.TextContent); ok {
			text = t.Text
		}
	}
	replayed, _ := res.Meta[mcpgate.MetaReplayed].(bool)
	switch {
	case sc.Status == mcpgate.StatusInDoubt:
		return "in_doubt", text
	case sc.Status == mcpgate.StatusInFlight:
		return "in_flight", text
	case sc.Status != "" && sc.Status != mcpgate.StatusExecuted:
		return "error", string(sc.Status) + ": " + text
	case res.IsError || sc.Txn == "" && sc.Status == "":
		return "error", text
	case replayed:
		return "duplicate", ""
	}
	return "executed", ""
}

// mcpAgent is an episode's agent through the MCP gate: a go-sdk client
// whose session goes through the fault proxy. Each delivery is a new
// tools/call (a new JSON-RPC id) with the episode's key in
// _meta["dev.intentd/idempotencyKey"]; after a call that got no answer
// the agent reconnects, as a host does after a broken stream.
type mcpAgent struct {
	client   *mcp.Client
	endpoint string
	hc       *http.Client
	cs       *mcp.ClientSession
}

func (a *mcpAgent) call(ctx context.Context, label, delivery string, call ChargeRequest) (outcome, detail string) {
	if a.cs == nil {
		cs, err := a.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: a.endpoint, HTTPClient: a.hc,
			DisableStandaloneSSE: true}, nil)
		if err != nil {
			return "", "connect: " + err.Error()
		}
		a.cs = cs
	}
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpTool, Arguments: plainCharge{Amount: call.Amount},
		Meta: mcp.Meta{mcpgate.MetaIdempotencyKey: call.Key, MetaEpisode: label, MetaDelivery: delivery}})
	outcome, detail = mcpOutcome(res, err)
	if outcome == "" {
		a.close()
	}
	return outcome, detail
}

func (a *mcpAgent) close() {
	if a.cs != nil {
		_ = a.cs.Close()
		a.cs = nil
	}
}
