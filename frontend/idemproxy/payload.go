package idemproxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/gowebpki/jcs"
	"github.com/intentledger/intentd/internal/jsonexact"
)

// payloadVersion is the "v" of every claim payload: a later change of the
// shape bumps it (and so changes every fingerprint, on purpose).
const payloadVersion = 1

// Request is what the fingerprint of a request is made of.
type Request struct {
	Method string
	// Path is the request's path as sent (escaped), Query its raw query
	// string as sent: "?b=2&a=1" and "?a=1&b=2" differ.
	Path  string
	Query string
	// Header holds the request's headers; only those the route names in
	// fingerprint_headers are used.
	Header      http.Header
	ContentType string
	Body        []byte
}

// payloadWire is the claim payload. The ledger fingerprints the RFC 8785
// canonical form of {"tool": ..., "payload": this}.
type payloadWire struct {
	V      int    `json:"v"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	// Headers are the fingerprint headers the request carries, by lower-case
	// name, each with its field lines in order.
	Headers map[string][]string `json:"headers,omitempty"`
	// JSON is a JSON body as a JSON value (the ledger canonicalizes it, so
	// key order, whitespace and number spelling do not count).
	JSON json.RawMessage `json:"json,omitempty"`
	// JSONSHA256 replaces JSON when the payload would be over the ledger's
	// cap: the hex SHA-256 of the body's canonical form.
	JSONSHA256 string `json:"json_sha256,omitempty"`
	// BodyBase64 is any other body, byte for byte.
	BodyBase64 string `json:"body_base64,omitempty"`
	// BodySHA256 replaces BodyBase64 when the payload would be over the
	// ledger's cap.
	BodySHA256 string `json:"body_sha256,omitempty"`
}

// BuildPayload returns the claim payload of req on a route that includes
// fingerprintHeaders, as canonical JSON (RFC 8785) of at most maxPayload
// bytes, so that the ledger's fingerprint of it is the request's
// fingerprint:
//
//	{"v":1,"method":"POST","path":"/v1/charges","query":"expand=x",
//	 "headers":{"content-type":["application/json"]},"json":{"amount":1299}}
//
// A body whose Content-Type is JSON (application/json, anything+json) and
// that parses as JSON is sent as a JSON value under "json": equal JSON
// with keys in another order, other whitespace or number spellings is the
// same request. Any other body (and JSON with an integer beyond ±2^53,
// which the ledger refuses to canonicalize) goes byte for byte as
// "body_base64". When the payload would be over maxPayload (the ledger's
// --max-payload-bytes), the body is replaced by the SHA-256 of its
// canonical form ("json_sha256") or of its bytes ("body_sha256"): still
// one fingerprint per request, but the ledger then no longer holds the
// body itself. An empty body has no body field.
func BuildPayload(req Request, fingerprintHeaders []string, maxPayload int) (json.RawMessage, error) {
	w := payloadWire{V: payloadVersion, Method: req.Method, Path: req.Path, Query: req.Query}
	for _, name := range fingerprintHeaders {
		if vs := req.Header.Values(name); len(vs) > 0 {
			if w.Headers == nil {
				w.Headers = map[string][]string{}
			}
			w.Headers[strings.ToLower(name)] = vs
		}
	}
	var canonical []byte
	if len(req.Body) > 0 && isJSONType(req.ContentType) {
		canonical = canonicalJSON(req.Body)
	}
	switch {
	case canonical != nil:
		w.JSON = canonical
	case len(req.Body) > 0:
		w.BodyBase64 = base64.StdEncoding.EncodeToString(req.Body)
	}
	out, err := encodePayload(w)
	if err != nil {
		return nil, err
	}
	if len(out) <= maxPayload {
		return out, nil
	}
	// Too large for the ledger: fingerprint the body by its digest.
	if canonical != nil {
		sum := sha256.Sum256(canonical)
		w.JSON, w.JSONSHA256 = nil, hex.EncodeToString(sum[:])
	} else {
		sum := sha256.Sum256(req.Body)
		w.BodyBase64, w.BodySHA256 = "", hex.EncodeToString(sum[:])
	}
	if out, err = encodePayload(w); err != nil {
		return nil, err
	}
	if len(out) > maxPayload {
		return nil, fmt.Errorf("the request's method, path, query and fingerprint headers alone take %d bytes, over the ledger's payload limit of %d", len(out), maxPayload)
	}
	return out, nil
}

// encodePayload writes w in RFC 8785 canonical form.
func encodePayload(w payloadWire) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	out, err := jcs.Transform(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("canonicalize payload: %w", err)
	}
	return out, nil
}

// isJSONType reports whether a Content-Type is JSON: application/json or
// a +json structured syntax suffix.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// canonicalJSON returns the RFC 8785 form of body, or nil when body is not
// JSON the ledger canonicalizes the same way (not JSON, or an integer a
// double cannot hold exactly).
func canonicalJSON(body []byte) []byte {
	if _, inexact := jsonexact.Inexact(body); !json.Valid(body) || inexact {
		return nil
	}
	c, err := jcs.Transform(body)
	if err != nil {
		return nil
	}
	return c
}
