// Package otlptest is an OTLP/HTTP trace receiver for tests: an HTTP
// server on loopback that decodes every protobuf export request and keeps
// its spans, as a collector would receive them.
package otlptest

import (
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with the service that exported it.
type Span struct {
	Service string // the resource's service.name
	*tracepb.Span
}

// TraceID is the span's trace ID in hex, as a traceparent writes it.
func (s Span) TraceID() string { return hex.EncodeToString(s.GetTraceId()) }

// SpanID is the span's ID in hex.
func (s Span) SpanID() string { return hex.EncodeToString(s.GetSpanId()) }

// ParentID is the parent span's ID in hex ("" for a root span).
func (s Span) ParentID() string { return hex.EncodeToString(s.GetParentSpanId()) }

// Attr is the span's attribute key as a string ("" when unset).
func (s Span) Attr(key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			v := kv.GetValue()
			switch {
			case v.GetStringValue() != "":
				return v.GetStringValue()
			case v.GetIntValue() != 0:
				return strconv.FormatInt(v.GetIntValue(), 10)
			}
		}
	}
	return ""
}

// Receiver is a running OTLP/HTTP receiver.
type Receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
	bad      []string // why requests were refused
}

// New starts a receiver on the loopback address addr ("127.0.0.1:0" for
// any port) and stops it when the test ends.
func New(t testing.TB, addr string) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("otlptest: listen on %s: %v", addr, err)
	}
	srv.Listener = ln
	srv.Start()
	r.srv = srv
	t.Cleanup(srv.Close)
	return r
}

// URL is the receiver's base URL (http://host:port); exporters post to
// URL()+"/v1/traces".
func (r *Receiver) URL() string { return r.srv.URL }

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	refuse := func(why string, code int) {
		r.mu.Lock()
		r.bad = append(r.bad, why)
		r.mu.Unlock()
		http.Error(w, why, code)
	}
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		refuse(req.Method+" "+req.URL.Path, http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		refuse("content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		refuse(err.Error(), http.StatusBadRequest)
		return
	}
	var export coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		refuse("decoding the export: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range export.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{Service: service, Span: s})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.requests++
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Refused lists why requests were refused (a wrong path, content type or
// a body that does not decode).
func (r *Receiver) Refused() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}
