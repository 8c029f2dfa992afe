// Package console serves the web console: the approvals queue, the
// in_doubt queue, intents, the audit log (verified in the browser) and
// the cluster, as plain HTML, CSS and ES modules embedded in the binary.
//
// The console has no server-side power of its own. Every page calls the
// node's JSON API from the browser with the API key the person signed in
// with (Authorization: Bearer), so the key's roles and namespace apply
// exactly as they do to any other client. This package only serves files:
// it reads no request body, holds no state and imports no server package.
//
// Every answer carries a strict Content-Security-Policy (scripts, styles
// and connections from this origin only, no inline script or style, no
// framing) and asks the browser to revalidate (ETag) so an upgraded node
// never serves a mix of old and new modules.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every console answer: the pages load
// scripts, styles and images from this origin only, connect to this
// origin's API only, run no inline script or style, submit no form
// elsewhere and are never framed.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Pages are the console's bookmarkable URLs under Prefix ("" is the
// start page). Each serves index.html; app.js renders the page the path
// names.
var Pages = []string{"", "sign-in", "approvals", "in-doubt", "intents", "intent", "audit", "cluster"}

//go:embed ui
var files embed.FS

// file is one embedded file, ready to serve.
type file struct {
	data        []byte
	etag        string
	contentType string
}

// handler serves the console.
type handler struct {
	// assets maps a path under Prefix ("assets/app.js") to its file.
	assets map[string]file
	index  file
}

// Handler returns the handler of the console's paths: Prefix and every
// path under it. It answers 404 for anything that is not one of Pages or
// an embedded asset (no directory is ever listed) and 405 for methods
// other than GET and HEAD.
func Handler() http.Handler {
	h := &handler{assets: map[string]file{}}
	err := fs.WalkDir(files, "ui", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		ctype := mime.TypeByExtension(path.Ext(name))
		switch path.Ext(name) {
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		case ".css":
			ctype = "text/css; charset=utf-8"
		case ".html":
			ctype = "text/html; charset=utf-8"
		}
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		f := file{data: data, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, contentType: ctype}
		rel := strings.TrimPrefix(name, "ui/")
		if rel == "index.html" {
			h.index = f
		} else {
			h.assets[rel] = f
		}
		return nil
	})
	if err != nil || h.index.data == nil {
		// The files are compiled in: only a broken build gets here.
		panic(fmt.Sprintf("console: reading the embedded files: %v (index.html found: %t)", err, h.index.data != nil))
	}
	return h
}

// Mount returns a handler that serves the console under Prefix (and
// redirects the bare "/ui" there) and passes every other request to api
// unchanged.
func Mount(api http.Handler) http.Handler {
	ui := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(r.URL.Path, Prefix) {
			ui.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed: the console only serves files (GET, HEAD)", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		target := Prefix
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, target, http.StatusMovedPermanently)
		return
	}
	rel, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		h.notFound(w)
		return
	}
	f, ok := h.assets[rel]
	if !ok && slices.Contains(Pages, rel) {
		f, ok = h.index, true
	}
	if !ok {
		h.notFound(w)
		return
	}
	hdr.Set("Content-Type", f.contentType)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	if match := r.Header.Get("If-None-Match"); match != "" && etagMatches(match, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hdr.Set("Content-Length", fmt.Sprint(len(f.data)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(f.data)
	}
}

// notFound answers a path that is neither a page nor an embedded asset.
func (h *handler) notFound(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "404 not found: no such console page or file (the console starts at "+Prefix+")", http.StatusNotFound)
}

// etagMatches reports whether an If-None-Match value names etag (or is
// "*").
func etagMatches(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "W/"))
		if v == etag || v == "*" {
			return true
		}
	}
	return false
}
