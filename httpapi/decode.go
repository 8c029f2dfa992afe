package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
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
// unknown fields and trailing data, and first any text that is not valid
// UTF-8 (checkText). The problem names what is wrong.
func decodeBody(body []byte, v any) *problem {
	if len(bytes.TrimSpace(body)) == 0 {
		return newProblem(CodeBadRequest, "the request body is empty; expected a JSON object")
	}
	if p := checkText(body); p != nil {
		return p
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

// checkText refuses a JSON body that is not valid UTF-8 (stray bytes,
// overlong or surrogate encodings) or whose strings hold a \u escape of a
// lone UTF-16 surrogate. encoding/json would decode both to U+FFFD, so two
// different keys (or payloads) would silently become one; JCS refuses them
// in the payload, and the rest of a body must not be laxer. The problem
// names the top-level member the bad text is in, when there is one.
func checkText(body []byte) *problem {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u`)) {
		return nil // the common case, checked fast
	}
	var (
		depth    int    // nesting of objects and arrays
		inTop    bool   // the outermost value is an object
		wantName bool   // the next string at depth 1 is a member name
		field    string // the top-level member being scanned
		inString bool
		isName   bool // the string being scanned is a top-level member name
		start    int  // where that string's contents begin
	)
	bad := func(what string) *problem {
		switch {
		case isName:
			return newProblem(CodeBadRequest, "a member name "+what)
		case field == "":
			return newProblem(CodeBadRequest, "the request body "+what)
		}
		p := newProblem(CodeBadRequest, fmt.Sprintf("field %q %s", field, what))
		p.Field = field
		return p
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size == 1 {
				return bad(fmt.Sprintf("is not valid UTF-8 (byte 0x%02x at offset %d)", c, i))
			}
			i += size - 1
			continue
		}
		if inString {
			switch c {
			case '"':
				inString = false
				if isName {
					field, isName = memberName(body[start:i]), false
				}
			case '\\':
				n, msg := checkEscape(body[i:])
				if msg != "" {
					return bad(msg)
				}
				i += n - 1
			}
			continue
		}
		switch c {
		case '"':
			inString, start = true, i+1
			isName = depth == 1 && inTop && wantName
		case '{', '[':
			if depth == 0 {
				inTop = c == '{'
			}
			depth++
			wantName = depth == 1 && inTop
		case '}', ']':
			depth--
		case ':':
			if depth == 1 {
				wantName = false
			}
		case ',':
			if depth == 1 && inTop {
				wantName, field = true, ""
			}
		}
	}
	return nil
}

// checkEscape checks the escape at the start of s (a backslash) and
// returns its length: a \u escape of a high surrogate must be followed by
// one of a low surrogate (the pair is one character), and a low surrogate
// must not stand alone. It returns what is wrong, or "" (also for
// malformed escapes, which the decoder reports).
func checkEscape(s []byte) (n int, msg string) {
	u, ok := hex4(s)
	switch {
	case !ok:
		if len(s) > 1 && s[1] < utf8.RuneSelf {
			return 2, "" // \n, \", ...; a non-ASCII byte is checked as UTF-8
		}
		return 1, ""
	case !utf16.IsSurrogate(rune(u)):
		return 6, ""
	case u >= 0xdc00:
		return 6, fmt.Sprintf(`holds \u%04x, a lone UTF-16 low surrogate (not a character)`, u)
	}
	if lo, ok := hex4(s[6:]); !ok || lo < 0xdc00 || lo > 0xdfff {
		return 6, fmt.Sprintf(`holds \u%04x, a UTF-16 high surrogate without a low one (not a character)`, u)
	}
	return 12, ""
}

// hex4 reads the 4 hex digits of a \u escape at the start of s.
func hex4(s []byte) (uint16, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s[2:6]), 16, 16)
	return uint16(n), err == nil
}

// memberName is the text of a member name as checkText names it in a
// problem: the name decoded, or as written if it does not decode.
func memberName(raw []byte) string {
	var name string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &name); err != nil {
		return string(raw)
	}
	return name
}

// requireUTF8 is the middleware that refuses, with 400 bad_request, an
// intent key in the path (as keyParam decodes it) or in the
// Idempotency-Key header that is not valid UTF-8; checkText does the same
// for bodies.
func (s *Server) requireUTF8(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Param("key") != "" {
			if key, p := keyParam(c); p == nil && !utf8.ValidString(key) {
				p := newProblem(CodeBadRequest, "the intent key in the path is not valid UTF-8")
				p.Field = "key"
				return s.writeProblem(c, p)
			}
		}
		for _, v := range c.Request().Header.Values(HeaderIdempotencyKey) {
			if !utf8.ValidString(v) {
				p := newProblem(CodeBadRequest, "the "+HeaderIdempotencyKey+" header is not valid UTF-8")
				p.Field = "key"
				return s.writeProblem(c, p)
			}
		}
		return next(c)
	}
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
