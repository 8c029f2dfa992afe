package mcpgate

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/intentledger/intentd/internal/toolname"
)

// PrefixSeparator joins an upstream's prefix and its tool's name:
// "pay__charge". Tool names of the MCP specification may hold letters,
// digits, '_', '-' and '.', so the separator keeps names valid; upstream
// names and prefixes may not contain it, so a downstream name splits one
// way only.
const PrefixSeparator = "__"

// StatusTool is the gate's own read-only tool: the state of a key a
// pending_approval or in_doubt answer named. Upstream tools of that
// downstream name are not listed.
const StatusTool = "intentd_status"

// effectivePrefix is the prefix of u's tools when the gate has n
// upstreams: u.Prefix when set, else u.Name when there are several
// upstreams (tool names must stay unique), else none.
func effectivePrefix(u Upstream, n int) string {
	if u.Prefix != nil {
		return *u.Prefix
	}
	if n > 1 {
		return u.Name
	}
	return ""
}

// DownstreamName is the name the host sees for tool of an upstream with
// prefix.
func DownstreamName(prefix, tool string) string {
	if prefix == "" {
		return tool
	}
	return prefix + PrefixSeparator + tool
}

// DefaultLedgerTool is the claims' tool for tool of upstream when no rule
// names one: "<upstream>.<tool>" in the ledger's tool grammar
// (LedgerToolName: "Pay", "createIssue" → "pay.createissue"). It does not
// change when prefixes do, so ledger policies ("pay.*", "pay.refund")
// stay valid when upstreams are added.
func DefaultLedgerTool(upstream, tool string) string { return LedgerToolName(upstream + "." + tool) }

// ErrBadTool is a ledger tool name outside the ledger's grammar
// (internal/toolname).
var ErrBadTool = toolname.ErrInvalid

// ValidLedgerTool checks a ledger tool name against the ledger's grammar,
// as the ledger does before it accepts a claim (400 otherwise).
func ValidLedgerTool(name string) error { return toolname.Valid(name) }

// LedgerToolName maps a name made of MCP names (which may hold upper case
// letters, and any byte an upstream sends) into the ledger's grammar (internal/toolname): ASCII letters
// lowered, any other byte outside [a-z0-9_-] turned into '_', a segment
// that is empty or starts with '_' or '-' prefixed with 'x', and a name
// over toolname.MaxBytes cut and ended with '_' and 32 hex digits of the
// SHA-256 of the whole. Names already in the grammar are unchanged.
// Two MCP tools that differ only in case share a ledger tool (and so its
// policies); their calls still never share a key's result, as the claim
// payload names the upstream's own tool name.
func LedgerToolName(name string) string {
	if ValidLedgerTool(name) == nil {
		return name
	}
	segs := strings.Split(name, ".")
	for i, seg := range segs {
		b := []byte(strings.ToLower(seg))
		for j, c := range b {
			if !toolname.Byte(c, false) {
				b[j] = '_'
			}
		}
		if len(b) == 0 || !toolname.Byte(b[0], true) {
			b = append([]byte{'x'}, b...)
		}
		segs[i] = string(b)
	}
	out := strings.Join(segs, ".")
	if len(out) > toolname.MaxBytes {
		sum := sha256.Sum256([]byte(name))
		out = strings.TrimRight(out[:toolname.MaxBytes-1-keyHashHex], ".") + "_" + hex.EncodeToString(sum[:])[:keyHashHex]
	}
	return out
}

// matchRule returns the first rule whose pattern matches the downstream
// name, or nil.
func matchRule(rules []ToolRule, name string) *ToolRule {
	for i := range rules {
		if ok, _ := path.Match(rules[i].Match, name); ok {
			return &rules[i]
		}
	}
	return nil
}

// Classify decides the mode of a tool: the rule's mode when it sets one,
// else the default mode when it is gate or pass, else (auto) from the
// annotations: a tool that says readOnlyHint passes through, every other
// tool is gated: one that says destructiveHint, one without annotations,
// and also one whose writes are only additive (destructiveHint false) or
// idempotent (idempotentHint), since a second ticket or a second email is
// a duplicate all the same. Annotations are hints from the upstream: a
// rule or default_mode "gate" overrides them for upstreams not trusted to
// label read-only tools truthfully.
func Classify(rule *ToolRule, defaultMode Mode, ann *mcp.ToolAnnotations) Mode {
	if rule != nil && rule.Mode != "" && rule.Mode != ModeAuto {
		return rule.Mode
	}
	if defaultMode == ModeGate || defaultMode == ModePass {
		return defaultMode
	}
	if ann != nil && ann.ReadOnlyHint {
		return ModePass
	}
	return ModeGate
}
