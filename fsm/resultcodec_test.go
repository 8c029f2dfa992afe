package fsm

import (
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// TestResultRoundTrip: any Result whose intent a state machine could hold
// decodes to an equal Result (its intent normalized, as the ledger's are),
// and the encoding leaves the Result it was given alone.
func TestResultRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := &Result{
			Status: Status(anyString(t, "status", string(StatusGranted), string(StatusInFlight))), Detail: anyString(t, "detail", ""),
			Fingerprint: anyFingerprint(t, "fp"), Index: rapid.Uint64().Draw(t, "index"),
			Count: rapid.IntRange(-1, 1<<20).Draw(t, "count"), Created: rapid.Bool().Draw(t, "created"),
		}
		if rapid.Bool().Draw(t, "has intent") {
			r.Intent = anyIntent(t)
		}
		if rapid.Bool().Draw(t, "has policy") {
			r.Policy = &Policy{Name: "p", Version: rapid.Uint64().Draw(t, "pv"), Tools: []string{"payments.*"},
				Priority: rapid.IntRange(-5, 5).Draw(t, "prio"), TokenTTLMS: rapid.Int64().Draw(t, "ttl"),
				RequireApproval: rapid.Bool().Draw(t, "approval"), Approvers: []string{"alice"}}
		}
		want := *r
		if r.Intent != nil {
			in := *r.Intent
			want.Intent = &in
			normalize(want.Intent)
		}
		given := *r
		enc, err := AppendResult(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*r, given) {
			t.Fatalf("encoding changed the result")
		}
		got, err := DecodeResult(enc)
		if err != nil {
			t.Fatalf("DecodeResult: %v", err)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("result reads back differently\n got %+v\nwant %+v", got, &want)
		}
	})
}

// TestResultOfApplyRoundTrips: what the state machine answers a claim and
// a report with decodes to what Get returns afterwards.
func TestResultOfApplyRoundTrips(t *testing.T) {
	l := New()
	claim := &Claim{Namespace: "default", Key: "k", Tool: "t", Owner: "o", Payload: []byte(`{"a":1}`),
		Fingerprint: "4d8bd6d0a1d8a4d0f0e4a1d9c52a8c7b52c6d4a1f2b7c3e8d9a0b1c2d3e4f5a6", Principal: "agents"}
	tests := []struct {
		name string
		cmd  Command
	}{
		{"grant", claim},
		{"duplicate claim", claim},
		{"complete", &Complete{Namespace: "default", Key: "k", Owner: "o", FencingToken: 1, Outcome: OutcomeExecuted,
			Result: []byte(`{"ok":true}`), Principal: "agents"}},
		{"not found", &Commit{Namespace: "default", Key: "absent", Owner: "o"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := Encode(int64(1e18)+int64(i), tt.cmd)
			if err != nil {
				t.Fatal(err)
			}
			r := l.Apply(uint64(i+1), data)
			enc, err := AppendResult(nil, r)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeResult(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r) {
				t.Fatalf("result reads back differently\n got %+v\nwant %+v", got, r)
			}
		})
	}
}

// TestDecodeResultRefusesDamage: every truncation, a trailing byte, an
// unknown version and unknown parts are refused, never a panic.
func TestDecodeResultRefusesDamage(t *testing.T) {
	r := &Result{Status: StatusGranted, Index: 7, Intent: &Intent{Namespace: "default", Key: "k", Tool: "t",
		Fingerprint: "x", State: StateDeclared, Payload: []byte(`{}`), Version: 7}}
	enc, err := AppendResult(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(enc); n++ {
		if _, err := DecodeResult(enc[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: accepted", n, len(enc))
		}
	}
	bad := [][]byte{
		append(append([]byte(nil), enc...), 0),
		append([]byte{resultVersion + 1}, enc[1:]...),
	}
	for i, b := range bad {
		if _, err := DecodeResult(b); err == nil {
			t.Fatalf("damage %d accepted", i)
		}
	}
}
