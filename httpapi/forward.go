package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// hopHeaders are connection-level headers a proxy must not pass on.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func dropHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// leaderURL is the URL of the request's path and query on the leader,
// whose address is host:port (or a URL with a scheme); with forceTLS the
// scheme is https whatever the address says.
func leaderURL(leader string, r *http.Request, forceTLS bool) (*url.URL, error) {
	u := &url.URL{Scheme: "http", Host: leader}
	if strings.Contains(leader, "://") {
		parsed, err := url.Parse(leader)
		if err != nil {
			return nil, fmt.Errorf("leader address %q: %w", leader, err)
		}
		u.Scheme, u.Host = parsed.Scheme, parsed.Host
	}
	if u.Host == "" {
		return nil, fmt.Errorf("leader address %q has no host", leader)
	}
	if forceTLS {
		u.Scheme = "https"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("leader address %q: scheme %q is neither http nor https", leader, u.Scheme)
	}
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	return u, nil
}

// forward sends the request once to the leader, marked with
// HeaderForwardedBy, and answers with the leader's response verbatim. If
// the leader cannot be reached a write's outcome is unknown (the leader
// may have applied it) and a read is unavailable.
func (s *Server) forward(c echo.Context, leader string, body []byte, write bool) error {
	in := c.Request()
	target, err := leaderURL(leader, in, s.forwardTLS)
	if err != nil {
		return s.writeProblem(c, newProblem(CodeNotLeader, err.Error()))
	}
	ctx := in.Context()
	if s.tracer != nil {
		var span trace.Span
		ctx, span = s.tracer.Start(ctx, SpanForwardHTTP, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("intentd.leader", leader)))
		defer span.End()
	}
	out, err := http.NewRequestWithContext(ctx, in.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		return s.writeProblem(c, newProblem(CodeNotLeader, fmt.Sprintf("building the request to the leader at %s: %v", leader, err)))
	}
	out.Header = in.Header.Clone()
	dropHopHeaders(out.Header)
	out.Header.Del("Content-Length")
	out.Header.Set(HeaderForwardedBy, s.nodeID)
	if s.tracer != nil {
		// The leader's server span is a child of this forward's span.
		traceContext.Inject(ctx, propagation.HeaderCarrier(out.Header))
	}
	if !claimsForwarded(in) {
		// The original client's address, for the leader's per-client limit.
		if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
			out.Header.Set("X-Forwarded-For", ip)
		}
	}
	if body == nil {
		out.Body, out.ContentLength = http.NoBody, 0
	}
	if s.peers != nil {
		s.peers.Sign(out)
	}

	s.metrics.forwarded.Inc()
	client := s.fwd
	if wait, _, waiting, _ := waitParams(c); waiting && client.Timeout > 0 {
		// A long-poll is answered after up to wait: give the leader that
		// long on top of the usual bound.
		cp := *client
		cp.Timeout += wait
		client = &cp
	}
	if streams(c) && client.Timeout > 0 {
		// A snapshot or an export moves as long as bytes move: the leader's
		// rolling deadlines and the caller's connection bound it, not a
		// fixed timeout.
		cp := *client
		cp.Timeout = 0
		client = &cp
	}
	resp, err := client.Do(out)
	if err != nil {
		s.log.Warn("httpapi: forwarding to the leader failed", "leader", leader, "method", in.Method,
			"path", in.URL.Path, "err", err)
		code, what := CodeUnavailable, "the read was not served"
		if write {
			code, what = CodeOutcomeUnknown, "the leader may or may not have applied the write"
		}
		return s.writeProblem(c, newProblem(code, fmt.Sprintf("forwarding to the leader at %s failed (%v); %s", leader, err, what)))
	}
	defer resp.Body.Close()

	h := c.Response().Header()
	for name, values := range resp.Header {
		h[name] = append([]string(nil), values...)
	}
	dropHopHeaders(h)
	c.Response().WriteHeader(resp.StatusCode)
	if _, err := io.Copy(c.Response(), resp.Body); err != nil {
		// The status line is out; all that is left is to cut the body short.
		s.log.Warn("httpapi: copying the leader's response", "leader", leader, "err", err)
	}
	return nil
}

// streams reports whether the request moves a snapshot or a JSONL export,
// whose size, not the cluster's speed, decides how long it takes.
func streams(c echo.Context) bool {
	switch c.Path() {
	case "/v1/admin/snapshot", "/v1/admin/snapshot/restore":
		return true
	case "/v1/audit":
		return c.QueryParam("format") == "jsonl"
	}
	return false
}
