package fsm

import (
	"encoding/json"
	"testing"

	"pgregory.net/rapid"
)

// nastyString mixes the characters JSON escaping treats specially with
// arbitrary bytes (invalid UTF-8 included).
func nastyString(t *rapid.T, label string) string {
	special := rapid.SampledFrom([]string{"", "a", "é", "\"", "\\", "<", ">", "&", "\b", "\f", "\n", "\r", "\t",
		"\x00", "\x1f", "\x7f", "\u2028", "\u2029", "\xff", "\xe2\x80", "日本", "\U0001F600"})
	var s string
	for i, n := 0, rapid.IntRange(0, 6).Draw(t, label+" parts"); i < n; i++ {
		if rapid.Bool().Draw(t, label+" raw") {
			s += string(rapid.SliceOfN(rapid.Byte(), 0, 4).Draw(t, label+" bytes"))
		} else {
			s += special.Draw(t, label)
		}
	}
	return s
}

// TestChainBodyMatchesEncodingJSON: the hand-written encoding of an audit
// log event is byte for byte json.Marshal's, for any strings and numbers.
func TestChainBodyMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := ChainBody{
			Seq: rapid.Uint64().Draw(t, "seq"), Namespace: nastyString(t, "ns"), Key: nastyString(t, "key"),
			Prev: nastyString(t, "prev"),
			AuditEvent: AuditEvent{
				Index: rapid.Uint64().Draw(t, "index"), At: rapid.Int64().Draw(t, "at"), Op: nastyString(t, "op"),
				Status: Status(nastyString(t, "status")), State: State(nastyString(t, "state")),
				Owner: nastyString(t, "owner"), Actor: nastyString(t, "actor"), Fingerprint: nastyString(t, "fp"),
				FencingToken: rapid.Uint64().Draw(t, "fence"), Outcome: Outcome(nastyString(t, "outcome")),
				Reason: nastyString(t, "reason"),
			},
		}
		want, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendChainBody(nil, &b); string(got) != string(want) {
			t.Fatalf("appendChainBody\n got %s\nwant %s", got, want)
		}
	})
}
