package console

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
)

// get serves one request through Mount (the API behind it answers 418,
// so a request that reaches it shows).
func get(t *testing.T, method, target string, header ...string) *http.Response {
	t.Helper()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "api "+r.URL.Path)
	})
	req := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	Mount(api).ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkSecurityHeaders: every console answer, 404s and 405s included,
// carries the CSP and the other hardening headers.
func checkSecurityHeaders(t *testing.T, what string, r *http.Response) {
	t.Helper()
	for name, want := range map[string]string{
		"Content-Security-Policy": ContentSecurityPolicy,
		"X-Content-Type-Options":  "nosniff",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "no-referrer",
	} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("%s: %s = %q, want %q", what, name, got, want)
		}
	}
}

// embedded reads every embedded file: path under Prefix -> bytes.
func embedded(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := fs.WalkDir(files, "ui", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(name)
		out[strings.TrimPrefix(name, "ui/")] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCSPIsStrict(t *testing.T) {
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
		"frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, want) {
			t.Errorf("the CSP lacks %q: %s", want, ContentSecurityPolicy)
		}
	}
	if strings.Contains(ContentSecurityPolicy, "unsafe") || strings.Contains(ContentSecurityPolicy, "*") {
		t.Errorf("the CSP allows something unsafe: %s", ContentSecurityPolicy)
	}
}

// TestEveryPageServesIndex: each bookmarkable page is index.html, as
// HTML, revalidated on every load.
func TestEveryPageServesIndex(t *testing.T) {
	index := embedded(t)["index.html"]
	for _, p := range Pages {
		r := get(t, http.MethodGet, Prefix+p+"?key=a%2Fb")
		b := body(t, r)
		if r.StatusCode != http.StatusOK || !bytes.Equal(b, index) {
			t.Fatalf("GET %s%s = %d, %d bytes; want index.html", Prefix, p, r.StatusCode, len(b))
		}
		checkSecurityHeaders(t, Prefix+p, r)
		if ct := r.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("%s: Content-Type %q", p, ct)
		}
		if cc := r.Header.Get("Cache-Control"); cc != "no-cache" || r.Header.Get("ETag") == "" {
			t.Errorf("%s: Cache-Control %q, ETag %q: want revalidation", p, cc, r.Header.Get("ETag"))
		}
	}
}

// TestAssetsAreTheEmbeddedFiles: every embedded file is served byte for
// byte with its type; HEAD sends the headers only; a matching ETag is 304.
func TestAssetsAreTheEmbeddedFiles(t *testing.T) {
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
	n := 0
	for name, want := range embedded(t) {
		if name == "index.html" {
			continue
		}
		n++
		r := get(t, http.MethodGet, Prefix+name)
		if got := body(t, r); r.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
			t.Fatalf("GET %s%s = %d, %d bytes; want the embedded %d", Prefix, name, r.StatusCode, len(got), len(want))
		}
		checkSecurityHeaders(t, name, r)
		if ct, want := r.Header.Get("Content-Type"), types[path.Ext(name)]; ct != want {
			t.Errorf("%s: Content-Type %q, want %q", name, ct, want)
		}
		etag := r.Header.Get("ETag")
		if nm := get(t, http.MethodGet, Prefix+name, "If-None-Match", etag); nm.StatusCode != http.StatusNotModified || len(body(t, nm)) != 0 {
			t.Errorf("%s with If-None-Match %s = %d, want 304 without a body", name, etag, nm.StatusCode)
		}
		if other := get(t, http.MethodGet, Prefix+name, "If-None-Match", `"stale"`); other.StatusCode != http.StatusOK {
			t.Errorf("%s with a stale ETag = %d, want 200", name, other.StatusCode)
		}
		if head := get(t, http.MethodHead, Prefix+name); head.StatusCode != http.StatusOK || len(body(t, head)) != 0 {
			t.Errorf("HEAD %s = %d", name, head.StatusCode)
		}
	}
	if n < 10 {
		t.Fatalf("only %d assets embedded", n)
	}
}

// TestUnknownPathsAre404: no directory listing, nothing outside the
// embedded files, no path tricks; the 404 carries the CSP too.
func TestUnknownPathsAre404(t *testing.T) {
	for _, p := range []string{
		"/ui/nope", "/ui/assets/", "/ui/assets", "/ui/assets/pages/", "/ui/assets/nope.js", "/ui/index.html",
		"/ui/assets/app.js/", "/ui//assets/app.js", "/ui/assets/../console.go", "/ui/%2e%2e/console.go",
		"/ui/assets/%2e%2e/index.html", "/ui/console.go", "/ui/ui/index.html", "/ui/approvals/", "/ui/approvals/x",
	} {
		r := get(t, http.MethodGet, p)
		b := body(t, r)
		if r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, r.StatusCode)
		}
		checkSecurityHeaders(t, p, r)
		if bytes.Contains(b, []byte("app.js")) || bytes.Contains(b, []byte("<a href")) {
			t.Errorf("GET %s lists something: %s", p, b)
		}
	}
}

func TestOnlyGetAndHead(t *testing.T) {
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions} {
		r := get(t, m, "/ui/approvals")
		if r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /ui/approvals = %d, Allow %q", m, r.StatusCode, r.Header.Get("Allow"))
		}
		checkSecurityHeaders(t, m, r)
	}
}

// TestMountLeavesTheAPIAlone: /ui redirects to /ui/ (query kept), and
// every path outside /ui/ reaches the API untouched.
func TestMountLeavesTheAPIAlone(t *testing.T) {
	r := get(t, http.MethodGet, "/ui?x=1")
	if r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/ui/?x=1" {
		t.Errorf("GET /ui = %d to %q", r.StatusCode, r.Header.Get("Location"))
	}
	for _, p := range []string{"/", "/v1/intents", "/uix", "/v1/ui/", "/healthz"} {
		r := get(t, http.MethodGet, p)
		if b := body(t, r); r.StatusCode != http.StatusTeapot || string(b) != "api "+p {
			t.Errorf("GET %s = %d %s, want the API's answer", p, r.StatusCode, b)
		}
		if r.Header.Get("Content-Security-Policy") != "" {
			t.Errorf("GET %s got the console's headers", p)
		}
	}
}

// TestNoInlineCodeAndEveryImportIsEmbedded: the CSP forbids inline script
// and style, so none may be written; the modules never build markup from
// strings; every module a module imports, and every file index.html
// names, is embedded (a missing one would break the page only in a
// browser).
func TestNoInlineCodeAndEveryImportIsEmbedded(t *testing.T) {
	all := embedded(t)
	index := string(all["index.html"])
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`), // a script with a body
		regexp.MustCompile(`<script(?:(?:\s[^>]*)?)>`),      // a script without src
		regexp.MustCompile(`\sstyle\s*=`),
		regexp.MustCompile(`\son[a-z]+\s*=`),
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`(?i)https?://`),
	} {
		for _, m := range bad.FindAllString(index, -1) {
			if !strings.Contains(m, "src=") {
				t.Errorf("index.html has %q (the CSP forbids inline code and other origins)", m)
			}
		}
	}
	refs := regexp.MustCompile(`(?:href|src)="/ui/([^"]*)"`)
	for _, m := range refs.FindAllStringSubmatch(index, -1) {
		if _, ok := all[m[1]]; !ok && !isPage(m[1]) {
			t.Errorf("index.html refers to /ui/%s, which is neither a page nor embedded", m[1])
		}
	}
	imports := regexp.MustCompile(`(?m)^\s*(?:import|export)\b[^"']*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']`)
	forbidden := regexp.MustCompile(`\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function\(|\.setAttribute\(\s*["']style|https?://`)
	for name, data := range all {
		if path.Ext(name) != ".js" {
			continue
		}
		src := string(data)
		if m := forbidden.FindString(src); m != "" {
			t.Errorf("%s uses %q", name, m)
		}
		for _, m := range imports.FindAllStringSubmatch(src, -1) {
			spec := m[1] + m[2]
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
				t.Errorf("%s imports %q: only relative imports of embedded modules", name, spec)
				continue
			}
			target := path.Join(path.Dir(name), spec)
			if _, ok := all[target]; !ok {
				t.Errorf("%s imports %q (%s), which is not embedded", name, spec, target)
			}
		}
	}
}

func isPage(p string) bool {
	for _, page := range Pages {
		if p == page {
			return true
		}
	}
	return false
}
