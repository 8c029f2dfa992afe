package idemproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestUpstreamRequest(t *testing.T) {
	in := httptest.NewRequest("POST", "http://proxy.example/v1/charges?expand=x", strings.NewReader(`{"a":1}`))
	in.RemoteAddr = "10.0.0.7:5555"
	in.Header = http.Header{
		"Idempotency-Key":     {`"k"`},
		"X-Idempotency-Key":   {"k2"},
		"Content-Type":        {"application/json"},
		"Connection":          {"X-Hop"},
		"X-Hop":               {"1"},
		"Expect":              {"100-continue"},
		"X-Forwarded-For":     {"6.6.6.6"},
		HeaderFencingToken:    {"999"},
		HeaderExecutionToken:  {"forged"},
		"X-Keep":              {"yes"},
		"Proxy-Authorization": {"secret"},
	}
	target, _ := url.Parse("http://upstream.internal:9000/base")
	body := []byte(`{"a":1}`)
	out := upstreamRequest(in.Context(), in, target, body, grantHeaders{fencingToken: 42, executionToken: "gex_abc"})

	if out.URL.String() != "http://upstream.internal:9000/base/v1/charges?expand=x" || out.Host != "upstream.internal:9000" || out.RequestURI != "" {
		t.Errorf("target %s host %s", out.URL, out.Host)
	}
	h := out.Header
	if h.Get(HeaderFencingToken) != "42" || h.Get(HeaderExecutionToken) != "gex_abc" || len(h.Values(HeaderFencingToken)) != 1 {
		t.Errorf("grant headers %v", h)
	}
	for _, gone := range []string{"Connection", "X-Hop", "Expect", "Proxy-Authorization"} {
		if h.Get(gone) != "" {
			t.Errorf("%s forwarded", gone)
		}
	}
	if h.Get("X-Forwarded-For") != "10.0.0.7" || h.Get("X-Keep") != "yes" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
	// Not replayable by net/http's Transport: no GetBody, and the
	// idempotency headers under names its check does not see.
	if out.GetBody != nil {
		t.Error("GetBody set: the Transport may re-send the request")
	}
	for _, name := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		if _, ok := h[name]; ok {
			t.Errorf("%s under its canonical name: the Transport would treat the request as replayable", name)
		}
	}
	if h["idempotency-key"][0] != `"k"` || h["x-idempotency-key"][0] != "k2" {
		t.Errorf("idempotency headers not kept: %v", h)
	}
	got, _ := io.ReadAll(out.Body)
	if string(got) != string(body) || out.ContentLength != int64(len(body)) {
		t.Errorf("body %q (%d)", got, out.ContentLength)
	}
	if in.Header.Get("Idempotency-Key") != `"k"` {
		t.Error("the client's request was changed")
	}
}
