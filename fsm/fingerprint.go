package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Fingerprint canonicalizes payload with RFC 8785 (JCS) and returns the
// canonical payload and the hex SHA-256 of the canonical form of
// {"tool": tool, "payload": payload}, so key order, whitespace and number
// formatting never make two equal payloads differ. An empty payload is
// treated as JSON null.
func Fingerprint(tool string, payload []byte) (canonical json.RawMessage, fingerprint string, err error) {
	if len(payload) == 0 {
		payload = []byte("null")
	}
	canonical, err = jcs.Transform(payload)
	if err != nil {
		return nil, "", fmt.Errorf("payload is not canonicalizable JSON: %w", err)
	}
	doc, err := json.Marshal(struct {
		Tool    string          `json:"tool"`
		Payload json.RawMessage `json:"payload"`
	}{tool, canonical})
	if err != nil {
		return nil, "", fmt.Errorf("fingerprint document: %w", err)
	}
	// json.Marshal escapes <, > and &; JCS does not, so canonicalize the
	// whole document rather than trusting the encoder.
	doc, err = jcs.Transform(doc)
	if err != nil {
		return nil, "", fmt.Errorf("fingerprint document: %w", err)
	}
	sum := sha256.Sum256(doc)
	return canonical, hex.EncodeToString(sum[:]), nil
}
