package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"
	"github.com/intentledger/intentd/internal/jsonexact"
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
	if err := checkExactNumbers(payload); err != nil {
		return nil, "", err
	}
	canonical, err = jcs.Transform(payload)
	if err != nil {
		return nil, "", fmt.Errorf("payload is not canonicalizable JSON: %w", err)
	}
	doc, ok := plainDocument(tool, canonical)
	if !ok {
		if doc, err = json.Marshal(struct {
			Tool    string          `json:"tool"`
			Payload json.RawMessage `json:"payload"`
		}{tool, canonical}); err != nil {
			return nil, "", fmt.Errorf("fingerprint document: %w", err)
		}
		// json.Marshal escapes <, > and &; JCS does not, so canonicalize the
		// whole document rather than trusting the encoder.
		if doc, err = jcs.Transform(doc); err != nil {
			return nil, "", fmt.Errorf("fingerprint document: %w", err)
		}
	}
	sum := sha256.Sum256(doc)
	return canonical, hex.EncodeToString(sum[:]), nil
}

// ErrInexactNumber rejects an integer that canonical JSON cannot hold
// exactly: RFC 8785 treats numbers as IEEE 754 doubles and writes the
// shortest digits that read back as the same double, so such an integer
// would lose digits, or come out as another integer (20000000000000008, a
// double, is written 20000000000000010), and two different IDs could share
// a fingerprint (a retry with another ID would then not be divergent).
var ErrInexactNumber = errors.New("integer is not exactly representable in canonical JSON (beyond ±2^53); send it as a string")

// plainDocument writes the canonical form of {"tool": tool, "payload":
// canonical} directly when tool is printable ASCII without a quote or a
// backslash (JCS then writes it as is between quotes, and sorts "payload"
// before "tool"); canonical is already in JCS form. It reports false for
// any other tool, which takes the general path.
func plainDocument(tool string, canonical []byte) ([]byte, bool) {
	for i := 0; i < len(tool); i++ {
		if c := tool[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return nil, false
		}
	}
	doc := make([]byte, 0, len(canonical)+len(tool)+24)
	doc = append(doc, `{"payload":`...)
	doc = append(doc, canonical...)
	doc = append(doc, `,"tool":"`...)
	doc = append(doc, tool...)
	return append(doc, `"}`...), true
}

func checkExactNumbers(payload []byte) error {
	if n, bad := jsonexact.Inexact(payload); bad {
		return fmt.Errorf("%w: %s", ErrInexactNumber, n)
	}
	return nil
}
