package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"

	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

func anyText(t *rapid.T, label string) string {
	parts := rapid.SampledFrom([]string{"", "a", "é", "\"", "\\", "<", ">", "&", "\n", "\t", "\x01", "\x7f",
		"\u2028", "\u2029", "\xff", "日本", "agent/7"})
	var s string
	for i, n := 0, rapid.IntRange(0, 4).Draw(t, label+" n"); i < n; i++ {
		s += parts.Draw(t, label)
	}
	return s
}

// anyRaw is a compact JSON value, as the ledger stores payloads and results.
func anyRaw(t *rapid.T, label string) json.RawMessage {
	return json.RawMessage(rapid.SampledFrom([]string{"", `{"a":1}`, `[1,2,"<&>"]`, `"x"`, `null`,
		"{\"u\":\"\\u2028\"}", `{"b":{"c":true}}`}).Draw(t, label))
}

func anyView(t *rapid.T) *intentView {
	if rapid.IntRange(0, 9).Draw(t, "nil view") == 0 {
		return nil
	}
	v := &intentView{
		Key: anyText(t, "key"), Namespace: anyText(t, "ns"), Tool: anyText(t, "tool"),
		State: fsm.State(anyText(t, "state")), Owner: anyText(t, "owner"),
		FencingToken: rapid.Uint64().Draw(t, "fence"), Generation: rapid.Uint64().Draw(t, "gen"),
		Fingerprint: anyText(t, "fp"), Payload: anyRaw(t, "payload"), Result: anyRaw(t, "result"),
		Policy: anyText(t, "policy"), LeaseMS: rapid.Int64().Draw(t, "lease"), LeaseDeadline: anyText(t, "deadline"),
		CreatedAt: anyText(t, "created"), UpdatedAt: anyText(t, "updated"),
		Duplicates: rapid.Uint64().Draw(t, "dup"), Divergent: rapid.Uint64().Draw(t, "div"), Version: rapid.Uint64().Draw(t, "version"),
		PolicyVersion: rapid.Uint64().Draw(t, "pv"), ApprovalsRequired: rapid.IntRange(-2, 3).Draw(t, "req"),
		TokenUsed: rapid.Bool().Draw(t, "used"), Principal: anyText(t, "principal"),
	}
	for i, n := 0, rapid.IntRange(0, 2).Draw(t, "approvals"); i < n; i++ {
		v.Approvals = append(v.Approvals, approvalView{Actor: anyText(t, "actor"), At: anyText(t, "at"), Reason: anyText(t, "reason")})
	}
	return v
}

func encodingJSON(t *rapid.T, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}

// The answers are handed to writeJSON as values or pointers; either way
// they must take the hand-written path (a value once fell back to
// encoding/json's reflection on every claim).
var (
	_ jsonAppender = claimResponse{}
	_ jsonAppender = intentResponse{}
)

// TestViewJSONMatchesEncodingJSON: the hand-written answers are byte for
// byte what encoding/json writes for them (without HTML escaping).
func TestViewJSONMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		view := anyView(t)
		for _, v := range []jsonAppender{
			&claimResponse{Status: fsm.Status(anyText(t, "status")), FencingToken: rapid.Uint64().Draw(t, "ft"),
				ExecutionToken: anyText(t, "token"), Intent: view},
			&intentResponse{Status: fsm.Status(anyText(t, "status")), Intent: view},
		} {
			want := encodingJSON(t, v)
			if got := v.appendJSON(nil); !bytes.Equal(got, want) {
				t.Fatalf("%T\n got %s\nwant %s", v, got, want)
			}
		}
	})
}
