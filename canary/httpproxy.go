package canary

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/intentledger/intentd/client"
	idem "github.com/intentledger/intentd/frontend/idemproxy"
)

// Via says what guards the tool's effects.
type Via string

// The ways the tool can be guarded.
const (
	// ViaSDK: the tool service guards each charge itself, with client.Do.
	ViaSDK Via = "sdk"
	// ViaHTTPProxy: the tool is a plain HTTP API that knows nothing of the
	// ledger, and intent-proxy (idemproxy.Handler) stands in front of it; the
	// agent sends the episode's key as an Idempotency-Key header.
	ViaHTTPProxy Via = "http-proxy"
	// ViaMCP: the tool is a plain MCP server that knows nothing of the
	// ledger, and the MCP gate (mcpgate) stands in front of it; the agent
	// is an MCP client that sends the episode's key in
	// _meta["dev.intentd/idempotencyKey"].
	ViaMCP Via = "mcp"
)

// ParseVia reads a Via ("" is ViaSDK).
func ParseVia(s string) (Via, error) {
	switch v := Via(s); v {
	case "", ViaSDK:
		return ViaSDK, nil
	case ViaHTTPProxy, ViaMCP:
		return v, nil
	}
	return "", fmt.Errorf("canary: unknown --via %q (want sdk, http-proxy or mcp)", s)
}

// grantLease is the lease of a grant on a delivery the plan does not
// crash: long enough that a slow machine never turns a live holder's key
// in_doubt (safe, but the replay would differ).
const grantLease = 10 * time.Second

// PlainToolConfig configures a plain tool.
type PlainToolConfig struct {
	// Provider is the base URL of the downstream provider whose effect log
	// is the ground truth.
	Provider string
	// Die, if set, is called at a crash point and does not return (a tool
	// process kills itself there). Unset, the tool drops the connection
	// without an answer.
	Die func()
	// HTTP reaches the provider (default: a client with a 30 s timeout).
	HTTP *http.Client
}

// plainCharge is the body of a charge request to the plain tool: the
// charge's arguments only; the key travels as the Idempotency-Key header,
// which the plain tool ignores.
type plainCharge struct {
	Amount int `json:"amount"`
}

// plainAnswer is the plain tool's answer to a charge it made.
type plainAnswer struct {
	Txn string `json:"txn"`
}

// NewPlainTool returns the tool as a plain HTTP API that knows nothing of
// the ledger: POST /charge {"amount":N} performs the charge at the
// provider and answers 201 {"txn":...}, every time it is called. The
// crash points are those of the tool service (HeaderCrash).
func NewPlainTool(cfg PlainToolConfig) http.Handler {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	tc := ToolConfig{Provider: cfg.Provider, HTTP: cfg.HTTP}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charge", func(w http.ResponseWriter, req *http.Request) {
		var call plainCharge
		if err := decodeStrict(req.Body, &call); err != nil || call.Amount <= 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("bad charge request: %v", err)})
			return
		}
		crash := req.Header.Get(HeaderCrash)
		die := func(where string) {
			if crash != where {
				return
			}
			if cfg.Die != nil {
				cfg.Die()
			}
			panic(http.ErrAbortHandler) // in-process: the connection just dies
		}
		die("before")
		txn, err := tc.charge(req.Context(), req.Header.Get(HeaderEpisode), req.Header.Get(HeaderDelivery), call.Amount)
		if err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": "provider: " + err.Error()})
			return
		}
		die("after")
		writeJSON(w, http.StatusCreated, plainAnswer{Txn: txn})
	})
	return mux
}

// newProxyLane returns intent-proxy in front of the plain tool at
// upstream: one route, POST /charge, claimed under the canary's tool with
// the given lease; a request that finds its key in flight waits for the
// first one's answer (as client.Do does in the tool service). broken
// makes the route pass requests through without the ledger.
func newProxyLane(ledger *client.Client, upstream string, lease time.Duration, broken bool) (*idem.Handler, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("canary: proxy upstream: %w", err)
	}
	// The canary's agent is the route's one trusted caller: no per-caller
	// scope, so its episodes' ledger keys are computable (proxyLedgerKey).
	route := idem.Route{Name: "charge", Method: http.MethodPost, Path: "/charge", Tool: toolName,
		Lease: idem.Duration(lease), WaitInFlight: true, SingleCaller: true}
	if broken {
		route.Key = idem.KeyPass
	}
	if err := route.Normalize(); err != nil {
		return nil, fmt.Errorf("canary: proxy route: %w", err)
	}
	router, err := idem.NewRouter([]idem.Route{route})
	if err != nil {
		return nil, fmt.Errorf("canary: proxy route: %w", err)
	}
	h, err := idem.New(idem.Config{Upstream: u, Ledger: ledger, LedgerURL: ledger.Addrs()[0], Router: router,
		MaxWait: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("canary: proxy: %w", err)
	}
	return h, nil
}

// proxyLedgerKey is the ledger key intent-proxy claims for an episode's
// Idempotency-Key.
func proxyLedgerKey(key string) string { return idem.LedgerKey(toolName, "", key) }

// idempotencyKey is key as an RFC 8941 string, the Idempotency-Key
// header's value.
func idempotencyKey(key string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}

// outcomeNoAnswer is what answerOutcome makes of intent-proxy's
// upstream-no-answer: the tool was sent the request and never answered.
const outcomeNoAnswer = "no_answer"

// answerOutcome reads an answer that came back through the fault proxy's
// target: the tool service's ChargeResponse (ViaSDK), or, ViaHTTPProxy,
// the plain tool's answer as intent-proxy passed or replayed it, or one
// of intent-proxy's problems, or, ViaMCP, the MCP gate's JSON-RPC answer
// (mcpAnswerOutcome). It returns "" when the answer says nothing the
// agent can act on.
func answerOutcome(via Via, status int, header http.Header, body []byte) (outcome, detail string) {
	if via == ViaMCP {
		return mcpAnswerOutcome(status, header, body)
	}
	if via != ViaHTTPProxy {
		var cr ChargeResponse
		if json.Unmarshal(body, &cr) != nil {
			return "", ""
		}
		return cr.Outcome, cr.Detail
	}
	if header.Get("Content-Type") == "application/problem+json" {
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		if json.Unmarshal(body, &p) != nil {
			return "", ""
		}
		switch idem.Code(p.Code) {
		case idem.CodeInFlight:
			return "in_flight", p.Detail
		case idem.CodeInDoubt:
			return "in_doubt", p.Detail
		case idem.CodeFingerprintMismatch:
			return "divergent", p.Detail
		case idem.CodeUpstreamNoAnswer:
			return outcomeNoAnswer, p.Detail
		}
		return "error", p.Code + ": " + p.Detail
	}
	var a plainAnswer
	if status < 200 || status > 299 || json.Unmarshal(body, &a) != nil || a.Txn == "" {
		return "error", fmt.Sprintf("%d %s", status, body)
	}
	if header.Get(idem.HeaderReplayed) == "true" {
		return "duplicate", ""
	}
	return "executed", ""
}

// servePlainTool serves the plain tool on ln until ctx ends.
func servePlainTool(ctx context.Context, ln net.Listener, cfg PlainToolConfig) error {
	return serveUntil(ctx, ln, NewPlainTool(cfg))
}

// serveUntil serves h on ln until ctx ends.
func serveUntil(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("canary: serve: %w", err)
	}
	return nil
}

// deliverOnce makes req one delivery: net/http's Transport re-sends a
// request it deems idempotent (one with an Idempotency-Key header and a
// body it can get again) when a reused connection breaks after the
// request was written, and the fault proxy breaks connections on purpose.
// Through intent-proxy such a re-send is harmless (it is replayed), but it
// would be a delivery nobody planned and make runs differ.
func deliverOnce(req *http.Request) { req.GetBody = nil }
