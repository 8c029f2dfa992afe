package mcpgate

import (
	"context"
	"strings"

	"github.com/intentledger/intentd/client"
)

// The _meta keys the gate reads and writes. They use the reverse-DNS
// prefix dev.intentd/, as the MCP specification asks of _meta keys that
// are not the protocol's own.
const (
	// MetaIdempotencyKey, in a tools/call's _meta, is the caller's explicit
	// idempotency key for the call (a string of 1..255 bytes). On the
	// upstream call the gate sets it to the ledger key, so an upstream that
	// deduplicates by key itself agrees with the ledger.
	MetaIdempotencyKey = "dev.intentd/idempotencyKey"
	// MetaReplayed is true on a result replayed from the ledger (the call
	// ran before; nothing ran now).
	MetaReplayed = "dev.intentd/replayed"
	// MetaKey is the ledger key of a gated call, on every answer about it.
	MetaKey = "dev.intentd/key"
	// MetaKeySource says where the key came from: explicit, host or
	// derived.
	MetaKeySource = "dev.intentd/keySource"
	// MetaRecorded is false on a result the upstream gave whose recording
	// in the ledger failed (it could not be reached for ReportTimeout): the
	// call ran, but a retry will find the key in doubt, not this result.
	MetaRecorded = "dev.intentd/recorded"
	// MetaFencingToken and MetaExecutionToken carry the grant's fencing
	// token (strictly increasing per key) and signed execution token to the
	// upstream.
	MetaFencingToken   = "dev.intentd/fencingToken"
	MetaExecutionToken = "dev.intentd/executionToken"
	// MetaGate, on a listed tool, says what the gate does with its calls
	// (gate or pass).
	MetaGate = "dev.intentd/gate"
	// MetaTraceparent and MetaTracestate, in a tools/call's _meta, are the
	// caller's W3C trace context (the keys MCP hosts and SDKs use for
	// it): the gate sends it with its ledger calls and, as every other
	// key of the caller's _meta, on to the upstream.
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// withTrace returns ctx carrying the trace context a tools/call's _meta
// names, for the ledger calls made under it (the SDK sends it); ctx
// unchanged when there is none or it is malformed.
func withTrace(ctx context.Context, meta map[string]any) context.Context {
	tp, _ := meta[MetaTraceparent].(string)
	if tp == "" {
		return ctx
	}
	ts, _ := meta[MetaTracestate].(string)
	return client.WithTraceparent(ctx, tp, ts)
}

// DefaultHostIDKeys are the _meta keys read as a host's call id when the
// configuration names none: the ids hosts are known to send with
// tools/call.
var DefaultHostIDKeys = []string{"claudecode/toolUseId"}

const (
	// reservedMetaPrefix is the protocol's own _meta namespace: the
	// protocol version, client and server info and capabilities of the
	// 2026-07-28 protocol. They describe one hop, so the gate never copies
	// them from one side to the other.
	reservedMetaPrefix = "io.modelcontextprotocol/"
	// gateMetaPrefix is the gate's own namespace: what a caller or an
	// upstream puts there is not passed on (an upstream cannot mark its
	// answer replayed, a caller cannot set the fencing token).
	gateMetaPrefix = "dev.intentd/"
	// progressTokenKey is the _meta key of a request's progress token; the
	// gate gives upstream calls tokens of its own.
	progressTokenKey = "progressToken"
)

// hopMeta reports whether a _meta key belongs to one hop and is never
// copied across the gate.
func hopMeta(k string) bool {
	return strings.HasPrefix(k, reservedMetaPrefix) || strings.HasPrefix(k, gateMetaPrefix) || k == progressTokenKey
}

// forwardMeta is the _meta of a call as the gate passes it on: every key
// but the hop's own (protocol, gate, progress token). It returns nil for
// nothing left.
func forwardMeta(m map[string]any) map[string]any {
	var out map[string]any
	for k, v := range m {
		if hopMeta(k) {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(m))
		}
		out[k] = v
	}
	return out
}

// withMeta returns m with the pairs kv set (a new map when m is nil).
func withMeta(m map[string]any, kv ...any) map[string]any {
	if m == nil {
		m = make(map[string]any, len(kv)/2)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}
