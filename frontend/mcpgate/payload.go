package mcpgate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// payloadVersion is the "v" of every claim payload; a change of the shape
// bumps it.
const payloadVersion = 1

// Payload is the claim payload of a gated call. The ledger fingerprints
// the canonical form of {"tool": <ledger tool>, "payload": this}, so two
// calls under one key are the same call exactly when upstream, tool, key
// source and canonical arguments agree, and the ledger holds a readable
// copy of the call:
//
//	{"v":1,"upstream":"pay","tool":"charge","key_source":"explicit","arguments":{"amount":1299,"order":"o-91"}}
type Payload struct {
	V        int    `json:"v"`
	Upstream string `json:"upstream"`
	Tool     string `json:"tool"`
	// KeySource is explicit, derived, or host:<the _meta key>.
	KeySource string `json:"key_source"`
	// Arguments are the canonical arguments as a JSON value.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsJSON replaces Arguments when they hold a number the ledger
	// cannot fingerprint exactly (an integer beyond ±2^53): the canonical
	// text as a string.
	ArgumentsJSON string `json:"arguments_json,omitempty"`
	// ArgumentsSHA256 replaces both when the payload would be over the
	// ledger's cap: the hex SHA-256 of the canonical text.
	ArgumentsSHA256 string `json:"arguments_sha256,omitempty"`
}

// keySourceLabel is the payload's key_source of k.
func keySourceLabel(k CallKey) string {
	if k.Source == SourceHost {
		return string(SourceHost) + ":" + k.HostIDKey
	}
	return string(k.Source)
}

// BuildPayload returns the claim payload of a call to tool of upstream
// under key k with canonical arguments (exact as CanonicalArguments
// said), at most maxPayload bytes.
func BuildPayload(upstream, tool string, k CallKey, canonical []byte, exact bool, maxPayload int) (json.RawMessage, error) {
	p := Payload{V: payloadVersion, Upstream: upstream, Tool: tool, KeySource: keySourceLabel(k)}
	if exact {
		p.Arguments = canonical
	} else {
		p.ArgumentsJSON = string(canonical)
	}
	out, err := encodePayload(p)
	if err != nil {
		return nil, err
	}
	if len(out) <= maxPayload {
		return out, nil
	}
	sum := sha256.Sum256(canonical)
	p.Arguments, p.ArgumentsJSON, p.ArgumentsSHA256 = nil, "", hex.EncodeToString(sum[:])
	if out, err = encodePayload(p); err != nil {
		return nil, err
	}
	if len(out) > maxPayload {
		return nil, fmt.Errorf("the claim payload takes %d bytes without the arguments, over the ledger's limit of %d", len(out), maxPayload)
	}
	return out, nil
}

func encodePayload(p Payload) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encode payload: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
