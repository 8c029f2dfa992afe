package idemproxy

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseRoutes(t *testing.T) {
	base := Route{Tool: "api", Key: KeyRequired, On5xx: On5xxRecord}
	routes, err := ParseRoutes([]byte(`[
		{"method": "post", "path": "/v1/charges", "tool": "stripe.charge", "lease": "10s",
		 "fingerprint_headers": ["content-type", "Content-Type", "x-account"], "on_5xx": "retry", "wait_in_flight": true, "upstream_timeout": "2m"},
		{"path": "/v1/", "key": "optional"},
		{"name": "health", "path": "/v1/ping", "key": "pass"}
	]`), base)
	if err != nil {
		t.Fatal(err)
	}
	c := routes[0]
	if c.Method != "POST" || c.Tool != "stripe.charge" || c.Scope != "stripe.charge" || time.Duration(c.Lease) != 10*time.Second ||
		c.On5xx != On5xxRetry || !c.WaitInFlight || c.Name != "POST /v1/charges" || time.Duration(c.UpstreamTimeout) != 2*time.Minute ||
		strings.Join(c.FingerprintHeaders, ",") != "Content-Type,X-Account" {
		t.Errorf("route 0: %+v", c)
	}
	if r := routes[1]; r.Tool != "api" || r.Key != KeyOptional || r.On5xx != On5xxRecord || r.Name != "/v1/" || r.UpstreamTimeout != 0 {
		t.Errorf("route 1 did not take the defaults: %+v", r)
	}
	if routes[2].Name != "health" {
		t.Errorf("route 2: %+v", routes[2])
	}

	for _, tc := range []struct{ name, file, want string }{
		{"not a list", `{"path": "/"}`, "JSON array"},
		{"empty", `[]`, "no route"},
		{"unknown field", `[{"path": "/", "tools": "x"}]`, "unknown field"},
		{"dedupe window", `[{"path": "/", "dedupe_window": "1h"}]`, "policy"},
		{"no path", `[{"method": "POST"}]`, "path"},
		{"method in path", `[{"path": "POST /x"}]`, "path"},
		{"safe method", `[{"method": "GET", "path": "/x"}]`, "pass through"},
		{"bad key mode", `[{"path": "/x", "key": "maybe"}]`, "required, optional or pass"},
		{"bad on_5xx", `[{"path": "/x", "on_5xx": "ignore"}]`, "record, retry or in_doubt"},
		{"lease too short", `[{"path": "/x", "lease": "10ms"}]`, "lease"},
		{"lease not a string", `[{"path": "/x", "lease": 30}]`, "duration"},
		{"negative upstream timeout", `[{"path": "/x", "upstream_timeout": "-1s"}]`, "upstream_timeout"},
		{"upstream timeout over a day", `[{"path": "/x", "upstream_timeout": "25h"}]`, "upstream_timeout"},
		{"bad header name", `[{"path": "/x", "fingerprint_headers": ["a b"]}]`, "header name"},
		{"bad tool", "[{\"path\": \"/x\", \"tool\": \"a\\u0001\"}]", "tool"},
	} {
		if _, err := ParseRoutes([]byte(tc.file), base); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestRouterMatch(t *testing.T) {
	routes := []Route{
		{Name: "charges", Method: "POST", Path: "/v1/charges"},
		{Name: "refund", Method: "POST", Path: "/v1/orders/{id}/refunds"},
		{Name: "v1", Path: "/v1/"},
		{Name: "exact", Path: "/exact/{$}"},
		{Name: "host", Path: "api.example.com/hosted"},
	}
	for i := range routes {
		if err := routes[i].Normalize(); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := NewRouter(routes)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ method, target, host, want string }{
		{"POST", "/v1/charges", "", "charges"},
		{"POST", "//v1/./charges", "", "charges"},   // cleaned, never a way around the route
		{"POST", "/v1/x/../charges", "", "charges"}, //
		{"PUT", "/v1/charges", "", "v1"},            // the subtree route takes other methods
		{"POST", "/v1/orders/o-9/refunds", "", "refund"},
		{"DELETE", "/v1/orders/o-9/refunds", "", "v1"},
		{"POST", "/v1/anything/else", "", "v1"},
		{"POST", "/v1", "", ""}, // ServeMux would redirect to /v1/: not a route
		{"POST", "/exact/", "", "exact"},
		{"POST", "/exact/more", "", ""},
		{"POST", "/hosted", "api.example.com", "host"},
		{"POST", "/hosted", "other.example.com", ""},
		{"POST", "/other", "", ""},
	} {
		r := httptest.NewRequest(tc.method, "http://example.com/", nil)
		r.URL.Path = tc.target
		if tc.host != "" {
			r.Host = tc.host
		}
		got, ok := rt.Match(r)
		name := ""
		if ok {
			name = got.Name
		}
		if name != tc.want {
			t.Errorf("%s %s (host %q): route %q, want %q", tc.method, tc.target, tc.host, name, tc.want)
		}
	}

	conflict := []Route{{Path: "/a/{x}"}, {Path: "/a/{y}"}}
	for i := range conflict {
		_ = conflict[i].Normalize()
	}
	if _, err := NewRouter(conflict); err == nil {
		t.Error("conflicting patterns accepted")
	}
}
