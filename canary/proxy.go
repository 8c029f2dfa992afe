package canary

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	idem "github.com/intentledger/intentd/proxy"
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
	// returns its URL and a function that waits for it to die, stops it
	// and says how it died. Unset, crash deliveries go to tool (an
	// in-process crash point).
	crashLane func(ctx context.Context) (url string, reap func() string, err error)
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
	target, reap := p.tool, func() string { return "" }
	if crash != "" && p.crashLane == nil && p.crashTool != "" {
		target = p.crashTool
	}
	if crash != "" && p.crashLane != nil {
		url, r, err := p.crashLane(ctx)
		if err != nil {
			rec.add("%s: cannot start a tool process: %v", delivery, err)
			p.outcome(rec, "error")
			return 0, nil, nil
		}
		var once sync.Once
		var how string
		reap = func() string {
			once.Do(func() { how = r() })
			return how
		}
		defer reap() // a lane whose tool did not die is stopped all the same
		target = url
		rec.add("%s: proxy sends it to a fresh tool process", delivery)
	}
	path, body := "/charge", call.body
	if call.mcp != nil {
		path, body = mcpPath, call.mcp.rewrite(delivery, crash)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target+path, bytes.NewReader(body))
	if err != nil {
		p.outcome(rec, "error")
		return 0, nil, nil
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
	died := func() (int, http.Header, []byte) {
		if how := reap(); how != "" {
			rec.add("%s: %s", delivery, how)
		}
		rec.add("%s: the tool died %s the effect", delivery, crash)
		p.outcome(rec, "crashed")
		return 0, nil, nil
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		if crash != "" {
			return died()
		}
		rec.add("%s: tool unreachable: %v", delivery, err)
		p.outcome(rec, "error")
		return 0, nil, nil
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxToolBody))
	outcome, detail := answerOutcome(p.via, resp.StatusCode, resp.Header, answer)
	switch {
	case crash != "" && outcome == outcomeNoAnswer:
		// intent-proxy in front of a tool that died in-process: the
		// proxy saw the connection die and records nothing.
		rec.add("%s: intent-proxy answers %d: the tool gave no answer", delivery, resp.StatusCode)
		return died()
	case crash != "" && p.via == ViaMCP && outcome == "in_doubt":
		// The MCP gate in front of a tool that died in-process: it saw
		// its call die unanswered, recorded nothing and says in_doubt
		// (the delivery is the key's first, so nothing else can be).
		rec.add("%s: the MCP gate answers in_doubt: the tool gave no answer", delivery)
		return died()
	}
	if err != nil || outcome == "" || outcome == outcomeNoAnswer {
		outcome = "error"
	}
	if outcome == "error" {
		rec.add("%s: tool answers error: %s", delivery, detail)
	} else {
		rec.add("%s: tool answers %s", delivery, outcome)
	}
	p.outcome(rec, outcome)
	return resp.StatusCode, resp.Header, answer
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
