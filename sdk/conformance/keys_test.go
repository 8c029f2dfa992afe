package conformance

import (
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/intentledger/intentd/client"
)

var update = flag.Bool("update", false, "rewrite key-vectors.json from the Go SDK's KeyOf")

// keyVector is one line of key-vectors.json: the parts given to KeyOf (Go),
// key(...) (Python) or key(...) (TypeScript) and the key all three must
// return, byte for byte.
type keyVector struct {
	Parts []string `json:"parts"`
	Key   string   `json:"key"`
}

// vectorParts are the cases: plain parts, the separator and the escape
// character inside a part, empty parts, unprintable characters (controls,
// a soft hyphen, line and paragraph separators, a no-break space), letters
// and marks of other scripts, emoji, and keys long enough to be shortened,
// with a multi-byte character where the cut falls.
func vectorParts() [][]string {
	long := strings.Repeat("x", 300)
	return [][]string{
		{"stripe.charge", "order-91", "step-1"},
		{"stripe.charge", "order-91"},
		{"email.send", "user:42", "welcome"},
		{"tool", "100%", "a%3Ab"},
		{"tool", "", "step"},
		{"", "entity"},
		{"tool", "tab\there", "nl\nhere"},
		{"tool", "nul\x00byte", "del\x7f"},
		{"tool", "soft\u00adhyphen", "nbsp\u00a0space"},
		{"tool", "line\u2028sep", "para\u2029sep"},
		{"tool", "zero\u200bwidth", "bom\ufeff"},
		{"deploy", "café", "naïve"},
		{"deploy", "e\u0301", "日本語", "Ελληνικά"},
		{"tickets.open", "🚀-launch", "👩‍👩‍👧"},
		{"tool", "space here", "  "},
		{"tool", long},
		{"tool", strings.Repeat("é", 200)},
		{"tool", strings.Repeat("ab", 100), strings.Repeat("日", 30)},
		{"tool", strings.Repeat("🚀", 70)},
		{"tool", strings.Repeat(":", 100)},
	}
}

// TestKeyVectors checks that key-vectors.json holds what the Go SDK
// derives, so the Python and TypeScript SDKs, which test against the same
// file, derive the same keys. go test -run KeyVectors -update rewrites it.
func TestKeyVectors(t *testing.T) {
	var want []keyVector
	for _, parts := range vectorParts() {
		k := client.KeyOf(parts...)
		if err := client.ValidateKey(k); err != nil && strings.Join(parts, "") != "" {
			t.Errorf("KeyOf(%q) = %q, which the ledger refuses: %v", parts, k, err)
		}
		want = append(want, keyVector{Parts: parts, Key: k})
	}
	if *update {
		b, err := json.MarshalIndent(want, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("key-vectors.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("key-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var got []keyVector
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("key-vectors.json has %d vectors, want %d (go test -run KeyVectors -update)", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key || strings.Join(got[i].Parts, "\x00") != strings.Join(want[i].Parts, "\x00") {
			t.Errorf("vector %d: file %q -> %q, Go %q -> %q", i, got[i].Parts, got[i].Key, want[i].Parts, want[i].Key)
		}
	}
}
