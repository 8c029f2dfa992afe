package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/clusterview"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// serveFrom sends one request straight to the handler as if it came from
// remoteAddr, and buffers the answer.
func serveFrom(t testing.TB, h http.Handler, remoteAddr, method, target string, body []byte, header ...string) reply {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, bytes.NewReader(body))
	req.Method = method
	req.RemoteAddr = remoteAddr
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// keyedEnv is a node with API keys (name → roles, all in namespace alpha
// but "agent-b" in beta), configured further by opts; it returns the
// plaintext keys by name.
func keyedEnv(t *testing.T, roles map[string]string, opts ...envOption) (*testEnv, map[string]string) {
	t.Helper()
	keys := map[string]string{}
	var entries []string
	for name, r := range roles {
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		keys[name] = plain
		ns := "alpha"
		if name == "agent-b" {
			ns = "beta"
		}
		entries = append(entries, fmt.Sprintf(`{"name":%q,"namespace":%q,"roles":[%q],"sha256":%q}`, name, ns, r, sum))
	}
	ks, err := auth.Parse([]byte(`{"keys":[` + strings.Join(entries, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, append([]envOption{func(c *Config) { c.Auth = ks }}, opts...)...), keys
}

// seriesOf returns the label sets of metric name in a /metrics text.
func seriesOf(metrics, name string) []string {
	var out []string
	for line := range strings.Lines(metrics) {
		if strings.HasPrefix(line, name+"{") {
			out = append(out, line[len(name):strings.IndexByte(line, '}')+1])
		}
	}
	return out
}

// labelsRE matches the labels of the HTTP request metrics.
var labelsRE = regexp.MustCompile(`^\{code="([^"]*)",method="([^"]*)",route="([^"]*)"\}$`)

// TestMetricLabelsAreBounded: requests with invented methods and paths do
// not grow /metrics; every label comes from a fixed set.
func TestMetricLabelsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  func(t *testing.T) *testEnv
	}{
		{"auth off", func(t *testing.T) *testEnv { return newEnv(t) }},
		{"auth on", func(t *testing.T) *testEnv {
			e, _ := keyedEnv(t, map[string]string{"agent": "agent"})
			return e
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env(t)
			h := e.api.Handler()
			rng := mrand.New(mrand.NewPCG(1, 2))
			word := func(alphabet string, n int) string {
				b := make([]byte, 1+rng.IntN(n))
				for i := range b {
					b[i] = alphabet[rng.IntN(len(alphabet))]
				}
				return string(b)
			}
			methods := []string{"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"}
			prefixes := []string{"/", "/v1/", "/v1/intents/", "/v1/policies/", "/v1/admin/", "/debug/", "/v2/"}
			for i := range 10_000 {
				method := methods[rng.IntN(len(methods))]
				if i%2 == 0 {
					method = word("ABCDEFGHIJKLMNOPQRSTUVWXYZ_-", 12)
				}
				path := prefixes[rng.IntN(len(prefixes))] + word("abcxyz019-._~%/\xff", 20)
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Method, req.URL.Path, req.URL.RawPath = method, path, ""
				req.RemoteAddr = fmt.Sprintf("192.0.2.%d:1", i%250)
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
			r := serveFrom(t, h, "192.0.2.251:1", http.MethodGet, "/metrics", nil)
			if r.status != http.StatusOK {
				t.Fatalf("GET /metrics = %s", r)
			}
			if len(r.body) > 64<<10 {
				t.Errorf("/metrics is %d bytes after 10,000 invented requests", len(r.body))
			}
			routes := map[string]bool{"unmatched": true}
			for _, rt := range e.api.echo.Routes() {
				routes[rt.Path] = true
			}
			allowed := append(slices.Clone(httpMethods), "other")
			for _, name := range []string{"intentd_http_requests_total", "intentd_http_request_duration_seconds_count"} {
				series := seriesOf(string(r.body), name)
				// 8 methods by a handful of codes; the invented paths
				// all fall under "unmatched" or a few templates.
				if len(series) > 60 {
					t.Errorf("%s has %d series", name, len(series))
				}
				for _, s := range series {
					m := labelsRE.FindStringSubmatch(s)
					if m == nil {
						t.Fatalf("series %s: labels are not code, method, route", s)
					}
					code, method, route := m[1], m[2], m[3]
					if !slices.Contains(allowed, method) || !routes[route] || len(code) != 3 {
						t.Errorf("series %s has a label outside the fixed sets", s)
					}
				}
			}
		})
	}
}

func TestMethodAndCodeLabels(t *testing.T) {
	for in, want := range map[string]string{"GET": "GET", "HEAD": "HEAD", "POST": "POST", "PUT": "PUT", "PATCH": "PATCH",
		"DELETE": "DELETE", "OPTIONS": "OPTIONS", "get": "other", "CONNECT": "other", "TRACE": "other", "BREW": "other", "": "other"} {
		if got := methodLabel(in); got != want {
			t.Errorf("methodLabel(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[int]string{200: "200", 429: "429", 599: "599", 0: "other", 99: "other", 600: "other", 999: "other"} {
		if got := codeLabel(in); got != want {
			t.Errorf("codeLabel(%d) = %q, want %q", in, got, want)
		}
	}
}

// TestAuthFailuresAreRateLimited: failed authentications from one
// address are answered 429 once its burst is spent; other addresses, and
// the handlers' own 403s, are not affected.
func TestAuthFailuresAreRateLimited(t *testing.T) {
	const burst = 3
	e, keys := keyedEnv(t, map[string]string{"agent": "agent", "tool": "tool", "agent-b": "agent"},
		func(c *Config) { c.RateLimits = &RateLimits{AuthFailures: 0.001, AuthFailureBurst: burst} })
	h := e.api.Handler()
	const attacker, other, third = "192.0.2.1:4000", "192.0.2.2:4000", "192.0.2.3:4000"
	claim, err := json.Marshal(newClaim("k", "o"))
	if err != nil {
		t.Fatal(err)
	}
	bad := bearer("ik_" + strings.Repeat("A", 43))

	// The burst: bad keys, no key, and a key without the role (403) all
	// count; a forged X-Forwarded-For does not move the failures to
	// another address.
	for i, hdr := range [][]string{bad, nil, bearer(keys["tool"])} {
		want, code := http.StatusUnauthorized, CodeUnauthenticated
		if i == 2 {
			want, code = http.StatusForbidden, CodeForbidden
		}
		problemOf(t, serveFrom(t, h, attacker, http.MethodPost, "/v1/intents", claim,
			append(hdr, "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i))...), want, code)
	}
	for _, hdr := range [][]string{bad, nil} {
		r := serveFrom(t, h, attacker, http.MethodPost, "/v1/intents", claim, hdr...)
		p := problemOf(t, r, http.StatusTooManyRequests, CodeRateLimited)
		if r.header.Get("Retry-After") == "" || p.RetryAfterMS <= 0 {
			t.Fatalf("429 without Retry-After: %s", r)
		}
	}
	// A good key from the address is never refused by the failure limit
	// (TestAuthFailureLimitNeverRefusesAGoodKey).
	claim2, err := json.Marshal(newClaim("k2", "o"))
	if err != nil {
		t.Fatal(err)
	}
	answer(t, serveFrom(t, h, attacker, http.MethodPost, "/v1/intents", claim2, bearer(keys["agent"])...), http.StatusCreated)
	if r := serveFrom(t, h, attacker, http.MethodGet, "/healthz", nil); r.status != http.StatusOK {
		t.Fatalf("a public route was limited: %s", r)
	}
	// Another address with a good key is not affected, and its own
	// failures have their own bucket.
	answer(t, serveFrom(t, h, other, http.MethodPost, "/v1/intents", claim, bearer(keys["agent"])...), http.StatusCreated)
	problemOf(t, serveFrom(t, h, other, http.MethodPost, "/v1/intents", claim, bad...), http.StatusUnauthorized, CodeUnauthenticated)
	// A handler's 403 comes after authentication: it is not a failure.
	for range burst + 2 {
		problemOf(t, serveFrom(t, h, third, http.MethodGet, "/v1/audit?namespace=alpha", nil, bearer(keys["agent-b"])...),
			http.StatusForbidden, CodeForbidden)
	}
	if r := serveFrom(t, h, third, http.MethodGet, "/v1/audit", nil, bearer(keys["agent-b"])...); r.status != http.StatusOK {
		t.Fatalf("after handler 403s: %s", r)
	}
	metrics := string(serveFrom(t, h, third, http.MethodGet, "/metrics", nil).body)
	if !strings.Contains(metrics, `intentd_http_rate_limited_total{limit="auth_failures"} 2`) {
		t.Errorf("metrics do not count the auth_failures 429s:\n%s", seriesOf(metrics, "intentd_http_rate_limited_total"))
	}

	t.Run("off", func(t *testing.T) {
		e, _ := keyedEnv(t, map[string]string{"agent": "agent"}, func(c *Config) { c.RateLimits = &RateLimits{} })
		for range 20 {
			problemOf(t, serveFrom(t, e.api.Handler(), attacker, http.MethodPost, "/v1/intents", claim, bad...),
				http.StatusUnauthorized, CodeUnauthenticated)
		}
	})
	t.Run("default", func(t *testing.T) {
		if DefaultRateLimits.AuthFailures <= 0 || DefaultRateLimits.AuthFailureBurst <= 0 {
			t.Fatalf("DefaultRateLimits = %+v: auth failures are not limited by default", DefaultRateLimits)
		}
		e, _ := keyedEnv(t, map[string]string{"agent": "agent"})
		var limited bool
		for range DefaultRateLimits.AuthFailureBurst + 1 {
			r := serveFrom(t, e.api.Handler(), attacker, http.MethodPost, "/v1/intents", claim, bad...)
			limited = r.status == http.StatusTooManyRequests
		}
		if !limited {
			t.Fatal("the default limits let a burst of bad keys through")
		}
	})
}

// TestKeyLimitSharesOneBucketAcrossSpellings: every percent-encoding of
// one intent key spends the same per-key bucket.
func TestKeyLimitSharesOneBucketAcrossSpellings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		spellings []string // escaped path segments of one key
	}{
		{"slash", []string{"a%2Fb", "a%2fb", "%61%2Fb", "a%2F%62"}},
		{"plain", []string{"ab", "%61b", "a%62", "%61%62"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const burst = 2
			e := newEnv(t, func(c *Config) { c.RateLimits = &RateLimits{PerKey: 0.001, KeyBurst: burst} })
			for i, sp := range tc.spellings {
				r := e.do(t, http.MethodGet, "/v1/intents/"+sp, nil)
				if i < burst {
					problemOf(t, r, http.StatusNotFound, string(fsm.StatusNotFound))
					continue
				}
				problemOf(t, r, http.StatusTooManyRequests, CodeRateLimited)
			}
		})
	}
}

// TestTextThatIsNotUTF8Is400: invalid UTF-8 and lone surrogate escapes
// are refused wherever they are, instead of being decoded to U+FFFD (which
// would make "z\xff" and "z\xfe" one key).
func TestTextThatIsNotUTF8Is400(t *testing.T) {
	e := newEnv(t)
	g := e.claimOK(t, "k", "o")
	before := proposed(e.mem)
	claim := func(key, tool, payload string) string {
		return `{"key":"` + key + `","tool":"` + tool + `","owner":"o","payload":` + payload + `}`
	}
	cases := []struct {
		name, path, body string
		header           []string
		field            string // "" when the problem names none
	}{
		{"raw 0xff in key", "/v1/intents", claim("z\xff", "t", `{}`), nil, "key"},
		{"raw 0xfe in key", "/v1/intents", claim("z\xfe", "t", `{}`), nil, "key"},
		{"raw byte in tool", "/v1/intents", claim("k2", "t\x80", `{}`), nil, "tool"},
		{"raw byte in payload string", "/v1/intents", claim("k2", "t", "{\"a\":[\"x\xff\"]}"), nil, "payload"},
		{"raw byte in payload member name", "/v1/intents", claim("k2", "t", "{\"a\xff\":1}"), nil, "payload"},
		{"lone low surrogate escape in key", "/v1/intents", claim(`z\udc00`, "t", `{}`), nil, "key"},
		{"lone high surrogate escape in owner", "/v1/intents", `{"key":"k2","tool":"t","owner":"o\ud800","payload":{}}`, nil, "owner"},
		{"high surrogate then a non-surrogate", "/v1/intents", claim(`z\ud800\u0041`, "t", `{}`), nil, "key"},
		{"two high surrogates", "/v1/intents", claim("k2", "t", `"\uD800\uDBFF"`), nil, "payload"},
		{"lone surrogate escape in payload", "/v1/intents", claim("k2", "t", `{"a":"\udc00"}`), nil, "payload"},
		{"overlong slash", "/v1/intents", claim("z\xc0\xaf", "t", `{}`), nil, "key"},
		{"overlong three bytes", "/v1/intents", claim("z\xe0\x80\xaf", "t", `{}`), nil, "key"},
		{"encoded surrogate", "/v1/intents", claim("z\xed\xa0\x80", "t", `{}`), nil, "key"},
		{"beyond U+10FFFF", "/v1/intents", claim("z\xf4\x90\x80\x80", "t", `{}`), nil, "key"},
		{"truncated sequence", "/v1/intents", claim("z\xe2\x82", "t", `{}`), nil, "key"},
		{"bad member name", "/v1/intents", "{\"ke\xffy\":\"k2\",\"tool\":\"t\",\"owner\":\"o\"}", nil, ""},
		{"result of complete", keyPath("k", "complete"),
			fmt.Sprintf(`{"owner":"o","fencing_token":%d,"outcome":"executed","result":{"r":"\udfff"}}`, g.FencingToken), nil, "result"},
		{"reason of resolve", keyPath("k", "resolve"), "{\"outcome\":\"executed\",\"actor\":\"a\",\"reason\":\"r\xff\"}", nil, "reason"},
		{"payload of verify", "/v1/tokens/verify", `{"execution_token":"x","payload":"\udc00"}`, nil, "payload"},
		{"Idempotency-Key header", "/v1/intents", claim("", "t", `{}`), []string{HeaderIdempotencyKey, "z\xff"}, "key"},
		{"key in the path", "/v1/intents/z%FF/complete", `{"owner":"o","fencing_token":1,"outcome":"executed"}`, nil, "key"},
		{"key in the path of a read", "/v1/intents/z%C0%AF", "", nil, "key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, body := http.MethodPost, []byte(tc.body)
			if tc.body == "" {
				method, body = http.MethodGet, nil
			}
			p := problemOf(t, serveFrom(t, e.api.Handler(), "192.0.2.1:1", method, tc.path, body, tc.header...),
				http.StatusBadRequest, CodeBadRequest)
			if p.Field != tc.field || !strings.Contains(p.Detail, "UTF") && !strings.Contains(p.Detail, "surrogate") {
				t.Errorf("problem field %q detail %q, want field %q and a word on the encoding", p.Field, p.Detail, tc.field)
			}
		})
	}
	if got := proposed(e.mem); got != before {
		t.Errorf("text that is not UTF-8 proposed %d commands", got-before)
	}
	// What is valid stays valid: a surrogate pair, and U+FFFD itself.
	for _, c := range []string{claim("pair", "t", `{"a":"\ud83d\ude00"}`), claim("\uFFFD", "t", `"\ufffd"`), claim(`\ud83d\ude00`, "t", `{}`)} {
		answer(t, serveFrom(t, e.api.Handler(), "192.0.2.1:1", http.MethodPost, "/v1/intents", []byte(c)), http.StatusCreated)
	}
}

// TestCheckText names the top-level member the bad text is in.
func TestCheckText(t *testing.T) {
	for _, tc := range []struct {
		body  string
		field string // "-": no problem
	}{
		{`{"a":"ok","b":{"c":["\ud83d\ude00"]}}`, "-"},
		{`{"a":"\\udc00"}`, "-"}, // an escaped backslash, not an escape
		{`{"a":"\\\udc00"}`, "a"},
		{`{"a":1,"b":{"c":["\udc00"]}}`, "b"},
		{"{\"a\":{\"x\":1},\"b\":\"\xff\"}", "b"},
		{"{\"a\\u0062\":\"\xff\"}", "ab"},
		{"[\"\xff\"]", ""},
		{`"\udc00"`, ""},
		{"{\"a\":\"x\", \"\xff\":1}", ""},
		{`{"a":"\ud800\udc00\udc00"}`, "a"},
		{`{"a":"\u00e9\ud800"}`, "a"},
		{`{"a":"\u12`, "-"}, // malformed: the decoder reports it
		{`{"a":"\ud800\u12`, "a"},
		{"{\"a\":\"\\\xff\"}", "a"},
	} {
		p := checkText([]byte(tc.body))
		switch {
		case tc.field == "-" && p != nil:
			t.Errorf("checkText(%q) = %s", tc.body, p.Detail)
		case tc.field != "-" && p == nil:
			t.Errorf("checkText(%q) passed", tc.body)
		case p != nil && p.Field != tc.field:
			t.Errorf("checkText(%q) names field %q, want %q (%s)", tc.body, p.Field, tc.field, p.Detail)
		}
	}
}

// TestPayloadCanonicalizationRefusesWhatTheDecoderRefuses: the ledger's
// payload path (JCS in fsm.Fingerprint) refuses the same text instead of
// normalizing it, so nothing behind the API relies on the decoder alone.
func TestPayloadCanonicalizationRefusesWhatTheDecoderRefuses(t *testing.T) {
	for _, payload := range []string{"\"z\xff\"", "{\"a\xff\":1}", `["\udc00"]`, `"\ud800"`, `"\ud800\u0041"`, "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "{\"a\":\"\xf4\x90\x80\x80\"}"} {
		if p := checkText([]byte(payload)); p == nil {
			t.Errorf("checkText(%q) passed", payload)
		}
		if c, _, err := fsm.Fingerprint("t", []byte(payload)); err == nil {
			t.Errorf("fsm.Fingerprint(%q) = %q, want an error", payload, c)
		}
	}
}

// TestIsAdminFailsClosed: with auth on, a request without an identity is
// not an admin; with auth off every caller is one.
func TestIsAdminFailsClosed(t *testing.T) {
	ks, err := auth.ParseEnv("a:alpha:agent:" + auth.HashKey("ik_"+strings.Repeat("a", 43)))
	if err != nil {
		t.Fatal(err)
	}
	svc := ledgertest.NewService(t, ledgertest.NewMemory(epoch), ledger.Config{})
	nobody := func(echo.Context) (Identity, bool) { return Identity{}, false }
	admin := func(echo.Context) (Identity, bool) { return Identity{Name: "root", Admin: true}, true }
	for _, tc := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"auth off", Config{Service: svc}, true},
		{"auth disabled", Config{Service: svc, Auth: auth.Disabled()}, true},
		{"auth on, no principal", Config{Service: svc, Auth: ks}, false},
		{"auth on, no identity", Config{Service: svc, Auth: ks, Identify: nobody}, false},
		{"auth off, Identify says nobody", Config{Service: svc, Identify: nobody}, false},
		{"auth on, an admin", Config{Service: svc, Auth: ks, Identify: admin}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.cfg)
			c := s.echo.NewContext(httptest.NewRequest(http.MethodGet, "/v1/audit", nil), httptest.NewRecorder())
			if got := s.isAdmin(c); got != tc.want {
				t.Errorf("isAdmin = %v, want %v", got, tc.want)
			}
		})
	}

	// Over HTTP: an authenticated caller whose identity is unknown cannot
	// read another namespace's audit log.
	e, keys := keyedEnv(t, map[string]string{"agent": "agent"}, func(c *Config) { c.Identify = nobody })
	problemOf(t, e.do(t, http.MethodGet, "/v1/audit?namespace=beta", nil, bearer(keys["agent"])...), http.StatusForbidden, CodeForbidden)
}

// fakeSnapshots serves a snapshot that is written by write, and records
// restores.
type fakeSnapshots struct {
	write func(w io.Writer) (clusterview.SnapshotInfo, error)
	// written receives the error of each finished write.
	written  chan error
	restored chan []byte
}

func (f *fakeSnapshots) TakeSnapshot(context.Context) (clusterview.Snapshot, error) {
	return fakeSnapshot{f}, nil
}

func (f *fakeSnapshots) Restore(_ context.Context, data []byte, _ bool) (clusterview.SnapshotInfo, error) {
	f.restored <- data
	return clusterview.SnapshotInfo{Index: 7, Bytes: int64(len(data))}, nil
}

type fakeSnapshot struct{ f *fakeSnapshots }

func (fakeSnapshot) Index() uint64 { return 7 }
func (fakeSnapshot) Intents() int  { return 1 }
func (s fakeSnapshot) Write(w io.Writer) (clusterview.SnapshotInfo, error) {
	info, err := s.f.write(w)
	s.f.written <- err
	return info, err
}

// timeoutServer serves e's API with short server timeouts, as
// cmd/intentd's http.Server has long ones.
func timeoutServer(t *testing.T, e *testEnv, timeout time.Duration) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(e.api.Handler())
	ts.Config.ReadTimeout, ts.Config.WriteTimeout = timeout, timeout
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// TestLongSnapshotTransfersOutliveServerTimeouts: a snapshot download and
// upload that take several times the server's WriteTimeout and
// ReadTimeout complete while bytes keep moving, and a download the client
// stops reading is still cut.
func TestLongSnapshotTransfersOutliveServerTimeouts(t *testing.T) {
	const timeout = 400 * time.Millisecond
	const lasts = 5 * timeout // how long each slow transfer takes
	const tick = timeout / 8  // how often it moves a few bytes

	// trickle calls step every tick until lasts has passed.
	trickle := func(step func(i int) error) error {
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for i, start := 0, time.Now(); time.Since(start) < lasts; i++ {
			if err := step(i); err != nil {
				return err
			}
			<-ticker.C
		}
		return nil
	}

	t.Run("slow download", func(t *testing.T) {
		snaps := &fakeSnapshots{written: make(chan error, 1), write: func(w io.Writer) (clusterview.SnapshotInfo, error) {
			err := trickle(func(i int) error {
				_, err := fmt.Fprintf(w, "{\"line\":%d}\n", i)
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
				return err
			})
			if err == nil {
				_, err = io.WriteString(w, "END\n")
			}
			return clusterview.SnapshotInfo{}, err
		}}
		e := newEnv(t, func(c *Config) { c.Snapshots = snaps })
		ts := timeoutServer(t, e, timeout)
		start := time.Now()
		resp, err := http.Get(ts.URL + "/v1/admin/snapshot")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.HasSuffix(body, []byte("END\n")) {
			t.Fatalf("download after %v: %d, %v, ends %q", time.Since(start), resp.StatusCode, err, body[max(0, len(body)-40):])
		}
		if err := <-snaps.written; err != nil {
			t.Fatalf("server side: %v", err)
		}
	})

	t.Run("stalled download", func(t *testing.T) {
		snaps := &fakeSnapshots{written: make(chan error, 1), write: func(w io.Writer) (clusterview.SnapshotInfo, error) {
			chunk := bytes.Repeat([]byte("x"), 1<<20)
			for range 1 << 10 { // 1 GiB: far more than the socket buffers hold
				if _, err := w.Write(chunk); err != nil {
					return clusterview.SnapshotInfo{}, err
				}
			}
			return clusterview.SnapshotInfo{}, nil
		}}
		e := newEnv(t, func(c *Config) { c.Snapshots = snaps })
		ts := timeoutServer(t, e, timeout)
		resp, err := http.Get(ts.URL + "/v1/admin/snapshot")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		// The client reads nothing more: the server's write must fail.
		select {
		case err := <-snaps.written:
			if err == nil {
				t.Fatal("a stalled download was written in full")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a stalled download was not cut")
		}
	})

	t.Run("slow upload", func(t *testing.T) {
		snaps := &fakeSnapshots{restored: make(chan []byte, 1)}
		e := newEnv(t, func(c *Config) { c.Snapshots = snaps })
		ts := timeoutServer(t, e, timeout)
		pr, pw := io.Pipe()
		var sent bytes.Buffer
		var wg sync.WaitGroup
		wg.Go(func() {
			err := trickle(func(i int) error {
				line := fmt.Sprintf("{\"line\":%d}\n", i)
				sent.WriteString(line)
				_, err := io.WriteString(pw, line)
				return err
			})
			pw.CloseWithError(err)
		})
		resp, err := http.Post(ts.URL+"/v1/admin/snapshot/restore", ContentTypeSnapshot, pr)
		pr.Close() // if the server answered early, the writer stops
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("restore: %d %s", resp.StatusCode, body)
		}
		if got := <-snaps.restored; !bytes.Equal(got, sent.Bytes()) {
			t.Fatalf("restored %d bytes, sent %d", len(got), sent.Len())
		}
	})

	t.Run("stalled upload", func(t *testing.T) {
		snaps := &fakeSnapshots{restored: make(chan []byte, 1)}
		e := newEnv(t, func(c *Config) { c.Snapshots = snaps })
		ts := timeoutServer(t, e, timeout)
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// A body announced at 1 MB of which a few bytes come; then nothing.
		if _, err := fmt.Fprintf(conn, "POST /v1/admin/snapshot/restore HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n{\"line\":0}\n"); err != nil {
			t.Fatal(err)
		}
		if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err == nil {
			defer resp.Body.Close()
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("a stalled upload was not cut")
		}
		if err == nil && resp.StatusCode == http.StatusOK {
			t.Fatal("a stalled upload was restored")
		}
		select {
		case data := <-snaps.restored:
			t.Fatalf("restored %q", data)
		default:
		}
	})
}

// TestSnapshotDownloadHeaders: a snapshot is binary (application/
// octet-stream), announced by its index and intent count and named as an
// attachment, and its bytes arrive as written.
func TestSnapshotDownloadHeaders(t *testing.T) {
	data := []byte("intentd-ledger\x00\x01\x02\xff binary")
	snaps := &fakeSnapshots{written: make(chan error, 1), write: func(w io.Writer) (clusterview.SnapshotInfo, error) {
		_, err := w.Write(data)
		return clusterview.SnapshotInfo{Index: 7, Intents: 1, Bytes: int64(len(data))}, err
	}}
	e := newEnv(t, func(c *Config) { c.Snapshots = snaps })
	r := e.do(t, http.MethodGet, "/v1/admin/snapshot", nil)
	if r.status != http.StatusOK || !bytes.Equal(r.body, data) {
		t.Fatalf("download: %d %q", r.status, r.body)
	}
	for name, want := range map[string]string{
		"Content-Type":        "application/octet-stream",
		HeaderSnapshotIndex:   "7",
		HeaderSnapshotIntents: "1",
		"Content-Disposition": `attachment; filename="intentd-7.snapshot"`,
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if err := <-snaps.written; err != nil {
		t.Fatal(err)
	}
}
