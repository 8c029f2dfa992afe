package mcpgate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/intentledger/intentd/client"
)

// KeySource says where a call's idempotency key came from.
type KeySource string

// The key sources, in the order the gate looks for them.
const (
	// SourceExplicit: the caller's key in _meta["dev.intentd/idempotencyKey"]
	// (or the SEP-3182 idempotencyKey field, lifted there by the gate).
	SourceExplicit KeySource = "explicit"
	// SourceHost: a host's call id, from one of the configured _meta keys
	// (claudecode/toolUseId ...).
	SourceHost KeySource = "host"
	// SourceDerived: a hash of the scope, upstream, tool and canonical
	// arguments inside a time window.
	SourceDerived KeySource = "derived"
)

// MaxExplicitKeyBytes is the longest explicit key or host call id.
const MaxExplicitKeyBytes = 255

// ErrBadKey is returned (wrapped) for an explicit key that is not a
// non-empty string of at most MaxExplicitKeyBytes bytes of UTF-8.
var ErrBadKey = errors.New("bad idempotency key")

// keyHashHex is how many hex digits of SHA-256 a derived key keeps (128
// bits).
const keyHashHex = 32

// KeyInput is what a call's key is found from.
type KeyInput struct {
	// Meta is the call's _meta.
	Meta map[string]any
	// Scope is the scope's parts: the configured scope, then a digest of the
	// caller's scope headers or session when so configured.
	Scope []string
	// Upstream, Tool (the upstream's name for it) and LedgerTool (the
	// claim's tool) name the tool.
	Upstream, Tool, LedgerTool string
	// Arguments is the canonical form of the arguments (CanonicalArguments).
	Arguments []byte
	// HostIDKeys are the _meta keys read as a host call id, in order.
	HostIDKeys []string
	// Derive allows a derived key; Window is its window and Now the time.
	Derive bool
	Window time.Duration
	Now    time.Time
}

// CallKey is a call's idempotency key.
type CallKey struct {
	Source KeySource
	// HostIDKey is the _meta key the host call id came from.
	HostIDKey string
	// Value is the explicit key or host call id; for a derived key, the
	// hash.
	Value string
	// Ledger is the ledger key claimed.
	Ledger string
	// WindowStart is the start of a derived key's window; Previous is the
	// ledger key the same call derived in the window before (see
	// call.slide).
	WindowStart time.Time
	Previous    string
}

// ResolveKey finds a call's key: the explicit key, else the first host
// call id present, else (when in.Derive) the derived key. ok is false when
// there is none (derivation off and no key sent): the call then passes
// through. A malformed explicit key is an error (ErrBadKey), never a
// reason to fall back: the caller meant to name the call. The JSON-RPC id
// is never a key: hosts re-issue a call with a new one.
//
// Ledger keys (client.KeyOf: ':' and '%' inside a part are escaped; the
// caller part is there for an authenticated caller, the digest with
// scope headers or session scope):
//
//	mcp:<scope>[:@<caller>][:<digest>]:k:<ledger tool>:<explicit key>
//	mcp:<scope>[:@<caller>][:<digest>]:h:<ledger tool>:<host call id>
//	mcp:<scope>[:@<caller>][:<digest>]:d:<ledger tool>:<window start, unix s>:<hash>
func ResolveKey(in KeyInput) (CallKey, bool, error) {
	if v, ok := in.Meta[MetaIdempotencyKey]; ok {
		s, isString := v.(string)
		switch {
		case !isString:
			return CallKey{}, false, fmt.Errorf("%w: _meta[%q] must be a string, not %s", ErrBadKey, MetaIdempotencyKey, jsonKind(v))
		case s == "":
			return CallKey{}, false, fmt.Errorf("%w: _meta[%q] is empty", ErrBadKey, MetaIdempotencyKey)
		case len(s) > MaxExplicitKeyBytes:
			return CallKey{}, false, fmt.Errorf("%w: _meta[%q] is %d bytes, over %d", ErrBadKey, MetaIdempotencyKey, len(s), MaxExplicitKeyBytes)
		case !utf8.ValidString(s):
			return CallKey{}, false, fmt.Errorf("%w: _meta[%q] is not UTF-8", ErrBadKey, MetaIdempotencyKey)
		}
		return CallKey{Source: SourceExplicit, Value: s, Ledger: ledgerKey(in.Scope, "k", in.LedgerTool, s)}, true, nil
	}
	for _, mk := range in.HostIDKeys {
		if id, ok := hostID(in.Meta[mk]); ok {
			return CallKey{Source: SourceHost, HostIDKey: mk, Value: id, Ledger: ledgerKey(in.Scope, "h", in.LedgerTool, id)}, true, nil
		}
	}
	if !in.Derive {
		return CallKey{}, false, nil
	}
	hash := derivedHash(in)
	start := windowStart(in.Now, in.Window)
	prev := start.Add(-in.Window)
	return CallKey{
		Source: SourceDerived, Value: hash, WindowStart: start,
		Ledger:   ledgerKey(in.Scope, "d", in.LedgerTool, strconv.FormatInt(start.Unix(), 10), hash),
		Previous: ledgerKey(in.Scope, "d", in.LedgerTool, strconv.FormatInt(prev.Unix(), 10), hash),
	}, true, nil
}

// hostID reads a host call id: a non-empty string of at most
// MaxExplicitKeyBytes bytes, or an integer. Anything else is no id (the
// gate looks further).
func hostID(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		if t != "" && len(t) <= MaxExplicitKeyBytes && utf8.ValidString(t) {
			return t, true
		}
	case float64:
		if t == math.Trunc(t) && !math.IsInf(t, 0) {
			return strconv.FormatFloat(t, 'f', -1, 64), true
		}
	case json.Number:
		// As the same JSON decoded to a float64 (what the SDK gives): an
		// integer, in the same spelling; "1.5" or "" is no id.
		if f, err := t.Float64(); err == nil {
			return hostID(f)
		}
	}
	return "", false
}

// windowStart is the start of the window of length w that holds now:
// floor(now/w)·w, on the Unix epoch.
func windowStart(now time.Time, w time.Duration) time.Time {
	ms := w.Milliseconds()
	t := now.UnixMilli()
	b := t / ms
	if t < 0 && t%ms != 0 {
		b--
	}
	return time.UnixMilli(b * ms).UTC()
}

// derivedHash is 32 hex digits of the SHA-256 of the JSON array [version,
// scope parts..., upstream, tool, canonical arguments].
func derivedHash(in KeyInput) string {
	parts := make([]any, 0, len(in.Scope)+4)
	parts = append(parts, "intent-mcp/derived/v1")
	for _, s := range in.Scope {
		parts = append(parts, s)
	}
	parts = append(parts, in.Upstream, in.Tool, json.RawMessage(in.Arguments))
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:keyHashHex]
}

// ledgerKeyPrefix is the first part of every ledger key the gate makes.
const ledgerKeyPrefix = "mcp"

// LedgerKeyPrefix starts every ledger key the gate claims. The ledger's
// keys file reserves it to the gate's own API key ("key_prefixes":
// ["mcp:"]), so no other key can claim (and so complete) a key whose
// recorded result the gate replays.
const LedgerKeyPrefix = ledgerKeyPrefix + client.KeySeparator

// ledgerKey joins "mcp", the scope parts, the source letter and the rest
// into a ledger key.
func ledgerKey(scope []string, source string, rest ...string) string {
	parts := make([]string, 0, 2+len(scope)+len(rest))
	parts = append(parts, ledgerKeyPrefix)
	parts = append(parts, scope...)
	parts = append(parts, source)
	parts = append(parts, rest...)
	return client.KeyOf(parts...)
}

// ScopeDigest is 32 hex digits of the SHA-256 of what scopes a caller:
// the named headers' values (every field line, in order) and the session
// id.
func ScopeDigest(header http.Header, names []string, session string) string {
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\n", http.CanonicalHeaderKey(n))
		for _, v := range header.Values(n) {
			fmt.Fprintf(h, "\t%q\n", v)
		}
	}
	fmt.Fprintf(h, "session %q\n", session)
	return hex.EncodeToString(h.Sum(nil))[:keyHashHex]
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
