package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Request bodies. Unknown fields are refused, so a typo never silently
// drops a field.

type claimBody struct {
	Key     string          `json:"key"`
	Tool    string          `json:"tool"`
	Payload json.RawMessage `json:"payload"`
	Owner   string          `json:"owner"`
	Policy  string          `json:"policy"`
	LeaseMS int64           `json:"lease_ms"`
}

type completeBody struct {
	Owner        string          `json:"owner"`
	FencingToken uint64          `json:"fencing_token"`
	Outcome      string          `json:"outcome"`
	Result       json.RawMessage `json:"result"`
}

type renewBody struct {
	Owner        string `json:"owner"`
	FencingToken uint64 `json:"fencing_token"`
	LeaseMS      int64  `json:"lease_ms"`
}

type commitBody struct {
	Owner string `json:"owner"`
}

type resolveBody struct {
	Outcome string          `json:"outcome"`
	Result  json.RawMessage `json:"result"`
	Actor   string          `json:"actor"`
	Reason  string          `json:"reason"`
}

type decisionBody struct {
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
	// Fingerprint binds the decision to the payload the decider saw.
	Fingerprint string `json:"fingerprint"`
}

// decodeBody decodes exactly one JSON object from body into v, refusing
// unknown fields and trailing data. The problem names what is wrong.
func decodeBody(body []byte, v any) *problem {
	if len(bytes.TrimSpace(body)) == 0 {
		return newProblem(CodeBadRequest, "the request body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return newProblem(CodeBadRequest, describeJSONError(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return newProblem(CodeBadRequest, "unexpected data after the JSON object")
	}
	return nil
}

func describeJSONError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("expected a JSON object, got a JSON %s", typ.Value)
		}
		return fmt.Sprintf("field %q: expected %s, got a JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the body ends before the object does"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "malformed JSON: " + err.Error()
}

// jsonKind names a Go kind the way a JSON caller thinks of it.
func jsonKind(kind string) string {
	switch {
	case kind == "string":
		return "a string"
	case strings.HasPrefix(kind, "int"):
		return "an integer"
	case strings.HasPrefix(kind, "uint"):
		return "a non-negative integer"
	case kind == "slice":
		return "JSON"
	}
	return kind
}

// leaseOf converts lease_ms to a Duration, saturating instead of
// overflowing so an absurd value reaches the ledger's range check.
func leaseOf(ms int64) time.Duration {
	const maxMS = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > maxMS:
		return time.Duration(math.MaxInt64)
	case ms < -maxMS:
		return time.Duration(math.MinInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
