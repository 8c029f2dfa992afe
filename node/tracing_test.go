package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/internal/tracing/otlptest"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// claimTraced posts a claim to addr with the agent's traceparent and
// returns the status code.
func claimTraced(t *testing.T, addr, traceparent string, body map[string]any) int {
	t.Helper()
	code, _ := postTraced(t, addr, "/v1/intents", traceparent, body)
	return code
}

// postTraced posts body to addr's path with the agent's traceparent and
// returns the status code and the decoded answer.
func postTraced(t *testing.T, addr, path, traceparent string, body map[string]any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	return resp.StatusCode, answer
}

// spanAttr is the string value of the span's attribute key ("" if unset).
func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// TestClaimTraceSpansFollowerForwardAndCommit: with a tracer, a claim is
// one trace under the agent's traceparent, across nodes: the server span
// of the node that received it (with the outcome, policy, namespace,
// tool and key hash), the follower's forward of the command to the
// leader, and the leader's Raft commit as the forward's child; the same
// for the grant's completion. A claim the leader receives commits under
// its own server span.
func TestClaimTraceSpansFollowerForwardAndCommit(t *testing.T) {
	tn := newTestNodes(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	tn.startThree(func(c *Config) { c.TracerProvider = tp })
	tn.waitReady()
	leader := tn.leader()
	var follower *Node
	for _, m := range tn.mains {
		if m != leader {
			follower = m
			break
		}
	}
	if a := putUntilDefinite(t, []string{leader.HTTPAddr()}, "/v1/policies/charges", map[string]any{
		"tools": []string{"pay.*"}, "require_approval": true}); a.Code != http.StatusOK {
		t.Fatalf("put policy: %v", a)
	}

	// The cluster's first grant also adds its token signing key (one more
	// command): made here, untraced, so each case's trace is its claim's.
	if a := postUntilDefinite(t, []string{leader.HTTPAddr()}, "/v1/intents", map[string]any{
		"key": "warm-up", "tool": "test.tool", "owner": "o", "payload": map[string]any{}}); a.Code != http.StatusCreated {
		t.Fatalf("warm-up claim: %v", a)
	}

	cases := []struct {
		name, key, tool string
		complete        bool // complete the key (granted by an earlier case) instead of claiming it
		via             *Node
		wantCode        int
		outcome, policy string
		// chain is the span names from the server span down, each the
		// parent of the next; nodes the node each ran on.
		chain, nodes []string
	}{
		{"granted through a follower", "trace-granted", "test.tool", false, follower, http.StatusCreated, "granted", "default",
			[]string{"intentd.claim", cluster.SpanForward, cluster.SpanCommit},
			[]string{follower.cfg.ID, follower.cfg.ID, leader.cfg.ID}},
		{"held for approval through a follower", "trace-held", "pay.charge", false, follower, http.StatusAccepted, "pending_approval", "charges",
			[]string{"intentd.claim", cluster.SpanForward, cluster.SpanCommit},
			[]string{follower.cfg.ID, follower.cfg.ID, leader.cfg.ID}},
		{"completed through a follower", "trace-granted", "test.tool", true, follower, http.StatusOK, "ok", "default",
			[]string{"intentd.complete", cluster.SpanForward, cluster.SpanCommit},
			[]string{follower.cfg.ID, follower.cfg.ID, leader.cfg.ID}},
		{"granted by the leader", "trace-leader", "test.tool", false, leader, http.StatusCreated, "granted", "default",
			[]string{"intentd.claim", cluster.SpanCommit},
			[]string{leader.cfg.ID, leader.cfg.ID}},
	}
	var fencing any // the fencing token of trace-granted's grant
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			traceID := trace.TraceID{0xa6, byte(i + 1), 0xce}
			agentSpan := trace.SpanID{0xa9, byte(i + 1)}
			tp := fmt.Sprintf("00-%s-%s-01", traceID, agentSpan)
			path, body := "/v1/intents", map[string]any{"key": tc.key, "tool": tc.tool, "owner": "agent", "payload": map[string]any{"n": 1}}
			if tc.complete {
				path, body = "/v1/intents/"+tc.key+"/complete", map[string]any{
					"owner": "agent", "fencing_token": fencing, "outcome": "executed", "result": map[string]any{"ok": true}}
			}
			code, answer := postTraced(t, tc.via.HTTPAddr(), path, tp, body)
			if code != tc.wantCode {
				t.Fatalf("POST %s: %d %v, want %d", path, code, answer, tc.wantCode)
			}
			if tc.key == "trace-granted" && !tc.complete {
				fencing = answer["fencing_token"]
			}
			var spans []sdktrace.ReadOnlySpan
			nodetest.WaitFor(t, 10*time.Second, "the claim's server span", func() bool {
				spans = spans[:0]
				for _, s := range exp.GetSpans().Snapshots() {
					if s.SpanContext().TraceID() == traceID {
						spans = append(spans, s)
					}
				}
				return slices.ContainsFunc(spans, func(s sdktrace.ReadOnlySpan) bool {
					return s.Name() == tc.chain[0] && s.Parent().SpanID() == agentSpan
				})
			})
			parent := agentSpan
			for j, name := range tc.chain {
				k := slices.IndexFunc(spans, func(s sdktrace.ReadOnlySpan) bool {
					return s.Name() == name && s.Parent().SpanID() == parent
				})
				if k < 0 {
					t.Fatalf("no span %s under %s in the trace: %v", name, parent, names(spans))
				}
				s := spans[k]
				if got := spanAttr(s, httpapi.AttrNode); got != tc.nodes[j] {
					t.Errorf("%s ran on %q, want %q", name, got, tc.nodes[j])
				}
				parent = s.SpanContext().SpanID()
				if j > 0 {
					continue
				}
				if s.SpanKind() != trace.SpanKindServer || !s.Parent().IsRemote() {
					t.Errorf("server span: kind %v, remote parent %v", s.SpanKind(), s.Parent().IsRemote())
				}
				for key, want := range map[string]string{
					httpapi.AttrOutcome: tc.outcome, httpapi.AttrPolicy: tc.policy, httpapi.AttrNamespace: "default",
					httpapi.AttrTool: tc.tool, httpapi.AttrKeyHash: httpapi.KeyHash(tc.key), "http.route": route(path),
					"http.response.status_code": fmt.Sprint(tc.wantCode),
				} {
					if got := spanAttr(s, key); got != want {
						t.Errorf("server span %s = %q, want %q", key, got, want)
					}
				}
			}
			// A follower that has not applied the cluster's signing key
			// yet adds one before it signs the grant's token: that
			// forward and commit are in the trace too, and nothing else.
			spans = slices.DeleteFunc(spans, func(s sdktrace.ReadOnlySpan) bool {
				return spanAttr(s, cluster.AttrCommand) == "add_signing_key"
			})
			if len(spans) != len(tc.chain) {
				t.Errorf("the trace has %d spans, want %d: %v", len(spans), len(tc.chain), names(spans))
			}
		})
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, fmt.Sprintf("%s[%s](%s<-%s)", s.Name(), spanAttr(s, cluster.AttrCommand), s.SpanContext().SpanID(), s.Parent().SpanID()))
	}
	return out
}

// TestNodeExportsSpansOverOTLP: a node with OTLPEndpoint posts its spans
// to a real OTLP/HTTP receiver (protobuf, /v1/traces) as service intentd;
// a claim's server span and its commit carry the agent's trace ID. A node
// without an endpoint exports nothing (the receiver's control).
func TestNodeExportsSpansOverOTLP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		traced bool
	}{
		{"configured", true},
		{"not configured", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTestNodes(t)
			rcv := otlptest.New(t, nodetest.FreePort(t))
			m := tn.startCfg("n1", 1, anyAddrs, func(c *Config) {
				if tc.traced {
					c.OTLPEndpoint = rcv.URL()
				}
			})
			tn.waitReady()
			traceID := "4bf92f3577b34da6a3ce929d0e0e4736"
			if code := claimTraced(t, m.HTTPAddr(), "00-"+traceID+"-00f067aa0ba902b7-01", map[string]any{
				"key": "exported", "tool": "test.tool", "owner": "agent", "payload": map[string]any{}}); code != http.StatusCreated {
				t.Fatalf("claim: %d", code)
			}
			// Shutdown flushes the spans still queued.
			if err := m.Shutdown(t.Context()); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			delete(tn.mains, "n1")
			if bad := rcv.Refused(); len(bad) > 0 {
				t.Fatalf("the receiver refused exports: %v", bad)
			}
			got := map[string]otlptest.Span{}
			for _, s := range rcv.Spans() {
				if s.TraceID() == traceID {
					got[s.GetName()+"/"+s.Attr(cluster.AttrCommand)] = s
				}
			}
			if !tc.traced {
				if n := len(rcv.Spans()); n != 0 {
					t.Fatalf("%d spans exported without an endpoint", n)
				}
				return
			}
			claim, ok := got["intentd.claim/"]
			if !ok {
				t.Fatalf("no claim span with the agent's trace ID among %d spans", len(rcv.Spans()))
			}
			if claim.Service != "intentd" || claim.ParentID() != "00f067aa0ba902b7" || claim.Attr(httpapi.AttrOutcome) != "granted" {
				t.Errorf("claim span: service %q parent %s outcome %q", claim.Service, claim.ParentID(), claim.Attr(httpapi.AttrOutcome))
			}
			if commit, ok := got[cluster.SpanCommit+"/claim"]; !ok || commit.ParentID() != claim.SpanID() {
				t.Errorf("commit span %v: want the claim's child committing a claim", commit.Span)
			}
		})
	}
}

// route is the route template of a path the test posts to.
func route(path string) string {
	if path == "/v1/intents" {
		return path
	}
	return "/v1/intents/:key/complete"
}
