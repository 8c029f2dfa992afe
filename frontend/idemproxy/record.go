package idemproxy

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Headers the proxy adds.
const (
	// HeaderReplayed marks a replayed answer (the draft's name).
	HeaderReplayed = "Idempotency-Replayed"
	// HeaderStripeReplayed marks a replayed answer the way Stripe does.
	HeaderStripeReplayed = "Idempotent-Replayed"
	// HeaderBodyOmitted marks a replay whose body was too large to record.
	HeaderBodyOmitted = "Idempotency-Body-Omitted"
	// HeaderFencingToken carries the grant's fencing token to the upstream.
	HeaderFencingToken = "Intent-Fencing-Token"
	// HeaderExecutionToken carries the grant's execution token (gex_...)
	// to the upstream, which may verify and spend it with the ledger.
	HeaderExecutionToken = "Intent-Execution-Token"
)

// recordVersion is the "v" of every recorded response.
const recordVersion = 1

// Record is an upstream answer as the proxy records it in the ledger (the
// intent's result) and replays it.
type Record struct {
	V int `json:"v"`
	// Status is the upstream's HTTP status.
	Status int `json:"status"`
	// Header holds the end-to-end headers (hop-by-hop ones are dropped),
	// canonical names, field lines in order.
	Header http.Header `json:"header,omitempty"`
	// Body is a UTF-8 body as a string; BodyBase64 any other body.
	Body       *string `json:"body,omitempty"`
	BodyBase64 string  `json:"body_base64,omitempty"`
	// BodyOmitted says the body was too large to record; BodyBytes is its
	// length.
	BodyOmitted bool  `json:"body_omitted,omitempty"`
	BodyBytes   int64 `json:"body_bytes,omitempty"`
}

// ErrNotRecord: an intent's result is not a response the proxy recorded
// (an operator resolved the intent with another result, say).
var ErrNotRecord = errors.New("the intent's result is not a recorded response")

// EncodeRecord returns the result to record for an upstream answer of
// status and header whose body was total bytes long, of which body holds
// what was kept (all of it, or less when it was longer than the cap), in
// at most maxResult bytes (the
// ledger's --max-result-bytes). A body that does not fit is omitted: its
// status and headers are still recorded, and a replay says so with
// Idempotency-Body-Omitted: true.
func EncodeRecord(status int, header http.Header, body []byte, total int64, maxResult int) (json.RawMessage, error) {
	rec := Record{V: recordVersion, Status: status, Header: EndToEnd(header)}
	if int64(len(body)) == total {
		if total > 0 {
			if utf8.Valid(body) {
				s := string(body)
				rec.Body = &s
			} else {
				rec.BodyBase64 = base64.StdEncoding.EncodeToString(body)
			}
		}
		out, err := json.Marshal(rec)
		if err != nil {
			return nil, fmt.Errorf("encode record: %w", err)
		}
		if len(out) <= maxResult {
			return out, nil
		}
	}
	rec.Body, rec.BodyBase64 = nil, ""
	rec.BodyOmitted, rec.BodyBytes = true, total
	rec.Header.Del("Content-Length")
	out, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	if len(out) > maxResult {
		return nil, fmt.Errorf("the response's status and headers alone take %d bytes, over the ledger's result limit of %d", len(out), maxResult)
	}
	return out, nil
}

// DecodeRecord reads a recorded response back; ErrNotRecord when result
// is something else.
func DecodeRecord(result json.RawMessage) (*Record, error) {
	if len(result) == 0 {
		return nil, fmt.Errorf("%w: no result recorded", ErrNotRecord)
	}
	var rec Record
	if err := json.Unmarshal(result, &rec); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRecord, err)
	}
	if rec.V != recordVersion || rec.Status < 100 || rec.Status > 999 {
		return nil, fmt.Errorf("%w: no version %d status", ErrNotRecord, recordVersion)
	}
	return &rec, nil
}

// BodyBytesOf returns the recorded body (nil when omitted or empty).
func (r *Record) BodyBytesOf() ([]byte, error) {
	switch {
	case r.Body != nil:
		return []byte(*r.Body), nil
	case r.BodyBase64 != "":
		b, err := base64.StdEncoding.DecodeString(r.BodyBase64)
		if err != nil {
			return nil, fmt.Errorf("%w: body_base64: %w", ErrNotRecord, err)
		}
		return b, nil
	}
	return nil, nil
}

// Replay writes the recorded answer to w: the same status, headers and
// body bytes, plus Idempotency-Replayed: true and Idempotent-Replayed:
// true (and Idempotency-Body-Omitted: true when the body was not
// recorded).
func (r *Record) Replay(w http.ResponseWriter) error {
	body, err := r.BodyBytesOf()
	if err != nil {
		return err
	}
	h := w.Header()
	for k, vs := range r.Header {
		h[textproto.CanonicalMIMEHeaderKey(k)] = append([]string(nil), vs...)
	}
	h.Set(HeaderReplayed, "true")
	h.Set(HeaderStripeReplayed, "true")
	if r.BodyOmitted {
		h.Set(HeaderBodyOmitted, "true")
		h.Del("Content-Length")
	} else if len(h.Values("Content-Length")) > 0 {
		h.Set("Content-Length", strconv.Itoa(len(body))) // what it recorded, unless a record was edited
	}
	w.WriteHeader(r.Status)
	if len(body) > 0 {
		_, err = w.Write(body)
	}
	return err
}

// hopByHop are the headers that describe one connection, never recorded,
// replayed or forwarded (RFC 9110 section 7.6.1).
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// EndToEnd returns a copy of h without hop-by-hop headers, including those
// the Connection header names.
func EndToEnd(h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				out.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		out.Del(name)
	}
	return out
}
