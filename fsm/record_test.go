package fsm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// anyString is mostly a few known words (so the code tables and the
// "same as the record" relations are hit) and sometimes anything.
func anyString(t *rapid.T, label string, known ...string) string {
	if len(known) > 0 && rapid.Bool().Draw(t, label+" known") {
		return rapid.SampledFrom(known).Draw(t, label)
	}
	return rapid.StringN(0, 20, -1).Draw(t, label)
}

func anyFingerprint(t *rapid.T, label string) string {
	if rapid.IntRange(0, 3).Draw(t, label+" kind") > 0 {
		return hex.EncodeToString(rapid.SliceOfN(rapid.Byte(), 32, 32).Draw(t, label))
	}
	return anyString(t, label) // not a SHA-256 in hex: kept as written
}

// anyJSON is a compact JSON value: a string, or a small object.
func anyJSON(t *rapid.T, label string) []byte {
	v := any(rapid.StringN(0, 30, -1).Draw(t, label))
	if rapid.Bool().Draw(t, label+" object") {
		v = map[string]any{"s": v, "n": rapid.Int64().Draw(t, label+" n")}
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func anyIntent(t *rapid.T) *Intent {
	owner := anyString(t, "owner", "A", "agent/1")
	fp := anyFingerprint(t, "fp")
	in := &Intent{
		Namespace: anyString(t, "ns", "default", "ns"), Key: rapid.StringN(1, 20, -1).Draw(t, "key"),
		Tool: anyString(t, "tool", "payments.charge"), Fingerprint: fp, Owner: owner,
		State:        rapid.SampledFrom(States).Draw(t, "state"),
		FencingToken: rapid.Uint64().Draw(t, "fence"), Generation: rapid.Uint64().Draw(t, "gen"),
		LeaseMS: rapid.Int64().Draw(t, "lease"), LeaseDeadline: rapid.Int64().Draw(t, "deadline"),
		Policy: anyString(t, "policy", "default"), PolicyVersion: rapid.Uint64().Draw(t, "pv"),
		DedupeWindowMS: rapid.Int64().Draw(t, "window"), RequireApproval: rapid.Bool().Draw(t, "req"),
		ApprovalsRequired: rapid.IntRange(-3, 5).Draw(t, "approvals required"),
		TokenTTLMS:        rapid.Int64().Draw(t, "ttl"), TokenUsed: rapid.Uint64().Draw(t, "used"),
		GrantedAt: rapid.Int64().Draw(t, "granted"), TokenKey: anyString(t, "tokenkey", "k1"),
		Principal: anyString(t, "principal", "", "agents-prod"),
		CreatedAt: rapid.Int64().Draw(t, "created"), UpdatedAt: rapid.Int64().Draw(t, "updated"),
		Duplicates: rapid.Uint64().Draw(t, "dup"), Divergent: rapid.Uint64().Draw(t, "div"),
		Version: rapid.Uint64().Draw(t, "version"), AuditDropped: rapid.Uint64().Draw(t, "dropped"),
	}
	// Payloads and results are compact JSON, as apply stores them.
	if rapid.Bool().Draw(t, "has payload") {
		in.Payload = anyJSON(t, "payload")
	}
	if rapid.Bool().Draw(t, "has result") {
		in.Result = anyJSON(t, "result")
	}
	in.Approvers = rapid.SliceOfN(rapid.StringN(0, 8, -1), 0, 3).Draw(t, "approvers")
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, "approvals"); i < n; i++ {
		in.Approvals = append(in.Approvals, Approval{Actor: anyString(t, "actor"), At: rapid.Int64().Draw(t, "at"),
			Reason: anyString(t, "reason")})
	}
	ops := append([]string{"unknown.op"}, opCodes...)
	var statuses, states, outcomes []string
	statuses = append(append(statuses, "weird"), statusCodes...)
	states = append(append(states, "limbo"), stateNames...)
	outcomes = append(append(outcomes, "maybe"), outcomeCodes...)
	for i, n := 0, rapid.IntRange(0, 5).Draw(t, "events"); i < n; i++ {
		ev := AuditEvent{
			Op: rapid.SampledFrom(ops).Draw(t, "op"), Status: Status(rapid.SampledFrom(statuses).Draw(t, "status")),
			State: State(rapid.SampledFrom(states).Draw(t, "ev state")), Outcome: Outcome(rapid.SampledFrom(outcomes).Draw(t, "outcome")),
			Owner: anyString(t, "ev owner", "", owner), Actor: anyString(t, "ev actor", ""),
			Fingerprint: anyString(t, "ev fp", "", fp), Reason: anyString(t, "ev reason", ""),
		}
		switch rapid.IntRange(0, 2).Draw(t, "index kind") {
		case 0:
			ev.Index = in.Version - uint64(rapid.IntRange(0, 10).Draw(t, "back"))
		case 1:
			ev.Index = rapid.Uint64().Draw(t, "index")
		}
		switch rapid.IntRange(0, 2).Draw(t, "fence kind") {
		case 0:
			ev.FencingToken = ev.Index
		case 1:
			ev.FencingToken = rapid.Uint64().Draw(t, "ev fence")
		}
		ev.At = in.CreatedAt + rapid.Int64Range(-5, 1<<40).Draw(t, "ev at")
		in.Audit = append(in.Audit, ev)
	}
	return in
}

// TestRecordRoundTrip: any Intent, once normalized, is exactly what its
// record reads back as, and a record's snapshot encoding decodes to an
// equal record that encodes to the same bytes.
func TestRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := anyIntent(t)
		want := *in
		normalize(&want)
		r, err := compact(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.intent(); !reflect.DeepEqual(got, &want) {
			t.Fatalf("record reads back differently\n got %+v\nwant %+v", got, &want)
		}
		enc := appendRecord(nil, r)
		back, err := decodeRecord(enc)
		if err != nil {
			t.Fatalf("decodeRecord: %v", err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("decoded record differs\n got %+v\nwant %+v", back, r)
		}
		if again := appendRecord(nil, back); !bytes.Equal(again, enc) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func TestCompactRefusesUnknownState(t *testing.T) {
	for _, st := range []State{"", "done"} {
		if _, err := compact(&Intent{Key: "k", State: st}); err == nil {
			t.Fatalf("state %q accepted", st)
		}
	}
}

// TestGrantEventIsSmall pins the point of the compact trail: a grant's
// audit event takes a few bytes, not a 152-byte struct.
func TestGrantEventIsSmall(t *testing.T) {
	fp := hex.EncodeToString(make([]byte, 32))
	ev := AuditEvent{Index: 1000, At: 5, Op: "claim", Status: StatusGranted, State: StateDeclared, Owner: "agent/1",
		Fingerprint: fp, FencingToken: 1000}
	trail := encodeTrail([]AuditEvent{ev}, trailContext{owner: "agent/1", fingerprint: fp, version: 1000, createdAt: 5})
	if len(trail) > 8 {
		t.Fatalf("grant event takes %d bytes: %q", len(trail), trail)
	}
}

// FuzzDecodeRecord: no input makes decodeRecord panic, and whatever it
// accepts reads back as an Intent and encodes to bytes that decode to the
// same record (an input may spell a record non-canonically, e.g. with an
// overlong varint; the record is the same).
func FuzzDecodeRecord(f *testing.F) {
	in := &Intent{Namespace: "default", Key: "k", Tool: "t", Fingerprint: hex.EncodeToString(make([]byte, 32)),
		Owner: "A", State: StateDeclared, Payload: []byte(`{"a":1}`), Version: 3, CreatedAt: 1,
		Audit: []AuditEvent{{Index: 3, At: 1, Op: "claim", Status: StatusGranted, State: StateDeclared, Owner: "A"}}}
	r, err := compact(in)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(appendRecord(nil, r))
	in.Fingerprint, in.Approvers, in.Duplicates = "raw", []string{"x"}, 2
	if r, err = compact(in); err != nil {
		f.Fatal(err)
	}
	f.Add(appendRecord(nil, r))
	in.Principal = "agents-prod"
	if r, err = compact(in); err != nil {
		f.Fatal(err)
	}
	f.Add(appendRecord(nil, r))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeRecord(data)
		if err != nil {
			return
		}
		// What Restore accepts, the JSON views (the API, the JSON dump)
		// can write.
		if _, err := json.Marshal(r.intent()); err != nil {
			t.Fatalf("accepted %x, which does not marshal as JSON: %v", data, err)
		}
		again := appendRecord(nil, r)
		back, err := decodeRecord(again)
		if err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("accepted %x; its encoding %x decodes to %+v, %v", data, again, back, err)
		}
	})
}

// TestRecordFramesThePrincipalOnlyWhenSet: a record bound to no key is
// framed without the principal (no flag, no field), one bound to a key
// sets framePrincipal, a frame that sets it for an empty principal (a
// second encoding of the same record) is refused, and so is a flag the
// decoder does not know.
func TestRecordFramesThePrincipalOnlyWhenSet(t *testing.T) {
	in := &Intent{Namespace: "ns", Key: "k", Tool: "t", Fingerprint: hex.EncodeToString(make([]byte, 32)),
		Owner: "A", State: StateDeclared, Version: 3, CreatedAt: 1}
	flagsAt := func(frame []byte) int {
		// namespace, key, owner, payload, result, trail, tool, policy,
		// token key: nine one-byte lengths and their bytes; then three
		// one-byte varints and the state.
		d := reader{b: frame}
		for range 9 {
			d.bytes()
		}
		d.uvarint()
		d.varint()
		d.varint()
		d.varint()
		d.byte()
		return len(frame) - len(d.b)
	}
	unbound, err := compact(in)
	if err != nil {
		t.Fatal(err)
	}
	plain := appendRecord(nil, unbound)
	if f := plain[flagsAt(plain)]; f != 0 {
		t.Fatalf("flags %#x for a record bound to no key", f)
	}
	in.Principal = "agents"
	bound, err := compact(in)
	if err != nil {
		t.Fatal(err)
	}
	frame := appendRecord(nil, bound)
	at := flagsAt(frame)
	if frame[at] != framePrincipal {
		t.Fatalf("flags %#x for a bound record, want %#x", frame[at], framePrincipal)
	}
	if len(frame) != len(plain)+1+len("agents") {
		t.Fatalf("the principal takes %d bytes", len(frame)-len(plain))
	}
	back, err := decodeRecord(frame)
	if err != nil || back.intent().Principal != "agents" {
		t.Fatalf("decodeRecord: %v", err)
	}
	// The flag with an empty principal after the fingerprint.
	empty := append(bytes.Clone(plain[:at+1+32]), 0)
	empty = append(empty, plain[at+1+32:]...)
	empty[at] = framePrincipal
	if _, err := decodeRecord(empty); err == nil {
		t.Fatal("a principal flag with an empty principal was accepted")
	}
	unknown := bytes.Clone(plain)
	unknown[at] = 1 << 2
	if _, err := decodeRecord(unknown); err == nil {
		t.Fatal("an unknown flag was accepted")
	}
}
