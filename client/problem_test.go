package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
)

// answering is a server that always answers with status, the content type
// and body, and a Retry-After header when retryAfter is set.
func answering(t *testing.T, status int, contentType, body, retryAfter string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Every call decodes error answers the same way: a problem document's
// fields as they are; a document without a code (a proxy's) keeps its
// type, title and detail and is named by its status; an answer without a
// document is named by its status, with its body as the detail; a
// Retry-After header counts when the document names no wait.
func TestProblemDecoding(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body, retryAfter string
		status                              int
		want                                client.Problem
		is                                  error
	}{
		{"document", "application/problem+json",
			`{"type":"https://x/forbidden","title":"Forbidden","status":403,"code":"forbidden","detail":"role admin needed"}`, "",
			http.StatusForbidden,
			client.Problem{Status: 403, Code: "forbidden", Type: "https://x/forbidden", Title: "Forbidden", Detail: "role admin needed"},
			client.ErrUnauthorized},
		{"document with retry_after_ms", "application/problem+json",
			`{"title":"No leader","status":503,"code":"no_leader","retry_after_ms":1500}`, "7",
			http.StatusServiceUnavailable,
			client.Problem{Status: 503, Code: "no_leader", Title: "No leader", RetryAfter: 1500 * time.Millisecond},
			client.ErrNoLeader},
		{"document without a code", "application/problem+json",
			`{"type":"https://proxy/auth","title":"Login required","status":401,"detail":"no session"}`, "",
			http.StatusUnauthorized,
			client.Problem{Status: 401, Code: "unauthenticated", Type: "https://proxy/auth", Title: "Login required", Detail: "no session"},
			client.ErrUnauthorized},
		{"no document", "text/plain", "upstream went away\n", "3",
			http.StatusBadGateway,
			client.Problem{Status: 502, Code: "unavailable", Title: "Bad Gateway", Detail: "upstream went away", RetryAfter: 3 * time.Second},
			client.ErrUnavailable},
		{"forbidden without a document", "", "", "",
			http.StatusForbidden,
			client.Problem{Status: 403, Code: "forbidden", Title: "Forbidden"},
			client.ErrUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := answering(t, tc.status, tc.contentType, tc.body, tc.retryAfter)
			c := newClient(t, []string{srv.URL}, client.WithDiscovery(false), client.WithRetries(0))
			_, err := c.Settings(context.Background())
			var p *client.Problem
			if !errors.As(err, &p) {
				t.Fatalf("settings: %v, want a *Problem", err)
			}
			if *p != tc.want {
				t.Errorf("problem = %+v\nwant      %+v", *p, tc.want)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
		})
	}
}
