package fsm

import (
	"errors"
	"fmt"
	"strings"
)

// ToolGrammar describes the one spelling of a tool name: lowercase ASCII
// segments of letters, digits, '_' and '-', each starting with a letter or
// digit, joined by single dots ("payments.refund", "github.create_issue").
// One spelling per tool is what lets a policy's pattern cover a tool: with
// "Payments.Refund", "payments.refund " and "payments.refund/x" refused,
// no spelling of a tool escapes the policy that names it.
const ToolGrammar = `lowercase segments [a-z0-9][a-z0-9_-]* joined by single dots`

// MaxToolBytes bounds a tool name.
const MaxToolBytes = 256

// ErrBadTool is a tool name outside ToolGrammar, or a policy pattern that
// could never match one.
var ErrBadTool = errors.New("invalid tool name")

// ValidTool checks a tool name against ToolGrammar. The ledger checks it
// at its edge, before a claim is proposed; Apply does not, since the log
// holds claims made before the grammar and must replay as it was applied.
func ValidTool(name string) error {
	if name == "" || len(name) > MaxToolBytes {
		return fmt.Errorf("%w: %q must be 1 to %d bytes of %s", ErrBadTool, name, MaxToolBytes, ToolGrammar)
	}
	for _, seg := range strings.Split(name, ".") {
		if seg == "" {
			return fmt.Errorf("%w: %q has an empty segment; a tool name is %s", ErrBadTool, name, ToolGrammar)
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (i > 0 && (c == '_' || c == '-'))
			if !ok {
				hint := ""
				if lower := strings.ToLower(strings.TrimSpace(name)); lower != name && ValidTool(lower) == nil {
					hint = fmt.Sprintf(" (did you mean %q?)", lower)
				}
				return fmt.Errorf("%w: %q: byte %q is not allowed here; a tool name is %s%s", ErrBadTool, name, c, ToolGrammar, hint)
			}
		}
	}
	return nil
}

// ValidToolPattern checks a policy's tool pattern: a path.Match pattern
// whose literal characters are of ToolGrammar's alphabet, so that it can
// match a tool name (a pattern with "Payments" or "/" never would, and an
// operator who wrote one would believe a tool covered that is not).
// Like ValidTool it is checked at the edge, not at apply time.
func ValidToolPattern(pattern string) error {
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		case c == '*', c == '?', c == '[', c == ']', c == '^', c == '!', c == '\\':
		default:
			return fmt.Errorf("%w: pattern %q: byte %q can never match a tool name (%s)", ErrBadTool, pattern, c, ToolGrammar)
		}
	}
	return nil
}
