package idemproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// Issue 27: recorded answers belong to the caller scope that wrote them,
// and only the proxy's own API key may claim (and so complete) its keys.

// TestDefaultRouteScopesByCredentials: on a route that names no
// scope_headers, client B with other credentials is never replayed client
// A's answer (finding 6); the same client's retry is; single_caller shares
// on purpose.
func TestDefaultRouteScopesByCredentials(t *testing.T) {
	for _, tc := range []struct {
		name       string
		route      Route
		a, b       []string // the two clients' credential headers
		wantShared bool
	}{
		{"authorization", Route{Path: "/"}, []string{"Authorization", "Bearer a"}, []string{"Authorization", "Bearer b"}, false},
		{"cookie", Route{Path: "/"}, []string{"Cookie", "session=a"}, []string{"Cookie", "session=b"}, false},
		{"credentials against none", Route{Path: "/"}, []string{"Authorization", "Bearer a"}, nil, false},
		{"single caller shares", Route{Path: "/", SingleCaller: true}, []string{"Authorization", "Bearer a"}, []string{"Authorization", "Bearer b"}, true},
		{"named scope header only", Route{Path: "/", ScopeHeaders: []string{"X-Tenant"}}, []string{"X-Tenant", "t1", "Authorization", "Bearer a"},
			[]string{"X-Tenant", "t1", "Authorization", "Bearer b"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, []Route{tc.route})
			a := hs.send("POST", "/v1/transfers", "K", `{"amount":10}`, tc.a...)
			b := hs.send("POST", "/v1/transfers", "K", `{"amount":10}`, tc.b...)
			if a.code != http.StatusCreated || a.header.Get(HeaderReplayed) != "" {
				t.Fatalf("client a: %v", a)
			}
			shared := b.header.Get(HeaderReplayed) == "true"
			if shared != tc.wantShared {
				t.Fatalf("client b replayed=%v, want %v: %v", shared, tc.wantShared, b)
			}
			if want := map[bool]int{true: 1, false: 2}[tc.wantShared]; hs.up.count(`"K"`) != want {
				t.Errorf("the upstream ran K %d times, want %d", hs.up.count(`"K"`), want)
			}
			if again := hs.send("POST", "/v1/transfers", "K", `{"amount":10}`, tc.a...); string(again.body) != string(a.body) ||
				again.header.Get(HeaderReplayed) != "true" {
				t.Errorf("client a's retry is not its own answer replayed: %v", again)
			}
		})
	}
}

func TestRouteScopeOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		route Route
		want  []string // the scope headers after Normalize; nil for an error
	}{
		{"default: the caller's credentials", Route{Path: "/"}, []string{"Authorization", "Cookie"}},
		{"named", Route{Path: "/", ScopeHeaders: []string{"x-tenant"}}, []string{"X-Tenant"}},
		{"single caller", Route{Path: "/", SingleCaller: true}, []string{}},
		{"both", Route{Path: "/", SingleCaller: true, ScopeHeaders: []string{"Authorization"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.route
			err := r.Normalize()
			if tc.want == nil {
				if err == nil {
					t.Fatalf("accepted: %+v", r)
				}
				return
			}
			if err != nil || strings.Join(r.ScopeHeaders, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("scope headers %q (%v), want %q", r.ScopeHeaders, err, tc.want)
			}
		})
	}
	routes, err := ParseRoutes([]byte(`[{"path":"/a"},{"path":"/b","single_caller":true}]`), Route{})
	if err != nil || len(routes[0].ScopeHeaders) != 2 || len(routes[1].ScopeHeaders) != 0 || !routes[1].SingleCaller {
		t.Fatalf("routes file: %+v, %v", routes, err)
	}
}

// TestGrantHeadersStrippedInEverySpelling: a client's Intent_Fencing_Token
// (which CGI, WSGI, Rack and PHP read as the real header) never reaches
// the upstream, on a claimed route or a passed-through one (finding 7).
func TestGrantHeadersStrippedInEverySpelling(t *testing.T) {
	hs := newHarness(t, []Route{{Path: "/v1/charges", Method: "POST", Tool: "charge"}, {Path: "/v1/free", Key: KeyPass}})
	spellings := []string{"Intent_Fencing_Token", "intent_fencing_token", "INTENT-FENCING-TOKEN", "intent-Fencing_token",
		"Intent_Execution_Token", "intent_execution_token", "X_Forwarded_For", "x_forwarded_host", "Forwarded"}
	for _, tc := range []struct {
		name, path, key string
		claimed         bool
	}{
		{"claimed", "/v1/charges", "sp-1", true},
		{"passed through", "/v1/free", "sp-2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", hs.srv.URL+tc.path, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(HeaderIdempotencyKey, strconv.Quote(tc.key))
			for _, name := range spellings {
				req.Header[name] = []string{"999"} // as spelt, not canonicalized
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := hs.up.header(strconv.Quote(tc.key))
			if got == nil {
				t.Fatalf("the upstream saw no request (%d)", resp.StatusCode)
			}
			for name, vs := range got {
				id := headerIdentity(name)
				switch {
				case id == "intent-fencing-token" || id == "intent-execution-token":
					if !tc.claimed || name != http.CanonicalHeaderKey(name) || len(vs) != 1 || vs[0] == "999" {
						t.Errorf("the upstream got %s: %q", name, vs)
					}
				case id == "x-forwarded-for", id == "x-forwarded-host", id == "forwarded":
					if name != http.CanonicalHeaderKey(name) || hasForged(vs) { // the proxy's own are fine
						t.Errorf("the upstream got the client's %s: %q", name, vs)
					}
				}
			}
			if tc.claimed && got.Get(HeaderFencingToken) == "" {
				t.Errorf("the upstream got no fencing token of the grant: %v", got)
			}
		})
	}
}

// hasForged reports whether a client's forged value is among vs.
func hasForged(vs []string) bool {
	for _, v := range vs {
		if strings.Contains(v, "999") {
			return true
		}
	}
	return false
}

func TestStripGrantHeaders(t *testing.T) {
	for _, tc := range []struct {
		name  string
		strip bool
	}{
		{"Intent-Fencing-Token", true},
		{"Intent_Fencing_Token", true},
		{"intent_fencing_token", true},
		{"INTENT_EXECUTION-TOKEN", true},
		{"X_Forwarded_Proto", true},
		{"forwarded", true},
		{"X-Intent-Fencing-Token", false},
		{"Intent-Fencing-Tokens", false},
		{"Idempotency-Key", false},
		{"Authorization", false},
	} {
		h := http.Header{tc.name: {"v"}}
		stripGrantHeaders(h)
		if stripped := len(h) == 0; stripped != tc.strip {
			t.Errorf("%s: stripped %v, want %v", tc.name, stripped, tc.strip)
		}
	}
}

// TestRouteToolsFollowTheLedgersGrammar: a route's tool outside the
// ledger's grammar is refused when the routes are read, one inside it is
// kept.
func TestRouteToolsFollowTheLedgersGrammar(t *testing.T) {
	for _, name := range []string{"http", "stripe.charge", "a-b_c.d9", "0.x", "Stripe.Charge", "charge ", "a..b", ".a", "a.", "a._b",
		"-a", "a/b", "a:b", "é", "", strings.Repeat("a", 256), strings.Repeat("a", 257), "payments.refund-v2"} {
		want := fsm.ValidTool(name) == nil
		r := Route{Path: "/", Tool: name}
		if err := r.Normalize(); (err == nil) != want && name != "" { // "" takes the default tool
			t.Errorf("route tool %q: %v", name, err)
		}
	}
	_, err := ParseRoutes([]byte(`[{"path":"/", "tool":"Stripe.Charge"}]`), Route{})
	if err == nil || !strings.Contains(err.Error(), "tool") || !errors.Is(err, ErrBadTool) {
		t.Errorf("a route with tool Stripe.Charge: %v", err)
	}
}

// TestCoTenantCannotForgeAnAnswer is finding 4 with auth on: another agent
// key of the namespace claims the ledger key the proxy would claim (with
// the proxy's payload shape) to complete it with a forged answer. The
// ledger refuses it (key_prefixes reserve idem: to the proxy's key), and
// the victim's request runs upstream and gets the upstream's answer.
func TestCoTenantCannotForgeAnAnswer(t *testing.T) {
	ks, plain := clienttest.AgentKeys(t, map[string][]string{"proxy": {LedgerKeyPrefix}, "mallory": nil})
	route := Route{Name: "transfers", Method: "POST", Path: "/v1/transfers", Tool: "http", SingleCaller: true} // the key is computable
	hs := newHarnessWith(t, []Route{route}, []clienttest.MemoryOption{clienttest.WithAuth(ks)},
		[]client.Option{client.WithAPIKey(plain["proxy"])})
	mallory, err := client.New([]string{hs.mem.URL}, client.WithAPIKey(plain["mallory"]))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"amount":10}`)
	payload, err := BuildPayload(Request{Method: "POST", Path: "/v1/transfers", ContentType: "application/json", Body: body}, nil, DefaultMaxPayload)
	if err != nil {
		t.Fatal(err)
	}
	key := LedgerKey("http", "", "K")
	_, err = mallory.Claim(context.Background(), client.ClaimRequest{Key: key, Tool: "http", Payload: payload, Owner: "mallory"})
	var p *client.Problem
	if !errors.As(err, &p) || p.Code != "key_reserved" {
		t.Fatalf("mallory's claim of %s: %v, want 403 key_reserved", key, err)
	}
	r := hs.send("POST", "/v1/transfers", "K", string(body))
	if r.code != http.StatusCreated || r.header.Get(HeaderReplayed) != "" || bytes.Contains(r.body, []byte("FORGED")) || hs.up.count(`"K"`) != 1 {
		t.Fatalf("the victim's request: %v (upstream ran %d times)", r, hs.up.count(`"K"`))
	}
}

// TestKeyReservedIsTheProxysMisconfiguration: when another key reserves
// idem: and the proxy's own key does not list it, every claim is refused
// 403 key_reserved: the client gets 502 ledger-refused naming the fix,
// and nothing is sent upstream.
func TestKeyReservedIsTheProxysMisconfiguration(t *testing.T) {
	ks, plain := clienttest.AgentKeys(t, map[string][]string{"proxy": nil, "other-proxy": {LedgerKeyPrefix}})
	hs := newHarnessWith(t, testRoutes(), []clienttest.MemoryOption{clienttest.WithAuth(ks)}, []client.Option{client.WithAPIKey(plain["proxy"])})
	r := hs.send("POST", "/v1/charges", "mis-1", `{"amount":1}`)
	p := r.problem(t)
	if r.code != http.StatusBadGateway || p.Code != CodeLedgerRefused || !strings.Contains(p.Detail, `"key_prefixes": ["idem:"]`) {
		t.Fatalf("answer %v", r)
	}
	if n := hs.up.count(`"mis-1"`); n != 0 {
		t.Errorf("the upstream ran %d times", n)
	}
	if p, res := ClaimProblem(&client.Problem{Status: 403, Code: "key_reserved"}, "idem:x:k"); p.Status != http.StatusBadGateway ||
		res != ResultLedgerRefused || !strings.Contains(p.Detail, "key_prefixes") {
		t.Errorf("ClaimProblem(key_reserved): %+v %s", p, res)
	}
}
