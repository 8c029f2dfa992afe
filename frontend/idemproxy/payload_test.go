package idemproxy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// ledgerFingerprint is the fingerprint the ledger computes for a claim of
// tool with payload: the property the payload exists for.
func ledgerFingerprint(t *testing.T, tool string, payload []byte) string {
	t.Helper()
	_, fp, err := fsm.Fingerprint(tool, payload)
	if err != nil {
		t.Fatalf("the ledger refuses the payload %s: %v", payload, err)
	}
	return fp
}

func TestBuildPayload(t *testing.T) {
	jsonReq := func(body string) Request {
		return Request{Method: "POST", Path: "/v1/charges", ContentType: "application/json", Body: []byte(body), Header: http.Header{}}
	}
	build := func(req Request, headers ...string) string {
		t.Helper()
		p, err := BuildPayload(req, headers, DefaultMaxPayload)
		if err != nil {
			t.Fatal(err)
		}
		return ledgerFingerprint(t, "tool", p)
	}

	base := build(jsonReq(`{"amount":1299,"currency":"usd","meta":{"a":1,"b":[1,2]}}`))
	same := []Request{
		jsonReq(`{"currency":"usd","meta":{"b":[1,2],"a":1},"amount":1299}`),                                 // keys reordered
		jsonReq("{\n  \"amount\": 1299.0,\n  \"currency\": \"usd\", \"meta\": {\"a\": 1e0, \"b\": [1, 2]}}"), // whitespace, number spelling
		jsonReq(`{"amount":1299,"currency":"\u0075sd","meta":{"a":1,"b":[1,2]}}`),                            // string escapes
	}
	ct := jsonReq(`{"amount":1299,"currency":"usd","meta":{"a":1,"b":[1,2]}}`)
	ct.ContentType = "application/merchant+json; charset=utf-8"
	same = append(same, ct)
	for i, r := range same {
		if got := build(r); got != base {
			t.Errorf("equal JSON %d has another fingerprint: %s", i, r.Body)
		}
	}

	differ := map[string]Request{
		"amount":      jsonReq(`{"amount":9999,"currency":"usd","meta":{"a":1,"b":[1,2]}}`),
		"array order": jsonReq(`{"amount":1299,"currency":"usd","meta":{"a":1,"b":[2,1]}}`),
		"text type":   {Method: "POST", Path: "/v1/charges", ContentType: "text/plain", Body: []byte(`{"amount":1299,"currency":"usd","meta":{"a":1,"b":[1,2]}}`)},
	}
	m := jsonReq(`{"amount":1299,"currency":"usd","meta":{"a":1,"b":[1,2]}}`)
	m.Method = "PUT"
	differ["method"] = m
	p := jsonReq(`{"amount":1299,"currency":"usd","meta":{"a":1,"b":[1,2]}}`)
	p.Path = "/v1/charges/x"
	differ["path"] = p
	q := jsonReq(`{"amount":1299,"currency":"usd","meta":{"a":1,"b":[1,2]}}`)
	q.Query = "expand=customer"
	differ["query"] = q
	for name, r := range differ {
		if build(r) == base {
			t.Errorf("%s: a different request has the same fingerprint", name)
		}
	}

	// Non-JSON bodies count byte for byte.
	bin := func(b string) Request {
		return Request{Method: "POST", Path: "/upload", ContentType: "application/octet-stream", Body: []byte(b), Header: http.Header{}}
	}
	if build(bin("\x00\x01\xff")) == build(bin("\x00\x01\xfe")) || build(bin("a b")) == build(bin("a  b")) {
		t.Error("different bytes, same fingerprint")
	}
	if build(bin("\x00\x01\xff")) != build(bin("\x00\x01\xff")) {
		t.Error("same bytes, another fingerprint")
	}
	// JSON that is not valid is bytes too, and so is JSON the ledger would
	// refuse (an integer beyond 2^53), which must still be claimable.
	for _, body := range []string{`{"a":`, `{"id":12345678901234567890}`} {
		payload, err := BuildPayload(jsonReq(body), nil, DefaultMaxPayload)
		if err != nil || !strings.Contains(string(payload), `"body_base64"`) {
			t.Errorf("%s: payload %s, %v; want body_base64", body, payload, err)
		}
		ledgerFingerprint(t, "tool", payload)
	}
	if build(jsonReq(`{"id":12345678901234567890}`)) == build(jsonReq(`{"id":12345678901234567891}`)) {
		t.Error("two big IDs share a fingerprint")
	}

	// Fingerprint headers: only the named ones count, in any case.
	hr := func(h http.Header) Request {
		r := jsonReq(`{}`)
		r.Header = h
		return r
	}
	a := build(hr(http.Header{"X-Account": {"acct_1"}, "X-Trace": {"1"}}), "X-Account")
	if a != build(hr(http.Header{"X-Account": {"acct_1"}, "X-Trace": {"2"}}), "X-Account") {
		t.Error("a header not named changed the fingerprint")
	}
	if a == build(hr(http.Header{"X-Account": {"acct_2"}}), "X-Account") {
		t.Error("the named header did not count")
	}
	if a == build(hr(http.Header{}), "X-Account") {
		t.Error("a missing named header did not count")
	}

	// The payload is what the docs say, canonical.
	got, err := BuildPayload(Request{Method: "POST", Path: "/v1/charges", Query: "a=1", ContentType: "application/json",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"b":2, "a":"<&>"}`)}, []string{"Content-Type"}, DefaultMaxPayload)
	want := `{"headers":{"content-type":["application/json"]},"json":{"a":"<&>","b":2},"method":"POST","path":"/v1/charges","query":"a=1","v":1}`
	if err != nil || string(got) != want {
		t.Errorf("payload\n got %s, %v\nwant %s", got, err, want)
	}
	empty, _ := BuildPayload(Request{Method: "DELETE", Path: "/x"}, nil, DefaultMaxPayload)
	if string(empty) != `{"method":"DELETE","path":"/x","v":1}` {
		t.Errorf("empty body payload %s", empty)
	}
}

func TestBuildPayloadOverTheLedgerCap(t *testing.T) {
	const max = 1024
	big := `{"blob":"` + strings.Repeat("x", 2000) + `","n":1}`
	reordered := `{"n":1,"blob":"` + strings.Repeat("x", 2000) + `"}`
	mk := func(ct, body string) Request {
		return Request{Method: "POST", Path: "/p", ContentType: ct, Body: []byte(body)}
	}
	a, err := BuildPayload(mk("application/json", big), nil, max)
	if err != nil || len(a) > max || !strings.Contains(string(a), `"json_sha256"`) {
		t.Fatalf("large JSON: %s, %v", a, err)
	}
	b, _ := BuildPayload(mk("application/json", reordered), nil, max)
	if string(a) != string(b) {
		t.Error("large JSON reordered: another payload")
	}
	c, _ := BuildPayload(mk("application/json", strings.Replace(big, `"n":1`, `"n":2`, 1)), nil, max)
	if string(a) == string(c) {
		t.Error("large JSON changed: same payload")
	}
	d, err := BuildPayload(mk("application/octet-stream", strings.Repeat("\x01", 900)), nil, max)
	if err != nil || len(d) > max || !strings.Contains(string(d), `"body_sha256"`) {
		t.Fatalf("large bytes (base64 would not fit): %s, %v", d, err)
	}
	var w map[string]any
	if json.Unmarshal(d, &w) != nil {
		t.Fatal("not JSON")
	}
	if _, err := BuildPayload(Request{Method: "POST", Path: "/" + strings.Repeat("p", max)}, nil, max); err == nil {
		t.Error("a path over the cap: want an error")
	}
}
