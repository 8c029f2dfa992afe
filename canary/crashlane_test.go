package canary

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/frontend/mcpgate"
)

// gateAnswers is a stand-in for a crash lane's MCP gate that answers every
// tools/call with status without running the tool; if charge is set it
// first performs the effect at the provider (a gate whose answer lies).
type gateAnswers struct {
	status   mcpgate.Status
	provider string
	charge   bool
}

func (g gateAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	call := parseMCPCall(r.Method, body)
	if call == nil {
		http.Error(w, "not a charge", http.StatusBadRequest)
		return
	}
	if g.charge {
		tc := ToolConfig{Provider: g.provider, HTTP: http.DefaultClient}
		if _, err := tc.charge(r.Context(), call.label, call.delivery, 1); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "x"}},
		StructuredContent: map[string]any{"status": string(g.status), "key": "k"}}
	raw, _ := json.Marshal(res)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, call.msg["id"], raw)
}

// TestCrashIsInjectedOnAFreshLane: a crash lane that never got the call
// to the tool (its gate answered that the tool was not run: the ledger
// could not be reached, its answer was lost, the tool was not connected;
// or the lane could not be started) did not inject the crash, so the proxy
// sends the delivery to a fresh lane and records only the crash: the
// episode's canonical log does not depend on the load of the machine (a
// CI run recorded "error" for such a delivery in one run and "crashed" in
// its replay). Any other answer, and a "not run" answer after the provider
// saw the delivery's effect, is recorded as it is; and the proxy gives up
// after its wait.
func TestCrashIsInjectedOnAFreshLane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const seed = 5
	n, _ := firstEpisode(t, seed, Crash, func(p Plan) bool { return p.CrashAfterEffect })
	for _, tc := range []struct {
		name string
		// lanes are the crash lanes in the order they are started: a
		// handler, nil for the real tool that dies at the crash point, or
		// an error to fail the start with.
		lanes      []any
		wait       time.Duration
		want       string // the recorded outcome
		wantLanes  int    // 0: fewer than lanes (the proxy gave up first)
		effects    int
		injections int // "not injected" events; -1: any
	}{
		{"ledger unavailable", []any{gateAnswers{status: mcpgate.StatusLedgerUnavailable}, nil}, 0, "crashed", 2, 1, 1},
		{"outcome unknown, upstream unavailable", []any{gateAnswers{status: mcpgate.StatusOutcomeUnknown},
			gateAnswers{status: mcpgate.StatusUpstreamUnavailable}, nil}, 0, "crashed", 3, 1, 2},
		{"lane does not start", []any{fmt.Errorf("tool process did not start serving"), nil}, 0, "crashed", 2, 1, 1},
		{"other answer", []any{gateAnswers{status: mcpgate.StatusLedgerRefused}, nil}, 0, "error", 1, 0, 0},
		{"in flight", []any{gateAnswers{status: mcpgate.StatusInFlight}, nil}, 0, "in_flight", 1, 0, 0},
		{"not run, yet the tool ran", []any{gateAnswers{status: mcpgate.StatusLedgerUnavailable, charge: true}, nil}, 0, "error", 1, 1, 0},
		{"never injected", []any{gateAnswers{status: mcpgate.StatusLedgerUnavailable}, gateAnswers{status: mcpgate.StatusLedgerUnavailable},
			gateAnswers{status: mcpgate.StatusLedgerUnavailable}, gateAnswers{status: mcpgate.StatusLedgerUnavailable}, nil},
			150 * time.Millisecond, "error", 0, 0, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBook()
			prov := httptest.NewServer(newProvider(b))
			defer prov.Close()
			var mu sync.Mutex
			started := 0
			px := &proxy{book: b, hc: newHTTPClient(4), ctx: ctx, via: ViaMCP, injectWait: tc.wait}
			px.crashLane = func(context.Context) (string, func(bool) string, error) {
				mu.Lock()
				lane := tc.lanes[min(started, len(tc.lanes)-1)]
				started++
				mu.Unlock()
				switch lane := lane.(type) {
				case error:
					return "", nil, lane
				case gateAnswers:
					lane.provider = prov.URL
					url, stop, err := serveOne(lane)
					return url, func(bool) string { stop(); return "" }, err
				}
				var stop func()
				died := make(chan struct{})
				url, s, err := serveOne(mcpHandler(NewMCPTool(PlainToolConfig{Provider: prov.URL, Die: func() {
					close(died)
					stop()
				}})))
				stop = s
				return url, func(bool) string {
					stop()
					select {
					case <-died:
						return "the tool's server closed at the crash point"
					default:
						return ""
					}
				}, err
			}
			ps := httptest.NewServer(px)
			defer ps.Close()
			label := episodeLabel(seed, Crash, n)
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","arguments":{"amount":3},`+
				`"_meta":{%q:%q,%q:"a0",%q:"k"}}}`, MetaEpisode, label, MetaDelivery, mcpgate.MetaIdempotencyKey)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ps.URL+mcpPath, bytes.NewReader([]byte(body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("the agent got %s for a crash delivery", resp.Status)
			}
			rec := b.get(label)
			_, outcomes, effects := rec.snapshot()
			events := rec.eventList()
			injections := 0
			for _, e := range events {
				if strings.Contains(e, "not injected") {
					injections++
				}
			}
			lanesOK := started == tc.wantLanes || tc.wantLanes == 0 && started < len(tc.lanes)
			if !slices.Equal(outcomes, []string{tc.want}) || !lanesOK || len(effects) != tc.effects || injections != tc.injections && tc.injections >= 0 {
				t.Fatalf("outcomes %v, %d lanes, %d effects, %d re-injections; want [%s], %d, %d, %d\n  %s", outcomes, started,
					len(effects), injections, tc.want, tc.wantLanes, tc.effects, tc.injections, strings.Join(events, "\n  "))
			}
		})
	}
}
