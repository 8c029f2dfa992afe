package idemproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/intentledger/intentd/client"
)

// upstreamRequest is the request the proxy sends the upstream for a
// granted claim: the client's request (Idempotency-Key kept: the upstream
// may dedupe too) at the upstream's URL, X-Forwarded-* set, hop-by-hop
// headers dropped, and the grant's fencing and execution tokens added.
//
// It is never replayable by net/http's Transport: the Transport re-sends
// a request it thinks idempotent (one with an Idempotency-Key header or a
// GetBody) when a reused connection breaks after the request was written,
// and the upstream might then run it twice. So the body has no GetBody and
// the two idempotency headers are stored under their lower-case names,
// which the Transport's check does not see (HTTP field names are
// case-insensitive; HTTP/2 lower-cases them anyway).
func upstreamRequest(ctx context.Context, in *http.Request, target *url.URL, body []byte, g grantHeaders) *http.Request {
	out := in.Clone(ctx)
	out.RequestURI = ""
	out.Close = false
	out.Header = EndToEnd(in.Header)
	out.Header.Del("Expect")
	// The grant headers, and (as httputil.ReverseProxy with Rewrite does)
	// the client's own forwarding headers, in every spelling: the proxy
	// writes them anew.
	stripGrantHeaders(out.Header)
	if tp, ts := client.Traceparent(ctx); tp != "" {
		// The trace context of the proxy's span, when it records one.
		out.Header.Set(client.HeaderTraceparent, tp)
		out.Header.Del(client.HeaderTracestate)
		if ts != "" {
			out.Header.Set(client.HeaderTracestate, ts)
		}
	}
	pr := &httputil.ProxyRequest{In: in, Out: out}
	pr.SetURL(target)
	pr.SetXForwarded()
	out.Host = target.Host
	out.Header.Set(HeaderFencingToken, strconv.FormatUint(g.fencingToken, 10))
	out.Header.Set(HeaderExecutionToken, g.executionToken)
	for _, name := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		if vs := out.Header.Values(name); len(vs) > 0 {
			out.Header.Del(name)
			out.Header[lowerASCII(name)] = vs
		}
	}
	out.Trailer, out.TransferEncoding = nil, nil // the body is sent whole, with its length
	out.ContentLength = int64(len(body))
	out.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) == 0 {
		out.Body = nil
	}
	out.GetBody = nil
	return out
}

// grantHeaders are the grant's tokens for the upstream.
type grantHeaders struct {
	fencingToken   uint64
	executionToken string
}

// proxyHeaders are the headers only the proxy sets (the grant's tokens
// and the forwarding headers), by their normalized names (headerIdentity).
var proxyHeaders = []string{"intent-fencing-token", "intent-execution-token", "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"}

// headerIdentity is the name a header is known by to any server behind
// the proxy: lower case, and '_' read as '-'. CGI, WSGI, Rack and PHP map
// both Intent-Fencing-Token and Intent_Fencing_Token to
// HTTP_INTENT_FENCING_TOKEN, so a client's underscore spelling must go as
// the real one does.
func headerIdentity(name string) string {
	b := []byte(name)
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		case c == '_':
			b[i] = '-'
		}
	}
	return string(b)
}

// stripGrantHeaders removes every header a client may have sent under a
// name only the proxy sets (proxyHeaders), in any spelling: any case, and
// '_' for '-'. The proxy then sets the real ones.
func stripGrantHeaders(h http.Header) {
	for name := range h {
		if slices.Contains(proxyHeaders, headerIdentity(name)) {
			delete(h, name)
		}
	}
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// sendOutcome classifies a failed upstream exchange.
type sendOutcome int

const (
	// notSent: no connection was made (refused, no route, DNS): the
	// upstream never saw the request.
	notSent sendOutcome = iota
	// noAnswer: the request may have reached the upstream, whose answer
	// never came (timeout, reset): whether it acted is unknown.
	noAnswer
)

// send performs the upstream exchange and, when it fails, says whether
// the request may have reached the upstream.
func send(rt http.RoundTripper, req *http.Request) (*http.Response, sendOutcome, error) {
	var connected atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := rt.RoundTrip(req)
	if err == nil {
		return resp, 0, nil
	}
	if !connected.Load() {
		return nil, notSent, err
	}
	return nil, noAnswer, err
}

// timedOut reports whether err is a timeout rather than a reset.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
