package idemproxy

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
)

// Router finds the route of a request by the routes' http.ServeMux
// patterns, so the most specific pattern wins ("/v1/charges/{id}/capture"
// over "/v1/").
type Router struct {
	mux    *http.ServeMux
	routes []Route
}

// routeIndex is the handler registered for a route: its index.
type routeIndex int

// ServeHTTP is never called: the router only asks the mux which handler
// matches.
func (routeIndex) ServeHTTP(http.ResponseWriter, *http.Request) {}

// NewRouter builds a router over normalized routes (see Route.Normalize).
// Two routes whose patterns conflict (the same pattern twice, or two that
// match the same requests with neither more specific) are refused.
func NewRouter(routes []Route) (rt *Router, err error) {
	rt = &Router{mux: http.NewServeMux(), routes: routes}
	for i, r := range routes {
		pattern := r.Path
		if r.Method != "" {
			pattern = r.Method + " " + r.Path
		}
		if err := register(rt.mux, pattern, routeIndex(i)); err != nil {
			return nil, fmt.Errorf("route %d (%s): %w", i, r.Name, err)
		}
	}
	return rt, nil
}

// register adds a pattern, turning ServeMux's panic on a bad or
// conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pattern %q: %v", pattern, p)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}

// Routes returns the routes in configuration order.
func (rt *Router) Routes() []Route { return rt.routes }

// Match returns the route of r, or false when none matches. The path is
// matched cleaned ("//v1/./charges" as "/v1/charges"), so a spelling the
// upstream would read as the same path cannot slip past its route.
func (rt *Router) Match(r *http.Request) (*Route, bool) {
	probe := &http.Request{Method: r.Method, Host: r.Host, URL: &url.URL{Path: cleanPath(r.URL.Path)}, Header: http.Header{}}
	h, _ := rt.mux.Handler(probe)
	i, ok := h.(routeIndex)
	if !ok {
		return nil, false // no pattern, or ServeMux's redirect or 405
	}
	return &rt.routes[i], true
}

// cleanPath is path.Clean that keeps a trailing slash, as ServeMux does.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}
