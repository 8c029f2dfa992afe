package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Problem is an error answer of the API (an RFC 9457 problem document).
type Problem struct {
	// Status is the HTTP status.
	Status int
	// Code is the stable word to switch on: in_flight, divergent,
	// no_leader, ... (see docs/problems.md).
	Code   string
	Title  string
	Detail string
	// Type is the URI of the code's documentation.
	Type string
	// Field names the offending request field of a bad-input problem.
	Field string
	// Intent is the record, when the answer carries it (in_flight,
	// in_doubt, divergent, fenced ...).
	Intent *Intent
	// RetryAfter says when a retry makes sense (in_flight: 1 s for an
	// owner's first refused attempt on a grant, doubling per attempt,
	// never past the holder's lease; 503s: a short pause). To learn the
	// outcome at once, long-poll the key (Wait), as Do does.
	RetryAfter time.Duration
	// Fingerprint is the recorded fingerprint and RequestFingerprint the
	// request's, on divergent answers.
	Fingerprint        string
	RequestFingerprint string
}

// problemWire is a problem document on the wire.
type problemWire struct {
	Type               string  `json:"type,omitempty"`
	Title              string  `json:"title"`
	Status             int     `json:"status"`
	Detail             string  `json:"detail,omitempty"`
	Code               string  `json:"code"`
	Field              string  `json:"field,omitempty"`
	Intent             *Intent `json:"intent,omitempty"`
	Fingerprint        string  `json:"fingerprint,omitempty"`
	RequestFingerprint string  `json:"request_fingerprint,omitempty"`
	RetryAfterMS       int64   `json:"retry_after_ms,omitempty"`
}

// Error says the status, the code, the title and the detail.
func (p *Problem) Error() string {
	msg := fmt.Sprintf("%d %s", p.Status, p.Code)
	if p.Title != "" {
		msg += ": " + p.Title
	}
	if p.Detail != "" {
		msg += ": " + p.Detail
	}
	return msg
}

// Is matches the sentinel errors by code, so errors.Is(err, ErrInFlight)
// works on a returned *Problem.
func (p *Problem) Is(target error) bool {
	codes, ok := sentinelCodes[target]
	return ok && slices.Contains(codes, p.Code)
}

// MarshalJSON renders p as the problem document it came from.
func (p *Problem) MarshalJSON() ([]byte, error) {
	return json.Marshal(problemWire{
		Type: p.Type, Title: p.Title, Status: p.Status, Detail: p.Detail, Code: p.Code, Field: p.Field,
		Intent: p.Intent, Fingerprint: p.Fingerprint, RequestFingerprint: p.RequestFingerprint,
		RetryAfterMS: p.RetryAfter.Milliseconds(),
	})
}

// retryable reports whether the same request may be sent again.
func (p *Problem) retryable() bool {
	switch p.Status {
	case http.StatusServiceUnavailable:
		return p.Code == "" || slices.Contains(retryableCodes, p.Code)
	case http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

// maybeApplied reports whether a write that got p may have been applied.
func (p *Problem) maybeApplied() bool {
	switch p.Status {
	case http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusInternalServerError:
		return true
	}
	return p.Code == "outcome_unknown"
}

// codeForStatus names a problem that came without a document (from a proxy,
// say) by its status.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthenticated"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusUnprocessableEntity:
		return "unprocessable"
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return "unavailable"
	}
	return ""
}

// maxProblemBytes bounds how much of an error answer is read.
const maxProblemBytes = 1 << 20

// readProblem decodes an error answer. A problem document without a code
// (from a proxy, say) keeps its type, title and detail and is named by its
// status, as is an answer without a document, whose body (cut) is the
// detail.
func readProblem(resp *http.Response) *Problem {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	p := &Problem{Status: resp.StatusCode}
	var w problemWire
	if err := json.Unmarshal(data, &w); err == nil && (w.Code != "" || w.Title != "" || w.Type != "") {
		p.Code, p.Title, p.Detail, p.Type, p.Field = w.Code, w.Title, w.Detail, w.Type, w.Field
		p.Intent, p.Fingerprint, p.RequestFingerprint = w.Intent, w.Fingerprint, w.RequestFingerprint
		p.RetryAfter = time.Duration(w.RetryAfterMS) * time.Millisecond
	} else {
		p.Detail = strings.TrimSpace(string(data))
		if len(p.Detail) > 200 {
			p.Detail = p.Detail[:200] + "..."
		}
	}
	if p.Code == "" {
		p.Code = codeForStatus(resp.StatusCode)
	}
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	if p.RetryAfter == 0 {
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			p.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	return p
}
