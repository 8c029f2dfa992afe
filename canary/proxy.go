package canary

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	idem "github.com/intentledger/intentd/frontend/idemproxy"
	"github.com/intentledger/intentd/frontend/mcpgate"
)

// proxy is the fault-injecting proxy between the agent and the tool
// service. It reads the episode and delivery from the request's headers
// (through the MCP gate: from the tools/call's _meta; other MCP traffic
// passes untouched), draws the episode's Plan from (seed, class, episode)
// and applies it to that delivery:
//
//   - lost ACK: forward, let the tool answer, then drop the agent's
//     connection without a response;
//   - duplicate: forward the first delivery 1 + Dups times concurrently
//     and relay the original's answer;
//   - reorder: answer the agent 504 at once (its timeout) and forward the
//     held delivery after the seeded delay, so the retry arrives first;
//   - crash: forward with HeaderCrash (MetaCrash) set so the tool dies
//     before or after the effect, then drop the agent's connection (a
//     reset).
//
// Everything it does and every answer the tool gives is written to the
// episode's record in the book.
type proxy struct {
	book *book
	// tool is the tool service's base URL.
	tool string
	// crashLane, if set, starts a fresh tool process (or, through the MCP
	// gate in-process, a fresh gate and tool) for one crash delivery and
	// returns its URL and a function that stops it and says how its tool
	// died ("" if it did not); dying says the call got no answer, so a
	// process is waited for (bounded) to end by itself. Unset, crash
	// deliveries go to tool (an in-process crash point).
	crashLane func(ctx context.Context) (url string, reap func(dying bool) string, err error)
	// injectWait bounds how long a crash delivery is tried on fresh lanes
	// until its crash is injected (default crashInjectWait).
	injectWait time.Duration
	// crashTool, if set (and crashLane is not), is where crash deliveries
	// go instead of tool: the crash lane's intent-proxy, with a short lease.
	crashTool string
	// via says what the tool's answers look like (answerOutcome).
	via Via
	hc  *http.Client
	// ctx bounds the deliveries the proxy makes on its own (held and
	// duplicated copies) after the agent's request has ended.
	ctx context.Context
	// wg counts those deliveries, so Close can wait for them.
	wg sync.WaitGroup
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxToolBody))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	label, delivery := req.Header.Get(HeaderEpisode), req.Header.Get(HeaderDelivery)
	call := agentCall{body: body, header: http.Header{}}
	if v := req.Header.Values(idem.HeaderIdempotencyKey); len(v) > 0 {
		call.header[idem.HeaderIdempotencyKey] = append([]string(nil), v...) // goes along with every copy
	}
	if p.via == ViaMCP {
		if call.mcp = parseMCPCall(req.Method, body); call.mcp == nil {
			p.pass(w, req, body) // discovery, initialization: not a charge
			return
		}
		label, delivery = call.mcp.label, call.mcp.delivery
		call.header = forwardHeader(req.Header) // the MCP headers go along with every copy
	}
	seed, class, n, err := parseLabel(label)
	attempt, aerr := strconv.Atoi(strings.TrimPrefix(delivery, "a"))
	if err != nil || aerr != nil || !strings.HasPrefix(delivery, "a") {
		http.Error(w, fmt.Sprintf("canary proxy: bad %s %q or %s %q", HeaderEpisode, label, HeaderDelivery, delivery), http.StatusBadRequest)
		return
	}
	plan := NewPlan(seed, class, n)
	rec := p.book.get(label)
	rec.mu.Lock()
	rec.deliveries++
	rec.mu.Unlock()
	plannedLine := func(s string) {
		rec.mu.Lock()
		rec.planned = append(rec.planned, s)
		rec.mu.Unlock()
	}

	switch {
	case class == Duplicate && attempt == 0:
		plannedLine(fmt.Sprintf("%s deliver +%d concurrent copies", delivery, plan.Dups))
		for d := 1; d <= plan.Dups; d++ {
			dup := fmt.Sprintf("%s.dup%d", delivery, d)
			rec.mu.Lock()
			rec.deliveries++
			rec.mu.Unlock()
			rec.add("%s: proxy delivers a copy", dup)
			p.background(rec, func() { p.forward(p.ctx, rec, label, dup, "", call) })
		}
		status, header, answer := p.forward(req.Context(), rec, label, delivery, "", call)
		p.relay(w, status, header, answer)
	case class == Reorder && attempt == 0:
		plannedLine(fmt.Sprintf("%s held %v, agent times out", delivery, plan.Delay))
		rec.add("%s: proxy holds it for %v; the agent times out", delivery, plan.Delay)
		p.background(rec, func() {
			t := time.NewTimer(plan.Delay)
			defer t.Stop()
			select {
			case <-t.C: // the seeded delay is the fault itself
			case <-p.ctx.Done():
				return
			}
			p.forward(p.ctx, rec, label, delivery, "", call)
		})
		http.Error(w, "canary proxy: upstream timed out", http.StatusGatewayTimeout)
	case class == Crash && attempt == 0:
		where := "before"
		if plan.CrashAfterEffect {
			where = "after"
		}
		plannedLine(fmt.Sprintf("%s tool crashes after_effect=%t", delivery, plan.CrashAfterEffect))
		rec.mu.Lock()
		rec.crashes++
		rec.mu.Unlock()
		p.forward(req.Context(), rec, label, delivery, where, call)
		rec.add("%s: connection reset; the agent gets no answer", delivery)
		panic(http.ErrAbortHandler)
	default:
		status, header, answer := p.forward(req.Context(), rec, label, delivery, "", call)
		if attempt < plan.LostAcks {
			plannedLine(fmt.Sprintf("%s deliver, ack lost", delivery))
			rec.mu.Lock()
			rec.acksLost++
			rec.mu.Unlock()
			rec.add("%s: proxy drops the answer", delivery)
			panic(http.ErrAbortHandler)
		}
		plannedLine(fmt.Sprintf("%s deliver", delivery))
		p.relay(w, status, header, answer)
	}
}

// background runs a delivery the agent does not wait for.
func (p *proxy) background(rec *episodeRecord, f func()) {
	rec.bg.Add(1)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer rec.bg.Done()
		f()
	}()
}

// agentCall is the agent's call as the fault proxy delivers it: the body,
// the headers that go along with every copy (the Idempotency-Key; through
// the MCP gate the agent's MCP headers) and, through the MCP gate, the
// tools/call read from the body.
type agentCall struct {
	body   []byte
	header http.Header
	mcp    *mcpCall
}

// forward sends one delivery to the tool (or, for a crash with a crash
// lane, to a fresh tool lane or process, or to the crash lane's
// intent-proxy), records the tool's outcome and returns its status,
// headers and body; status 0 means the tool gave no answer. Over HTTP the
// episode, delivery and crash point travel as headers; through the MCP
// gate in the tools/call's _meta.
func (p *proxy) forward(ctx context.Context, rec *episodeRecord, label, delivery, crash string, call agentCall) (int, http.Header, []byte) {
	if crash != "" && p.crashLane != nil {
		return p.forwardCrash(ctx, rec, label, delivery, crash, call)
	}
	target := p.tool
	if crash != "" && p.crashTool != "" {
		target = p.crashTool
	}
	d := p.send(ctx, rec, target, label, delivery, crash, call, nil)
	p.outcome(rec, d.outcome)
	return d.status, d.header, d.answer
}

// crashInjectWait bounds how long the proxy keeps trying to inject one
// planned crash into a fresh lane (forwardCrash).
const crashInjectWait = 60 * time.Second

// forwardCrash sends a crash delivery to a fresh lane (crashLane) and
// records its outcome. The plan says the tool dies at the crash point; a
// lane that never got the call that far did not inject the fault: its
// tool process could not be started, or its gate (intent-proxy) answered
// that the tool was not run and a retry is safe (the ledger could not be
// reached, its answer to the claim was lost, the tool's server was not
// connected: notRunAnswer). Recording that answer would make the episode
// depend on the machine's load (the retry that follows runs the effect
// for the first time instead of finding the key in doubt), so the proxy
// stops that lane and sends the same delivery to a fresh one, until the
// crash is injected or crashInjectWait passes; the attempts show in the
// episode's events, not in its canonical log. Any other answer is
// recorded as it is, and so is a "not run" answer when the provider saw
// an effect of the delivery after all: that is the gate's to answer for.
func (p *proxy) forwardCrash(ctx context.Context, rec *episodeRecord, label, delivery, crash string, call agentCall) (int, http.Header, []byte) {
	wait := p.injectWait
	if wait <= 0 {
		wait = crashInjectWait
	}
	deadline := time.Now().Add(wait)
	for attempt := 0; ; attempt++ {
		again := time.Now().Before(deadline)
		d, retry := p.crashOnce(ctx, rec, label, delivery, crash, call, again)
		if !retry {
			p.outcome(rec, d.outcome)
			return d.status, d.header, d.answer
		}
		t := time.NewTimer(min(100*time.Millisecond<<attempt, 2*time.Second))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			rec.add("%s: the crash was never injected: %v", delivery, ctx.Err())
			p.outcome(rec, "error")
			return 0, nil, nil
		}
	}
}

// crashOnce sends a crash delivery to one fresh lane, stops the lane and
// says whether the crash was not injected and may be tried again (only
// when again is set).
func (p *proxy) crashOnce(ctx context.Context, rec *episodeRecord, label, delivery, crash string, call agentCall, again bool) (d delivered, retry bool) {
	url, r, err := p.crashLane(ctx)
	if err != nil {
		if again && ctx.Err() == nil {
			rec.add("%s: cannot start a tool process (%v); the crash is not injected, the proxy tries a fresh one", delivery, err)
			return delivered{}, true
		}
		rec.add("%s: cannot start a tool process: %v", delivery, err)
		return delivered{outcome: "error"}, false
	}
	var once sync.Once
	var how string
	reap := func(dying bool) string {
		once.Do(func() { how = r(dying) })
		return how
	}
	defer reap(false) // a lane whose tool did not die is stopped all the same
	rec.add("%s: proxy sends it to a fresh tool process", delivery)
	d = p.send(ctx, rec, url, label, delivery, crash, call, reap)
	if d.notRun == "" || !again || ctx.Err() != nil || rec.hasEffect(delivery) {
		return d, false
	}
	reap(false) // the lane's gate finishes its background work (a release) before the next lane claims
	rec.add("%s: the crash is not injected: the tool was not reached (%s); the proxy sends it to a fresh tool process again", delivery, d.notRun)
	return d, true
}

// delivered is what one delivery got from the tool: its status, headers
// and body (status 0: no answer), the outcome to record and, for an
// answer that says the tool was not run and a retry is safe, its status
// or code (notRunAnswer).
type delivered struct {
	status  int
	header  http.Header
	answer  []byte
	outcome string
	notRun  string
}

// send makes one delivery to target and reads the tool's outcome. reap,
// for a delivery to a crash lane, stops the lane: dying says its tool is
// expected to be dying (the call got no answer), so a process lane waits
// (bounded) for it to end.
func (p *proxy) send(ctx context.Context, rec *episodeRecord, target, label, delivery, crash string, call agentCall,
	reap func(dying bool) string) delivered {
	path, body := "/charge", call.body
	if call.mcp != nil {
		path, body = mcpPath, call.mcp.rewrite(delivery, crash)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target+path, bytes.NewReader(body))
	if err != nil {
		return delivered{outcome: "error"}
	}
	for k, v := range call.header {
		req.Header[k] = append([]string(nil), v...)
	}
	req.Header.Set("Content-Type", "application/json")
	if call.mcp == nil {
		req.Header.Set(HeaderEpisode, label)
		req.Header.Set(HeaderDelivery, delivery)
		if crash != "" {
			req.Header.Set(HeaderCrash, crash)
		}
	}
	deliverOnce(req)
	died := func(dying bool) delivered {
		if reap != nil {
			if how := reap(dying); how != "" {
				rec.add("%s: %s", delivery, how)
			}
		}
		rec.add("%s: the tool died %s the effect", delivery, crash)
		return delivered{outcome: "crashed"}
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		if crash != "" {
			return died(true)
		}
		rec.add("%s: tool unreachable: %v", delivery, err)
		return delivered{outcome: "error"}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxToolBody))
	outcome, detail := answerOutcome(p.via, resp.StatusCode, resp.Header, answer)
	switch {
	case crash != "" && outcome == outcomeNoAnswer:
		// intent-proxy in front of a tool that died in-process: the
		// proxy saw the connection die and records nothing.
		rec.add("%s: intent-proxy answers %d: the tool gave no answer", delivery, resp.StatusCode)
		return died(false)
	case crash != "" && p.via == ViaMCP && outcome == "in_doubt":
		// The MCP gate in front of a tool that died in-process: it saw
		// its call die unanswered, recorded nothing and says in_doubt
		// (the delivery is the key's first, so nothing else can be).
		rec.add("%s: the MCP gate answers in_doubt: the tool gave no answer", delivery)
		return died(false)
	}
	if err != nil || outcome == "" || outcome == outcomeNoAnswer {
		outcome = "error"
	}
	if outcome == "error" {
		rec.add("%s: tool answers error: %s", delivery, detail)
	} else {
		rec.add("%s: tool answers %s", delivery, outcome)
	}
	d := delivered{status: resp.StatusCode, header: resp.Header, answer: answer, outcome: outcome}
	if err == nil && outcome == "error" {
		d.notRun = notRunAnswer(p.via, resp.Header, answer)
	}
	return d
}

// notRunAnswer is the status (MCP gate) or problem code (intent-proxy)
// of an answer that says the tool was not run and retrying the call is
// safe: the ledger could not be reached, its answer to the claim was lost
// (the gate released the claim), or the tool's server was not connected
// or could not be reached. "" for any other answer.
func notRunAnswer(via Via, header http.Header, body []byte) string {
	switch via {
	case ViaMCP:
		switch st := mcpAnswerStatus(header, body); st {
		case mcpgate.StatusLedgerUnavailable, mcpgate.StatusOutcomeUnknown, mcpgate.StatusUpstreamUnavailable:
			return string(st)
		}
	case ViaHTTPProxy:
		if header.Get("Content-Type") != "application/problem+json" {
			return ""
		}
		var p struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(body, &p) != nil {
			return ""
		}
		switch c := idem.Code(p.Code); c {
		case idem.CodeLedgerUnavailable, idem.CodeOutcomeUnknown, idem.CodeUpstreamUnreachable:
			return string(c)
		}
	}
	return ""
}

// pass relays MCP traffic that is not a charge (discovery,
// initialization, notifications) to the tool's gate without faults.
func (p *proxy) pass(w http.ResponseWriter, req *http.Request, body []byte) {
	out, err := http.NewRequestWithContext(req.Context(), req.Method, p.tool+req.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "canary proxy: "+err.Error(), http.StatusBadRequest)
		return
	}
	out.Header = forwardHeader(req.Header)
	deliverOnce(out)
	resp, err := p.hc.Do(out)
	if err != nil {
		http.Error(w, "canary proxy: the gate gave no answer", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxToolBody))
	if err != nil {
		http.Error(w, "canary proxy: the gate's answer broke off", http.StatusBadGateway)
		return
	}
	for k, v := range forwardHeader(resp.Header) {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// forwardHeader is h without the headers of one hop (connection
// management, length).
func forwardHeader(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Accept-Encoding"} {
		out.Del(k)
	}
	return out
}

func (p *proxy) outcome(rec *episodeRecord, o string) {
	rec.mu.Lock()
	rec.outcomes = append(rec.outcomes, o)
	rec.mu.Unlock()
}

// relay passes the tool's answer to the agent (with the headers that
// tell its kind: Content-Type and intent-proxy's Idempotency-Replayed);
// no answer becomes a 502.
func (p *proxy) relay(w http.ResponseWriter, status int, header http.Header, answer []byte) {
	if status == 0 {
		http.Error(w, "canary proxy: the tool gave no answer", http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if ct := header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	if r := header.Get(idem.HeaderReplayed); r != "" {
		w.Header().Set(idem.HeaderReplayed, r)
	}
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}
