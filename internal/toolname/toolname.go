// Package toolname is the one spelling of a tool name: the ledger checks
// claims and policy patterns against it, and the front ends (intent-proxy,
// intent-mcp) check the names they send, or map MCP names into it.
package toolname

import (
	"errors"
	"fmt"
	"strings"
)

// Grammar describes the one spelling of a tool name: lowercase ASCII
// segments of letters, digits, '_' and '-', each starting with a letter or
// digit, joined by single dots ("payments.refund", "github.create_issue").
// One spelling per tool is what lets a policy's pattern cover a tool: with
// "Payments.Refund", "payments.refund " and "payments.refund/x" refused,
// no spelling of a tool escapes the policy that names it.
const Grammar = `lowercase segments [a-z0-9][a-z0-9_-]* joined by single dots`

// MaxBytes bounds a tool name.
const MaxBytes = 256

// ErrInvalid is a tool name outside Grammar, or a policy pattern that
// could never match one.
var ErrInvalid = errors.New("invalid tool name")

// Valid checks a tool name against Grammar.
func Valid(name string) error {
	if name == "" || len(name) > MaxBytes {
		return fmt.Errorf("%w: %q must be 1 to %d bytes of %s", ErrInvalid, name, MaxBytes, Grammar)
	}
	for _, seg := range strings.Split(name, ".") {
		if seg == "" {
			return fmt.Errorf("%w: %q has an empty segment; a tool name is %s", ErrInvalid, name, Grammar)
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			ok := Byte(c, i == 0)
			if !ok {
				hint := ""
				if lower := strings.ToLower(strings.TrimSpace(name)); lower != name && Valid(lower) == nil {
					hint = fmt.Sprintf(" (did you mean %q?)", lower)
				}
				return fmt.Errorf("%w: %q: byte %q is not allowed here; a tool name is %s%s", ErrInvalid, name, c, Grammar, hint)
			}
		}
	}
	return nil
}

// ValidPattern checks a policy's tool pattern: a path.Match pattern
// whose literal characters are of Grammar's alphabet, so that it can
// match a tool name (a pattern with "Payments" or "/" never would, and an
// operator who wrote one would believe a tool covered that is not).
func ValidPattern(pattern string) error {
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		case c == '*', c == '?', c == '[', c == ']', c == '^', c == '!', c == '\\':
		default:
			return fmt.Errorf("%w: pattern %q: byte %q can never match a tool name (%s)", ErrInvalid, pattern, c, Grammar)
		}
	}
	return nil
}

// Byte reports whether c may stand in a segment of a tool name (first: at
// the segment's start).
func Byte(c byte, first bool) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || !first && (c == '_' || c == '-')
}
