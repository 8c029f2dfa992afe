package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/intentledger/intentd/client"
)

// TestTraceContextIsSent: a request carries the trace context its
// context names (WithTraceparent), else the one the WithTraceContext hook
// writes; a malformed traceparent, and any header but the two trace
// headers, is not sent.
func TestTraceContextIsSent(t *testing.T) {
	const (
		tp      = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		hookTP  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		state   = "vendor=opaque"
		garbage = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	var mu sync.Mutex
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(srv.Close)
	hook := func(parent string) client.Option {
		return client.WithTraceContext(func(_ context.Context, h http.Header) {
			h.Set("traceparent", parent)
			h.Set("tracestate", state)
			h.Set("Authorization", "Bearer stolen")
		})
	}
	for _, tc := range []struct {
		name           string
		ctxTP          string
		opts           []client.Option
		wantTP, wantTS string
	}{
		{"none", "", nil, "", ""},
		{"from the context", tp, nil, tp, ""},
		{"from the hook", "", []client.Option{hook(hookTP)}, hookTP, state},
		{"the context wins over the hook", tp, []client.Option{hook(hookTP)}, tp, ""},
		{"a malformed one from the context", garbage, nil, "", ""},
		{"a malformed one from the hook", "", []client.Option{hook(garbage)}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, []string{srv.URL}, append(tc.opts, client.WithDiscovery(false))...)
			ctx := context.Background()
			if tc.ctxTP != "" {
				ctx = client.WithTraceparent(ctx, tc.ctxTP, "")
			}
			if _, err := c.Health(ctx, srv.URL); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if g := got.Get("traceparent"); g != tc.wantTP {
				t.Errorf("traceparent %q, want %q", g, tc.wantTP)
			}
			if g := got.Get("tracestate"); g != tc.wantTS {
				t.Errorf("tracestate %q, want %q", g, tc.wantTS)
			}
			if g := got.Get("Authorization"); g != "" {
				t.Errorf("the hook's Authorization header was sent: %q", g)
			}
		})
	}
}

// TestValidTraceparent checks the W3C version 00 format, with the
// all-zero IDs refused.
func TestValidTraceparent(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", false},
		{"", false},
	} {
		if got := client.ValidTraceparent(tc.s); got != tc.want {
			t.Errorf("ValidTraceparent(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}
