package fsm

import "github.com/intentledger/intentd/internal/toolname"

// ToolGrammar describes the one spelling of a tool name
// (internal/toolname): lowercase segments joined by single dots. One
// spelling per tool is what lets a policy's pattern cover a tool: with
// "Payments.Refund", "payments.refund " and "payments.refund/x" refused,
// no spelling of a tool escapes the policy that names it.
const ToolGrammar = toolname.Grammar

// MaxToolBytes bounds a tool name.
const MaxToolBytes = toolname.MaxBytes

// ErrBadTool is a tool name outside ToolGrammar, or a policy pattern that
// could never match one.
var ErrBadTool = toolname.ErrInvalid

// ValidTool checks a tool name against ToolGrammar. The ledger checks it
// at its edge, before a claim is proposed; Apply does not, since the log
// holds claims made before the grammar and must replay as it was applied.
func ValidTool(name string) error { return toolname.Valid(name) }

// ValidToolPattern checks a policy's tool pattern: its literal characters
// must be of ToolGrammar's alphabet, so that it can match a tool name.
// Like ValidTool it is checked at the edge, not at apply time.
func ValidToolPattern(pattern string) error { return toolname.ValidPattern(pattern) }
