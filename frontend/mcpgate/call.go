package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Bounds of the calls' ledger work.
const (
	// maxLongPoll bounds one long-poll while waiting for a call in flight,
	// below the SDK's 30 s HTTP timeout; progressEvery is the long-poll
	// (and so the progress notification period) when the caller asked for
	// progress.
	maxLongPoll   = 20 * time.Second
	progressEvery = 5 * time.Second
	// shortLease is what a grant's lease is cut to when the upstream call
	// ended without an answer: the key turns in_doubt at once instead of
	// when the lease would have passed (the ledger's smallest lease).
	shortLease = 100 * time.Millisecond
)

// call is one gated tools/call, from claim to answer.
type call struct {
	g         *Gate
	p         *toolPlan
	req       *mcp.CallToolRequest
	callerCtx context.Context // ends when the caller cancels or leaves
	ctx       context.Context // detached: the call is seen through
	key       CallKey
	claim     client.ClaimRequest
	log       *slog.Logger
	result    Result // how the call was answered, for the metrics
}

// callTool answers a tools/call of the downstream tool name.
func (g *Gate) callTool(ctx context.Context, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	start := time.Now()
	p := g.planOf(name)
	if p == nil {
		g.cfg.Metrics.call("", ResultUnknownTool, time.Since(start))
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	ctx, span := g.startCall(ctx, p.name, req.Params.Meta)
	res, result, err := g.gatedCall(ctx, p, req)
	endCall(span, result, err)
	g.cfg.Metrics.call(p.name, result, time.Since(start))
	return res, err
}

// gatedCall answers a tools/call of a listed tool and says how.
func (g *Gate) gatedCall(ctx context.Context, p *toolPlan, req *mcp.CallToolRequest) (*mcp.CallToolResult, Result, error) {
	if p.mode == ModePass {
		res, err := g.passThrough(ctx, p, req)
		return res, ResultPassthrough, err
	}
	canonical, exact, err := CanonicalArguments(req.Params.Arguments)
	if err != nil {
		return nil, ResultBadRequest, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	key, ok, err := ResolveKey(KeyInput{
		Meta: req.Params.Meta, Scope: g.scopeOf(req), Upstream: p.up.spec.Name, Tool: p.tool.Name, LedgerTool: p.ledgerTool,
		Arguments: canonical, HostIDKeys: g.cfg.Keys.HostIDKeys, Derive: p.derive, Window: p.window, Now: g.cfg.Now(),
	})
	if err != nil {
		return nil, ResultBadRequest, badKeyError(err)
	}
	if !ok {
		res, err := g.passThrough(ctx, p, req) // derivation off and no key: a tool meant to repeat
		return res, ResultPassthrough, err
	}
	payload, err := BuildPayload(p.up.spec.Name, p.tool.Name, key, canonical, exact, g.cfg.MaxPayload)
	if err != nil {
		return ledgerRefusedAnswer(key.Ledger, err), ResultLedgerRefused, nil
	}
	c := &call{g: g, p: p, req: req, callerCtx: ctx, ctx: context.WithoutCancel(ctx), key: key,
		claim: client.ClaimRequest{Tool: p.ledgerTool, Payload: payload, Owner: g.cfg.NewOwner(), Policy: p.policy, Lease: p.lease}}
	c.log = g.cfg.Logger.With("tool", p.name, "key_source", key.Source, "owner", c.claim.Owner)
	g.calls.Add(1)
	defer g.calls.Done()
	res, err := c.run()
	return res, c.result, err
}

// scopeOf is the key scope of a call: the configured scope, the
// authenticated caller (CallerOf) when there is one, and a digest of the
// caller's scope headers and session when so configured.
func (g *Gate) scopeOf(req *mcp.CallToolRequest) []string {
	k := g.cfg.Keys
	scope := []string{k.Scope}
	if caller := CallerOf(req); caller != "" {
		scope = append(scope, CallerPrefix+caller)
	}
	if len(k.ScopeHeaders) == 0 && !k.SessionScope {
		return scope
	}
	var session string
	if k.SessionScope && req.Session != nil {
		session = req.Session.ID()
	}
	var hdr map[string][]string
	if req.Extra != nil {
		hdr = req.Extra.Header
	}
	return append(scope, ScopeDigest(hdr, k.ScopeHeaders, session))
}

// CallerPrefix starts the scope part of an authenticated caller's keys:
// mcp:<scope>:@<caller>:...
const CallerPrefix = "@"

// CallerOf is the authenticated caller of a call: the UserID the HTTP
// transport's bearer-token middleware (go-sdk auth.RequireBearerToken, as
// intent-mcp --caller-keys installs it) put in the request's token info;
// "" when the call came unauthenticated (stdio, where the one caller is
// the process that launched the gate). Its keys, and so its recorded
// results, are its own.
func CallerOf(req *mcp.CallToolRequest) string {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil {
		return ""
	}
	return req.Extra.TokenInfo.UserID
}

func (c *call) run() (*mcp.CallToolResult, error) {
	if c.key.Source == SourceDerived {
		c.slide()
	}
	c.claim.Key = c.key.Ledger
	c.log = c.log.With("key", c.key.Ledger)
	start := time.Now()
	resp, err := c.settle()
	if err != nil && errors.Is(err, client.ErrInFlight) {
		resp, err = c.waitInFlight(err)
	}
	c.g.cfg.Metrics.ledgerStep("claim", time.Since(start))
	if err != nil {
		c.log.Debug("claim not granted", "err", err)
		return c.refused(err, time.Since(start))
	}
	switch resp.Status {
	case client.StatusGranted:
		return c.execute(resp)
	case client.StatusDuplicate:
		c.log.Debug("replayed")
		c.result = ResultReplayed
		return c.replay(resp.Intent)
	case client.StatusPendingApproval:
		c.result = ResultPendingApproval
		in := resp.Intent
		required, approvals := 0, 0
		if in != nil {
			required, approvals = in.ApprovalsRequired, len(in.Approvals)
		}
		if hostElicitsURLs(c.req) && c.req.Params.RequestState != approvalState(c.key.Ledger) {
			return approvalElicitation(c.g.links, c.key.Ledger, required, approvals), nil
		}
		return pendingAnswer(c.g.links, c.key.Ledger, required, approvals), nil
	}
	c.result = ResultLedgerRefused
	return ledgerRefusedAnswer(c.key.Ledger, fmt.Errorf("the ledger answered the claim with status %q", resp.Status)), nil
}

// slide keeps a derived key on the window its call started in: when the
// same call derived a key in the window before and that intent is recent
// (created less than a window ago) or not settled (in flight, in doubt,
// waiting for approval), this call is a retry of it and claims that key.
// So a retry that crosses a window boundary is still a duplicate; an
// identical call more than a window after a settled one runs again.
func (c *call) slide() {
	ctx, cancel := context.WithTimeout(c.ctx, c.g.cfg.LedgerTimeout)
	defer cancel()
	in, err := c.g.cfg.Ledger.Get(ctx, c.key.Previous, client.GetOptions{})
	if err != nil || in == nil {
		return // not found (the usual case), or unreadable: this window's key
	}
	switch {
	case in.State == client.StateDeclared, in.State == client.StateInDoubt, in.State == client.StatePendingApproval,
		in.State == client.StateApproved, c.g.cfg.Now().Sub(in.CreatedAt) < c.p.window:
		c.key.Ledger, c.key.WindowStart = c.key.Previous, c.key.WindowStart.Add(-c.p.window)
	}
}

func (c *call) settle() (*client.ClaimResponse, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.g.cfg.LedgerTimeout)
	defer cancel()
	return c.g.cfg.Ledger.Settle(ctx, c.claim)
}

// waitInFlight long-polls the intent while another call holds it and
// claims again after each change, until the answer is something else, the
// gate's MaxWait passes or the caller leaves. A caller that sent a
// progress token gets a progress notification every few seconds.
func (c *call) waitInFlight(err error) (*client.ClaimResponse, error) {
	ctx, cancel := context.WithTimeout(c.callerCtx, c.g.cfg.MaxWait)
	defer cancel()
	poll := maxLongPoll
	token := c.req.Params.GetProgressToken()
	var each func(int, *client.Intent)
	if token != nil && c.req.Session != nil {
		poll = progressEvery
		started := time.Now()
		each = func(n int, holder *client.Intent) {
			owner := ""
			if holder != nil {
				owner = holder.Owner
			}
			_ = c.req.Session.NotifyProgress(c.ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n + 1),
				Message: fmt.Sprintf("waiting for the first call with this key (owner %s) to finish: %s", owner, time.Since(started).Round(time.Second))})
		}
	}
	return c.g.cfg.Ledger.SettleAfterHolder(ctx, c.claim, err, poll, each)
}

// refused answers a claim that was not granted.
func (c *call) refused(err error, waited time.Duration) (*mcp.CallToolResult, error) {
	key := c.key.Ledger
	if u := (*client.UnsettledError)(nil); errors.As(err, &u) {
		if u.MaybeGranted {
			// Granted after all? Nothing ran under it: report it failed in
			// the background, so the next call with the key runs.
			c.g.bg.Release(c.g.cfg.Ledger, c.claim, c.g.cfg.ReportTimeout, func(err error) {
				c.g.cfg.Logger.Warn("releasing an unused grant failed; it turns in_doubt when its lease passes", "key", c.claim.Key, "err", err)
			})
			c.result = ResultOutcomeUnknown
			return outcomeUnknownAnswer(key, u.Last), nil
		}
		c.result = ResultLedgerUnavailable
		return ledgerUnavailableAnswer(key, u.Last), nil
	}
	var p *client.Problem
	errors.As(err, &p)
	switch {
	case errors.Is(err, client.ErrInFlight):
		c.result = ResultInFlight
		return inFlightAnswer(key, waited), nil
	case errors.Is(err, client.ErrInDoubt):
		c.result = ResultInDoubt
		return inDoubtAnswer(c.g.links, key, "An earlier call with this key started and its result was never recorded "+
			"(the tool's server, the gate or a connection failed mid-call)."), nil
	case errors.Is(err, client.ErrDivergent):
		var recorded, request string
		if p != nil {
			recorded, request = p.Fingerprint, p.RequestFingerprint
		}
		c.result = ResultDivergent
		return nil, conflictError(key, recorded, request)
	case errors.Is(err, client.ErrRejected):
		c.result = ResultRejected
		return rejectedAnswer(key), nil
	case errors.Is(err, client.ErrBlocked):
		c.result = ResultBlocked
		return blockedAnswer(key, err), nil
	}
	c.result = ResultLedgerRefused
	if p != nil && p.Code == codeKeyReserved {
		c.log.Error("the ledger refuses the gate's claims: its API key does not hold the key prefix "+LedgerKeyPrefix+
			" that another key reserves; give it \"key_prefixes\": [\""+LedgerKeyPrefix+"\"] in the ledger's keys file", "err", err)
		return keyReservedAnswer(key, err), nil
	}
	return ledgerRefusedAnswer(key, err), nil
}

// codeKeyReserved is the ledger's 403 problem code for a claim of a key
// under a prefix another API key of the namespace reserves.
const codeKeyReserved = "key_reserved"

// replay answers with the recorded result of an executed intent.
func (c *call) replay(in *client.Intent) (*mcp.CallToolResult, error) {
	var result json.RawMessage
	if in != nil {
		result = in.Result
	}
	rec, err := DecodeRecord(result)
	if err != nil {
		return resolvedAnswer(c.key.Ledger, result), nil
	}
	res, err := rec.Replay(c.key.Ledger)
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return nil, werr
	}
	if err != nil {
		return resolvedAnswer(c.key.Ledger, result), nil
	}
	return res, nil
}

// codeRejectedByTransport is the go-sdk's "rejected by transport" error
// code (its jsonrpc2.ErrRejected, not exported): its streamable-HTTP
// client wraps every POST that got no JSON-RPC answer in it.
const codeRejectedByTransport = -32005

// rejectedByTransport reports whether err is the go-sdk's own "rejected by
// transport" error rather than an answer of the upstream: the request may
// or may not have reached it.
func rejectedByTransport(err error) bool {
	return errors.Is(err, &jsonrpc.Error{Code: codeRejectedByTransport}) // jsonrpc.Error.Is compares codes
}

// notSent reports whether err says the request never left: the go-sdk's
// transport error wrapping a failed dial (connection refused, no route, a
// name that does not resolve). Any other failure may come after the
// request was written.
func notSent(err error) bool {
	if !rejectedByTransport(err) {
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	return (errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns)
}

// neverRan reports whether a JSON-RPC error code says the server refused
// the call before running it: bad JSON or request, no such method, invalid
// params (an unknown tool too), a header mismatch, a missing capability,
// an unsupported version, a URL elicitation required first.
func neverRan(code int64) bool {
	switch code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams,
		mcp.CodeHeaderMismatch, mcp.CodeMissingRequiredClientCapabilities, mcp.CodeUnsupportedProtocolVersion,
		mcp.CodeURLElicitationRequired:
		return true
	}
	return false
}

// execute runs a granted call on the upstream, holding the grant while it
// runs (client.Hold), and records the result. A refused renewal (the lease
// passed: the key is in doubt, or was resolved and granted again) ends
// the right to run: the upstream call is cut, as client.Do cancels its
// function.
func (c *call) execute(grant *client.ClaimResponse) (*mcp.CallToolResult, error) {
	cfg := &c.g.cfg
	token := grant.FencingToken
	c.log = c.log.With("fencing_token", token)
	held := client.Hold(c.ctx, cfg.Ledger, c.claim, grant, client.HoldOptions{
		ReportTimeout: cfg.ReportTimeout,
		OnLost: func(err error) {
			c.log.Warn("lease renewal refused while the upstream works: the right to run is gone, the call is cut", "err", err)
			cfg.Metrics.lostLease()
		}})
	defer held.Stop()
	cs := c.p.up.session()
	if cs == nil {
		held.Stop()
		c.result = ResultUpstreamUnavailable
		c.report(held, client.OutcomeFailed, json.RawMessage(`{"error":"the upstream was not connected; nothing was sent"}`))
		return upstreamUnavailableAnswer(c.key.Ledger, c.p.up.spec.Name), nil
	}
	uctx, cancel := context.WithTimeout(held.Context(), c.p.timeout)
	defer cancel()

	params := &mcp.CallToolParams{Name: c.p.tool.Name, Arguments: argumentsOf(c.req.Params.Arguments),
		Meta: withMeta(traceMeta(c.ctx, forwardMeta(c.req.Params.Meta)), MetaIdempotencyKey, c.key.Ledger, MetaFencingToken, token,
			MetaExecutionToken, grant.ExecutionToken)}
	if pt := c.req.Params.GetProgressToken(); pt != nil && c.req.Session != nil {
		up, forget := c.g.progress.register(c.ctx, c.req.Session, pt)
		defer forget()
		params.SetProgressToken(up)
	}
	started := time.Now()
	res, err := cs.CallTool(uctx, params)
	cfg.Metrics.upstreamCall(c.p.up.spec.Name, time.Since(started))
	held.Stop()
	c.log.Debug("upstream answered", "elapsed", time.Since(started), "err", err)
	var werr *jsonrpc.Error
	switch {
	case notSent(err):
		// The connection to an HTTP upstream could not be made: nothing
		// reached it, so the attempt failed and a retry may run it.
		c.log.Warn("the upstream could not be reached; nothing was sent", "err", err)
		c.result = ResultUpstreamUnavailable
		c.report(held, client.OutcomeFailed, EncodeErrorRecord(&jsonrpc.Error{Code: codeRejectedByTransport,
			Message: "the upstream could not be reached; nothing was sent: " + err.Error()}))
		return upstreamUnavailableAnswer(c.key.Ledger, c.p.up.spec.Name), nil
	case rejectedByTransport(err):
		// The go-sdk's HTTP client says "rejected by transport" for a POST
		// that died without an answer (reset, EOF, a 5xx or 429 with no
		// JSON-RPC body): the upstream may have acted. Not its answer.
		c.log.Warn("the upstream's connection failed mid-call; the key is in doubt until someone resolves it", "err", err)
		c.result = ResultUpstreamNoAnswer
		c.expedite(token)
		return inDoubtAnswer(c.g.links, c.key.Ledger, "The server behind this tool did not answer ("+err.Error()+")."), nil
	case errors.As(err, &werr):
		if neverRan(werr.Code) {
			c.result = ResultFailed
			c.report(held, client.OutcomeFailed, EncodeErrorRecord(werr))
		} else {
			c.result = ResultExecuted
			if !c.record(held, EncodeErrorRecord(werr), false) {
				c.result = ResultUnrecorded
			}
		}
		return nil, werr
	case err != nil:
		// Sent, and no answer: whether the upstream acted is unknown.
		// Nothing is recorded; the lease is cut so the key is in doubt now.
		c.log.Warn("the upstream did not answer; the key is in doubt until someone resolves it", "err", err)
		c.result = ResultUpstreamNoAnswer
		c.expedite(token)
		return inDoubtAnswer(c.g.links, c.key.Ledger, "The server behind this tool did not answer ("+err.Error()+")."), nil
	case res.NeedsInput():
		c.result = ResultNeedsInput
		c.report(held, client.OutcomeFailed, json.RawMessage(`{"error":"the tool asked for input, which the gate does not relay"}`))
		return needsInputAnswer(c.key.Ledger), nil
	}
	clean := CleanResult(res)
	rec, err := EncodeRecord(clean, cfg.MaxResult)
	if err != nil {
		c.log.Error("the result cannot be recorded", "err", err)
	}
	recorded := c.record(held, rec, clean.IsError)
	c.result = ResultExecuted
	if !recorded {
		c.result = ResultUnrecorded
	}
	out := *clean
	out.Meta = withMeta(forwardMeta(clean.Meta), MetaKey, c.key.Ledger, MetaKeySource, string(c.key.Source))
	if !recorded {
		out.Meta[MetaRecorded] = false
	}
	return &out, nil
}

// argumentsOf is the arguments to send upstream: as the caller sent them,
// or the empty object.
func argumentsOf(raw json.RawMessage) any {
	if len(raw) == 0 {
		return map[string]any{}
	}
	return raw
}

// record reports an answer executed and commits it in the background. A
// result the ledger refuses as too large is recorded as omitted, then
// without a result (Held.Record), rather than left to turn in_doubt. It
// reports whether the ledger recorded it.
func (c *call) record(held *client.Held, result json.RawMessage, isError bool) bool {
	cfg := &c.g.cfg
	defer func(start time.Time) { cfg.Metrics.ledgerStep("record", time.Since(start)) }(time.Now())
	_, err := held.Record(c.ctx, client.OutcomeExecuted, result, func() json.RawMessage { return omittedRecord(isError, result) })
	if err != nil {
		c.log.Error("the upstream answered but recording its result failed; the caller gets the result, "+
			"the key turns in_doubt when its lease passes (unless a late report lands)", "err", err)
		return false
	}
	if cfg.Commit {
		held.CommitLater(&c.g.bg, func(err error) { c.log.Debug("commit (best effort) failed", "err", err) })
	}
	return true
}

// report records a failed attempt (Held.Record).
func (c *call) report(held *client.Held, outcome client.Outcome, result json.RawMessage) {
	if _, err := held.Record(c.ctx, outcome, result, nil); err != nil {
		c.log.Error("reporting the outcome failed; the key turns in_doubt when its lease passes", "outcome", outcome, "err", err)
	}
}

// expedite cuts the lease of a grant whose call ended without an answer,
// so the key shows in_doubt at once (best effort: otherwise it does when
// the lease passes).
func (c *call) expedite(token uint64) {
	ctx, cancel := context.WithTimeout(c.ctx, c.g.cfg.LedgerTimeout)
	defer cancel()
	if _, err := c.g.cfg.Ledger.Renew(ctx, client.RenewRequest{Key: c.key.Ledger, Owner: c.claim.Owner, FencingToken: token,
		Lease: shortLease}); err != nil {
		c.log.Debug("cutting the lease failed; the key turns in_doubt when its lease passes", "err", err)
	}
}

// passThrough sends a call to the upstream without the ledger: read-only
// tools, tools configured to pass, and calls of tools that opted out of
// derived keys that carry no key.
func (g *Gate) passThrough(ctx context.Context, p *toolPlan, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	cs := p.up.session()
	if cs == nil {
		return upstreamUnavailableAnswer("", p.up.spec.Name), nil
	}
	params := &mcp.CallToolParams{Name: p.tool.Name, Arguments: argumentsOf(req.Params.Arguments), Meta: traceMeta(ctx, forwardMeta(req.Params.Meta))}
	if pt := req.Params.GetProgressToken(); pt != nil && req.Session != nil {
		up, forget := g.progress.register(ctx, req.Session, pt)
		defer forget()
		params.SetProgressToken(up)
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	res, err := cs.CallTool(cctx, params)
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, &werr) && !rejectedByTransport(err): // the upstream's own error, not a failed POST
		return nil, werr
	case err != nil:
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
			Text: "The server behind this tool failed the call: " + err.Error()}}}, nil
	}
	return CleanResult(res), nil
}
