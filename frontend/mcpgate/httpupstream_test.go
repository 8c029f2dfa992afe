package mcpgate

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/client"
)

// httpUpstream serves the fake upstream over streamable HTTP (stateless,
// JSON answers). A POST whose body holds dropMark runs (the effect
// happens) and then loses its connection without an answer.
func httpUpstream(t *testing.T, u *fakeUpstream, dropMark string) *httptest.Server {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(dropMark)) {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r) // the upstream acts...
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_ = conn.Close() // ...and its answer is lost
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

func TestGateHTTPUpstreamFailures(t *testing.T) {
	u := newFakeUpstream(t)
	srv := httpUpstream(t, u, `"order":"http-drop"`)
	h := newGateHarness(t, func(c *Config) { c.Upstreams = []Upstream{{Name: "pay", URL: srv.URL}} })
	h.up = u
	cs := h.connect(nil)

	// The POST reached the upstream, which acted, and its connection died:
	// whether it acted is unknown to the gate, so the key is in doubt, on
	// every retry, and the upstream is never called again for it.
	args := map[string]any{"order": "http-drop"}
	res := mustCall(t, cs, "charge", args, key("http-drop"))
	if sc := structured(t, res); !res.IsError || sc["status"] != string(StatusInDoubt) {
		t.Fatalf("answer %v %s", sc, text(res))
	}
	h.mem.Ledger.Advance(2 * shortLease)
	again := mustCall(t, cs, "charge", args, key("http-drop"))
	if sc := structured(t, again); !again.IsError || sc["status"] != string(StatusInDoubt) {
		t.Errorf("retry: %v %s", sc, text(again))
	}
	if n := u.count("http-drop"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}

	// The upstream is gone: nothing can have been sent, so the attempt is
	// recorded failed (never executed with the transport's error) and a
	// retry may run it.
	_ = srv.Listener.Close()
	srv.CloseClientConnections()
	res = mustCall(t, cs, "charge", map[string]any{"order": "http-down"}, key("http-down"))
	if sc := structured(t, res); !res.IsError || sc["status"] != string(StatusUpstreamUnavailable) || sc["retryable"] != true {
		t.Fatalf("answer %v %s", sc, text(res))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in, err := h.ledger.Get(ctx, res.Meta[MetaKey].(string), client.GetOptions{})
	if err != nil || in.State != client.StateFailed {
		t.Fatalf("intent %+v, %v", in, err)
	}
	if n := u.count("http-down"); n != 0 {
		t.Errorf("%d effects, want 0", n)
	}
}
