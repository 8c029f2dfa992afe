package fsm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/gowebpki/jcs"
)

// referenceFingerprint is the general path: JCS over the marshalled
// document, with the full number check.
func referenceFingerprint(t *testing.T, tool string, canonical []byte) string {
	t.Helper()
	doc, err := json.Marshal(struct {
		Tool    string          `json:"tool"`
		Payload json.RawMessage `json:"payload"`
	}{tool, canonical})
	if err != nil {
		t.Fatal(err)
	}
	if doc, err = jcs.Transform(doc); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:])
}

func TestFingerprintFastPathsMatchTheGeneralPath(t *testing.T) {
	payloads := []string{
		`null`, `{}`, `[]`, `"s"`, `1`, `{"b":2,"a":[1,2.5,"<&>"]}`, `{"amount":1299,"currency":"usd"}`,
		`{"u":"é\u2028\ud83d\ude00","n":-0.0,"e":1e21,"big":123456789012345}`, `{"s":"\u0000\u001f\"\\"}`,
	}
	tools := []string{"stripe.charge", "bench.tool", "", "with space", `quote"d`, `back\slash`, "é", "tab\t", "<&>", "~"}
	for _, p := range payloads {
		for _, tool := range tools {
			canonical, fp, err := Fingerprint(tool, []byte(p))
			if err != nil {
				t.Fatalf("%q %q: %v", tool, p, err)
			}
			if want := referenceFingerprint(t, tool, canonical); fp != want {
				t.Fatalf("tool %q payload %s: fingerprint %s, general path %s", tool, p, fp, want)
			}
		}
	}
}

func TestCheckExactNumbersFastPathStillRefusesLongIntegers(t *testing.T) {
	for _, p := range []string{`9007199254740993`, `{"id":12345678901234567}`, `[-9007199254740993]`} {
		if err := checkExactNumbers([]byte(p)); !errors.Is(err, ErrInexactNumber) {
			t.Fatalf("%s: %v", p, err)
		}
	}
	for _, p := range []string{`9007199254740992`, `{"id":"12345678901234567"}`, `{"n":123456789012345}`, `1.2345678901234567`, `1e300`} {
		if err := checkExactNumbers([]byte(p)); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}
