package fsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

// everyCommand returns one fully populated command of each type.
func everyCommand() []fsm.Command {
	c := claim("refund:ord_98231", "agent-7/host-a/41ab", `{"order":"ord_98231","cents":1250,"note":"<b>&</b>"}`)
	c.Policy, c.RequireApproval, c.Principal = "approval", true, "agents-prod"
	done := complete("refund:ord_98231", "agent-7/host-a/41ab", 42, fsm.OutcomeExecuted, `{"refund":"re_1","memo":"a<b"}`)
	done.Principal, done.Override = "reconciler-1", true
	more := renew("refund:ord_98231", "agent-7/host-a/41ab", 42, 30_000)
	more.Principal = "agents-prod"
	ack := commit("refund:ord_98231", "agent-7/host-a/41ab")
	ack.Principal = "agents-prod"
	return []fsm.Command{
		c, done, more, ack,
		resolve("refund:ord_98231", fsm.OutcomeFailed, `null`),
		approve("refund:ord_98231"),
		reject("refund:ord_98231"),
		&fsm.Expire{Keys: []fsm.Ref{{Namespace: "a", Key: "x"}, {Namespace: "b", Key: "y"}}},
		&fsm.Purge{Keys: []fsm.Ref{{Namespace: "a", Key: "x"}}},
	}
}

// encodings lists every command encoding, oldest first.
var encodings = []byte{fsm.EncodingJSON, fsm.EncodingBinary, fsm.EncodingBinary2}

// asOlderEncodingsCarry is cmd as an encoding before EncodingBinary2
// carries it: a copy without the caller (principal and override) and
// without a policy's allow_self_approval.
func asOlderEncodingsCarry(cmd fsm.Command) fsm.Command {
	v := reflect.New(reflect.TypeOf(cmd).Elem())
	v.Elem().Set(reflect.ValueOf(cmd).Elem())
	for _, name := range []string{"Principal", "Override"} {
		if f := v.Elem().FieldByName(name); f.IsValid() {
			f.SetZero()
		}
	}
	if p, ok := v.Interface().(*fsm.PutPolicy); ok {
		p.Policy.AllowSelfApproval = false
	}
	return v.Interface().(fsm.Command)
}

// carriedBy is cmd as encoding enc carries it.
func carriedBy(enc byte, cmd fsm.Command) fsm.Command {
	if enc < fsm.EncodingBinary2 {
		return asOlderEncodingsCarry(cmd)
	}
	return cmd
}

// jsonEntry is cmd's log entry with a JSON body that carries every field,
// as EncodeAs never writes it below EncodingBinary2 but Decode reads it.
func jsonEntry(t testing.TB, cmd fsm.Command) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.Write([]byte{byte(cmd.Type()), fsm.EncodingJSON})
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cmd); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, enc := range encodings {
		seen := map[fsm.CommandType]bool{}
		for _, cmd := range everyCommand() {
			t.Run(fmt.Sprintf("%d/%T", enc, cmd), func(t *testing.T) {
				const at = int64(1_740_000_000_123_456_789)
				data, err := fsm.EncodeAs(enc, at, cmd)
				if err != nil {
					t.Fatal(err)
				}
				if data[0] != byte(cmd.Type()) || data[1] != enc {
					t.Fatalf("header bytes %v, want type %d encoding %d", data[:2], cmd.Type(), enc)
				}
				if enc == fsm.EncodingJSON && !json.Valid(data[2:]) {
					t.Fatalf("body is not JSON: %s", data[2:])
				}
				got, err := fsm.Decode(data)
				if err != nil {
					t.Fatal(err)
				}
				if want := carriedBy(enc, cmd); !reflect.DeepEqual(got, want) {
					t.Fatalf("round trip\n got %#v\nwant %#v", got, want)
				}
				if got.Type() != cmd.Type() {
					t.Fatalf("type %d, want %d", got.Type(), cmd.Type())
				}
				again, err := fsm.EncodeAs(enc, at, got)
				if err != nil || !bytes.Equal(again, data) {
					t.Fatalf("re-encoding differs (%v)\n%q\n%q", err, again, data)
				}
				// The encodings that carry the same fields apply alike: JSON
				// and binary below EncodingBinary2; with the caller, a JSON
				// body naming it and EncodingBinary2.
				alt := jsonEntry(t, got)
				if enc == fsm.EncodingJSON {
					if alt, err = fsm.EncodeAs(fsm.EncodingBinary, at, got); err != nil {
						t.Fatal(err)
					}
				}
				if a, b := fsm.New().Apply(1, data), fsm.New().Apply(1, alt); !reflect.DeepEqual(a, b) {
					t.Fatalf("the encodings apply differently\n%+v\n%+v", a, b)
				}
				seen[cmd.Type()] = true
			})
		}
		for typ := fsm.TypeClaim; typ <= fsm.TypePurge; typ++ {
			if !seen[typ] {
				t.Errorf("command type %d not covered", typ)
			}
		}
	}
	// The default is the newest binary encoding for the per-request
	// commands, and the caller's command is not changed by an older one.
	data, err := fsm.Encode(1, commit("k", "A"))
	if err != nil || data[1] != fsm.EncodingBinary2 {
		t.Fatalf("Encode(commit) = %v, %v", data, err)
	}
	c := everyCommand()[0].(*fsm.Claim)
	if _, err := fsm.EncodeAs(fsm.EncodingJSON, 1, c); err != nil || c.Principal != "agents-prod" {
		t.Fatalf("EncodeAs(JSON) changed the claim's principal to %q (%v)", c.Principal, err)
	}
}

// TestOlderEncodingsDecodeAlike: a claim, complete, renew or commit
// encoded as JSON, EncodingBinary and EncodingBinary2 decodes to the same
// command, but for the caller, which the older two cannot carry: they
// decode with no principal and no override. A policy's
// allow_self_approval likewise needs EncodingBinary2 to be written.
func TestOlderEncodingsDecodeAlike(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		principal := rapid.SampledFrom([]string{"", "agents-prod", "ops.reconciler", "ü-key"}).Draw(t, "principal")
		override := rapid.Bool().Draw(t, "override")
		key := rapid.StringN(1, 12, -1).Draw(t, "key")
		owner := rapid.StringN(1, 12, -1).Draw(t, "owner")
		fence := rapid.Uint64().Draw(t, "fence")
		var cmd fsm.Command
		switch rapid.IntRange(0, 4).Draw(t, "type") {
		case 0:
			c := claim(key, owner, payloadA)
			c.Principal, c.RequireApproval = principal, override
			cmd = c
		case 1:
			c := complete(key, owner, fence, fsm.OutcomeFailed, resultNo)
			c.Principal, c.Override = principal, override
			cmd = c
		case 2:
			c := renew(key, owner, fence, rapid.Int64().Draw(t, "lease"))
			c.Principal, c.Override = principal, override
			cmd = c
		case 3:
			c := commit(key, owner)
			c.Principal, c.Override = principal, override
			cmd = c
		default:
			cmd = &fsm.PutPolicy{Policy: fsm.Policy{Name: "p", Tools: []string{"x.*"}, RequireApproval: true,
				AllowSelfApproval: override}, Actor: principal}
		}
		at := rapid.Int64().Draw(t, "at")
		decoded := map[byte]fsm.Command{}
		for _, enc := range encodings {
			data, err := fsm.EncodeAs(enc, at, cmd)
			if err != nil {
				t.Fatal(err)
			}
			got, err := fsm.Decode(data)
			if err != nil {
				t.Fatalf("encoding %d: %v", enc, err)
			}
			normalizeRaw(t, got)
			decoded[enc] = got
		}
		want := asOlderEncodingsCarry(cmd)
		normalizeRaw(t, want)
		for _, enc := range []byte{fsm.EncodingJSON, fsm.EncodingBinary} {
			if !reflect.DeepEqual(decoded[enc], want) {
				t.Fatalf("encoding %d decodes to\n%#v\nwant\n%#v", enc, decoded[enc], want)
			}
		}
		normalizeRaw(t, cmd)
		if !reflect.DeepEqual(decoded[fsm.EncodingBinary2], cmd) {
			t.Fatalf("EncodingBinary2 decodes to\n%#v\nwant\n%#v", decoded[fsm.EncodingBinary2], cmd)
		}
		if reflect.DeepEqual(cmd, want) && !reflect.DeepEqual(decoded[fsm.EncodingBinary2], decoded[fsm.EncodingBinary]) {
			t.Fatalf("a command without a caller decodes differently in EncodingBinary2")
		}
	})
}

// The canonical payload the log carries must arrive byte for byte: it is
// what the fingerprint was computed over, and JCS does not escape <, > or &.
func TestEncodeKeepsCanonicalPayload(t *testing.T) {
	canonical, _ := fingerprint(t, `{"html":"<a href=\"x\">&amp;</a>","sep":"\u2028"}`)
	c := claim("k", "A", payloadA)
	c.Payload = canonical
	data, err := fsm.Encode(t0, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := fsm.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if p := got.(*fsm.Claim).Payload; !bytes.Equal(p, canonical) {
		t.Fatalf("payload after the log\n got %s\nwant %s", p, canonical)
	}
	l := fsm.New()
	r := l.Apply(1, data)
	if !bytes.Equal(r.Intent.Payload, canonical) {
		t.Fatalf("stored payload\n got %s\nwant %s", r.Intent.Payload, canonical)
	}
}

func TestEncodeStampsTime(t *testing.T) {
	c := commit("k", "A")
	data, err := fsm.Encode(123, c)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "At", c.At, int64(123))
	got, err := fsm.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "decoded At", got.(*fsm.Commit).At, int64(123))
}

func TestEncodeRejectsInvalidRawJSON(t *testing.T) {
	for _, enc := range []byte{fsm.EncodingJSON, fsm.EncodingBinary} {
		c := complete("k", "A", 1, fsm.OutcomeExecuted, "")
		c.Result = json.RawMessage(`{"x":`)
		if _, err := fsm.EncodeAs(enc, t0, c); err == nil {
			t.Fatalf("encoding %d accepted a result that is not JSON", enc)
		}
		cl := claim("k", "A", payloadA)
		cl.Payload = json.RawMessage(`[1,`)
		if _, err := fsm.EncodeAs(enc, t0, cl); err == nil {
			t.Fatalf("encoding %d accepted a payload that is not JSON", enc)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	c := commit("k", "A")
	c.Principal = "P"
	valid, err := fsm.Encode(t0, c)
	if err != nil {
		t.Fatal(err)
	}
	withHeader := func(typ, version byte) []byte {
		return append([]byte{typ, version}, valid[2:]...)
	}
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, fsm.ErrMalformed},
		{"one byte", []byte{byte(fsm.TypeCommit)}, fsm.ErrMalformed},
		{"unknown type", withHeader(0x3f, fsm.EncodingJSON), fsm.ErrUnknownCommand},
		{"type zero", withHeader(0, fsm.EncodingJSON), fsm.ErrUnknownCommand},
		{"unknown ignorable type", withHeader(byte(fsm.IgnorableFlag)|0x3f, fsm.EncodingJSON), fsm.ErrIgnorableCommand},
		{"ignorable type with other version", withHeader(byte(fsm.IgnorableFlag)|0x01, 9), fsm.ErrIgnorableCommand},
		{"bad version", withHeader(byte(fsm.TypeCommit), fsm.MaxEncoding+1), fsm.ErrBadVersion},
		{"no binary encoding of the type", withHeader(byte(fsm.TypePutPolicy), fsm.EncodingBinary), fsm.ErrBadVersion},
		{"no second binary encoding of the type", withHeader(byte(fsm.TypePutPolicy), fsm.EncodingBinary2), fsm.ErrBadVersion},
		// EncodingBinary has no place for the caller: a body with one is
		// refused, never read as something else.
		{"caller in an EncodingBinary body", withHeader(byte(fsm.TypeCommit), fsm.EncodingBinary), fsm.ErrMalformed},
		{"EncodingBinary2 body without the caller", withHeader(byte(fsm.TypeCommit), fsm.EncodingBinary2)[:len(valid)-3], fsm.ErrMalformed},
		{"version zero", withHeader(byte(fsm.TypeCommit), 0), fsm.ErrBadVersion},
		{"body not JSON", []byte{byte(fsm.TypeCommit), fsm.EncodingJSON, '{'}, fsm.ErrMalformed},
		{"empty body", []byte{byte(fsm.TypeCommit), fsm.EncodingJSON}, fsm.ErrMalformed},
		{"wrong field type", append([]byte{byte(fsm.TypeRenew), fsm.EncodingJSON}, `{"lease_ms":"long"}`...), fsm.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd, err := fsm.Decode(tc.data)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decode error %v, want %v", err, tc.want)
			}
			if cmd != nil {
				t.Fatalf("Decode returned a command with an error: %#v", cmd)
			}
		})
	}
}

// mustPanic runs fn and returns the panic value, failing if there is none.
func mustPanic(t *testing.T, fn func()) (v any) {
	t.Helper()
	defer func() { v = recover() }()
	fn()
	t.Fatalf("no panic")
	return nil
}

func TestApplyUnknownTypePanics(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	before := h.l.Digest()
	for _, typ := range []byte{0, 0x3a, 0x40, 0x7f} {
		data := []byte{typ, fsm.EncodingJSON, '{', '}'}
		v := mustPanic(t, func() { h.l.Apply(2, data) })
		if msg := fmt.Sprint(v); !strings.Contains(msg, "cannot apply log entry 2") || !strings.Contains(msg, "unknown command type") {
			t.Fatalf("panic %q does not explain itself", msg)
		}
	}
	eq(t, "AppliedIndex", h.l.AppliedIndex(), uint64(1))
	eq(t, "Digest", h.l.Digest(), before)
}

func TestApplyBadVersionPanics(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	data, err := fsm.Encode(t0, complete("k", "A", 1, fsm.OutcomeExecuted, ""))
	if err != nil {
		t.Fatal(err)
	}
	data[1] = fsm.MaxEncoding + 1
	v := mustPanic(t, func() { h.l.Apply(2, data) })
	if msg := fmt.Sprint(v); !strings.Contains(msg, "unsupported command encoding version") {
		t.Fatalf("panic %q does not name the version", msg)
	}
	eq(t, "State", h.get("k").State, fsm.StateDeclared)
	eq(t, "AppliedIndex", h.l.AppliedIndex(), uint64(1))
}

func TestApplyIgnorableUnknownType(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	before := h.get("k")
	data := append([]byte{byte(fsm.IgnorableFlag | 0x21), fsm.EncodingJSON}, `{"at":99999999999999999,"whatever":[1,2]}`...)
	r := h.l.Apply(2, data)
	eq(t, "Status", r.Status, fsm.StatusIgnored)
	eq(t, "Index", r.Index, uint64(2))
	eq(t, "AppliedIndex", h.l.AppliedIndex(), uint64(2))
	eq(t, "Now", h.l.Now(), t0)
	if r.Err() != nil {
		t.Fatalf("ignored entry has an error: %v", r.Err())
	}
	if !reflect.DeepEqual(h.get("k"), before) {
		t.Fatalf("ignored entry changed a record")
	}
}

func TestApplyMalformedBodyChangesNothing(t *testing.T) {
	bodies := map[fsm.CommandType]string{
		fsm.TypeClaim:    `{"ns":"ns","key":"k",`,
		fsm.TypeComplete: `{"ns":"ns","key":"k","fence":"one"}`,
		fsm.TypeRenew:    `[]`,
		fsm.TypeCommit:   `"commit"`,
		fsm.TypeResolve:  `{"outcome":7}`,
		fsm.TypeApprove:  `{"ns":1}`,
		fsm.TypeReject:   ``,
		fsm.TypeExpire:   `{"keys":{"ns":"ns"}}`,
		fsm.TypePurge:    `{"keys":[1]}`,
	}
	for typ, body := range bodies {
		t.Run(fmt.Sprint(typ), func(t *testing.T) {
			h := newHarness(t)
			h.run(toState(fsm.StateExecuted))
			before, digest := h.get("k"), h.l.Digest()
			data := append([]byte{byte(typ), fsm.EncodingJSON}, body...)
			r := h.l.Apply(3, data)
			eq(t, "Status", r.Status, fsm.StatusMalformed)
			eq(t, "Index", r.Index, uint64(3))
			eq(t, "AppliedIndex", h.l.AppliedIndex(), uint64(3))
			if !errors.Is(r.Err(), fsm.ErrMalformed) {
				t.Fatalf("Err() = %v", r.Err())
			}
			if r.Intent != nil || !reflect.DeepEqual(h.get("k"), before) {
				t.Fatalf("malformed entry touched a record")
			}
			eq(t, "Now", h.l.Now(), t0)
			if h.l.Digest() == digest {
				t.Fatalf("digest should record the applied index")
			}
		})
	}
}

// normalizeRaw puts every raw JSON field of cmd in the form Encode writes
// (compact, no HTML escaping), so decoded commands can be compared.
func normalizeRaw(t fataler, cmd fsm.Command) {
	t.Helper()
	norm := func(r *json.RawMessage) {
		if len(*r) == 0 {
			return
		}
		var b bytes.Buffer
		if err := json.Compact(&b, *r); err != nil {
			t.Fatalf("decoded raw JSON does not compact: %v", err)
		}
		*r = b.Bytes()
	}
	switch c := cmd.(type) {
	case *fsm.Claim:
		norm(&c.Payload)
	case *fsm.Complete:
		norm(&c.Result)
	case *fsm.Resolve:
		norm(&c.Result)
	case *fsm.Expire: // no keys is no keys, whether null or []
		if len(c.Keys) == 0 {
			c.Keys = nil
		}
	case *fsm.Purge:
		if len(c.Keys) == 0 {
			c.Keys = nil
		}
	}
}

func addEncodedSeeds(f *testing.F) {
	for _, cmd := range everyCommand() {
		data, err := fsm.Encode(t0, cmd)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, 1})
	f.Add([]byte{1, 1, 'n', 'u', 'l', 'l'})
	f.Add([]byte("\x01\x01{\"payload\": { \"b\" : [1, 2.50, \"<\"] , \"a\":null }, \"key\":\"k\", \"owner\":\"A\", \"lease_ms\":5}"))
	f.Add([]byte("\x02\x01{\"KEY\":\"k\",\"Owner\":\"A\",\"fence\":1,\"outcome\":\"executed\",\"result\":\"\\u003c\"}"))
	f.Add([]byte("\x08\x01{\"keys\":[]}"))
	f.Add([]byte("\x09\x01{\"keys\":null,\"at\":-1}"))
	f.Add([]byte("\x05\x01{\"result\":{\"x\":\"\xff\"},\"outcome\":\"failed\"}"))
	f.Add([]byte("\x81\x01{}"))
	f.Add([]byte("\x0a\x01{}"))
	f.Add([]byte("\x01\x02{}"))
	for _, cmd := range everyCommand() {
		for _, enc := range []byte{fsm.EncodingJSON, fsm.EncodingBinary} {
			data, err := fsm.EncodeAs(enc, t0, cmd)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
		// A JSON body that names the caller, as Decode reads it.
		f.Add(jsonEntry(f, cmd))
	}
}

// FuzzDecode: Decode never panics, and a command it accepts re-encodes into
// an entry that decodes to the same command (and re-encodes to the same bytes).
func FuzzDecode(f *testing.F) {
	addEncodedSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := fsm.Decode(data)
		if err != nil {
			if cmd != nil {
				t.Fatalf("command with an error")
			}
			for _, known := range []error{fsm.ErrMalformed, fsm.ErrUnknownCommand, fsm.ErrIgnorableCommand, fsm.ErrBadVersion} {
				if errors.Is(err, known) {
					return
				}
			}
			t.Fatalf("Decode error %v is none of the documented ones", err)
		}
		if cmd.Type() != fsm.CommandType(data[0]) {
			t.Fatalf("decoded %T from type byte %d", cmd, data[0])
		}
		at := reflect.ValueOf(cmd).Elem().FieldByName("At").Int()
		normalizeRaw(t, cmd) // the JSON encoding compacts raw values; the binary one keeps them
		for _, encoding := range encodings {
			enc, err := fsm.EncodeAs(encoding, at, cmd)
			if err != nil {
				t.Fatalf("re-encode %#v: %v", cmd, err)
			}
			again, err := fsm.Decode(enc)
			if err != nil {
				t.Fatalf("decode of re-encoded %q: %v", enc, err)
			}
			normalizeRaw(t, again)
			// Below EncodingBinary2 the caller is left out.
			if want := carriedBy(encoding, cmd); !reflect.DeepEqual(again, want) {
				t.Fatalf("round trip\n got %#v\nwant %#v", again, want)
			}
			enc2, err := fsm.EncodeAs(encoding, at, again)
			if err != nil || !bytes.Equal(enc, enc2) {
				t.Fatalf("encoding is not a fixed point (%v)\n%q\n%q", err, enc, enc2)
			}
		}
	})
}

// fuzzLedger is a ledger with a record in every state (keys k0..k7 of ns)
// and the last index applied. The records of even keys are bound to API
// key P, the others to none.
func fuzzLedger(t testing.TB) (*fsm.Ledger, uint64) {
	h := newHarness(t)
	for i, s := range fsm.States {
		grant := h.idx + 1
		for _, st := range toState(s) {
			h.advance(st.advance)
			cmd := rekey(st.cmd, fmt.Sprintf("k%d", i), grant)
			if i%2 == 0 {
				cmd = as("P", false, cmd)
			}
			h.must(cmd, st.want)
		}
	}
	return h.l, h.idx
}

// FuzzApply: applying arbitrary bytes never panics, except for the
// documented refusal to apply an unknown (not ignorable) command type or
// encoding version, and whatever it does is deterministic, keeps the counts
// true and survives a snapshot round trip.
func FuzzApply(f *testing.F) {
	addEncodedSeeds(f)
	for i := range fsm.States {
		key := fmt.Sprintf("k%d", i)
		for _, cmd := range []fsm.Command{
			claim(key, "A", payloadA), claim(key, "B", payloadA), claim(key, "A", payloadB),
			complete(key, "A", uint64(i+1), fsm.OutcomeExecuted, resultOK), renew(key, "A", uint64(i+1), 10),
			commit(key, "A"), resolve(key, fsm.OutcomeFailed, ""), approve(key), reject(key),
			expire(key), purge(key),
			// The grant binding: the fuzz ledger's records are bound to
			// key P (fuzzLedger); another key, with and without override.
			as("Q", false, claim(key, "A", payloadA)),
			as("Q", false, complete(key, "A", uint64(i+1), fsm.OutcomeExecuted, resultOK)),
			as("Q", true, renew(key, "A", uint64(i+1), 10)), as("Q", false, commit(key, "A")),
			&fsm.Approve{Namespace: ns, Key: key, Actor: "P"},
		} {
			for _, at := range []int64{t0, t0 + ms(dedupeMS) + ms(leaseMS)*3} {
				data, err := fsm.Encode(at, cmd)
				if err != nil {
					f.Fatal(err)
				}
				f.Add(data)
			}
		}
	}
	base, last := fuzzLedger(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		l := base.Clone()
		twin := base.Clone()
		_, decodeErr := fsm.Decode(data)
		wantPanic := errors.Is(decodeErr, fsm.ErrUnknownCommand) || errors.Is(decodeErr, fsm.ErrBadVersion)
		var r *fsm.Result
		panicked := func() (p any) {
			if wantPanic {
				defer func() { p = recover() }()
			}
			r = l.Apply(last+1, data)
			return nil
		}()
		if wantPanic {
			if panicked == nil || !strings.Contains(fmt.Sprint(panicked), "cannot apply log entry") {
				t.Fatalf("entry with %v: panic %v, want the documented one", decodeErr, panicked)
			}
			return
		}
		if r == nil || r.Index != last+1 || l.AppliedIndex() != last+1 {
			t.Fatalf("result %+v, applied index %d", r, l.AppliedIndex())
		}
		if _, known := sentinels[r.Status]; !known {
			t.Fatalf("unknown status %q", r.Status)
		}
		checkErr(t, r)
		if l.Now() < base.Now() {
			t.Fatalf("time ran backwards: %d < %d", l.Now(), base.Now())
		}
		// Deterministic: the same entry on an equal ledger gives the same answer.
		r2 := twin.Apply(last+1, data)
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("same entry, different results\n%+v\n%+v", r, r2)
		}
		if l.Digest() != twin.Digest() {
			t.Fatalf("same entry, different digests")
		}
		// The base ledger the clones came from did not move.
		if base.AppliedIndex() != last {
			t.Fatalf("clone shares state with its original")
		}
		checkCounts(t, l)
		checkSnapshotRoundTrip(t, l)
	})
}

// checkCounts asserts Counts() and Len() match a recount of every record,
// read independently of the ledger's indexes from its snapshot encoding.
func checkCounts(t fataler, l *fsm.Ledger) {
	t.Helper()
	recount := map[fsm.State]int{}
	records := snapshotIntents(t, jsonSnapshotOf(t, l))
	for _, in := range records {
		recount[in.State]++
	}
	if len(records) != l.Len() {
		t.Fatalf("snapshot holds %d records, Len() = %d", len(records), l.Len())
	}
	counts := l.Counts()
	for _, s := range fsm.States {
		if counts[s] != recount[s] {
			t.Fatalf("Counts()[%s] = %d, recount %d", s, counts[s], recount[s])
		}
	}
	if len(counts) != len(fsm.States) {
		t.Fatalf("Counts() has %d states, want %d", len(counts), len(fsm.States))
	}
}

func snapshotOf(t fataler, l *fsm.Ledger) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := l.WriteSnapshot(&buf); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	return buf.Bytes()
}

// jsonSnapshotOf is l's snapshot in the version 2 encoding, with intents
// as JSON lines.
func jsonSnapshotOf(t fataler, l *fsm.Ledger) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := l.WriteSnapshotJSON(&buf); err != nil {
		t.Fatalf("WriteSnapshotJSON: %v", err)
	}
	return buf.Bytes()
}

// snapshotIntents decodes the intent lines of a version 2 snapshot.
func snapshotIntents(t fataler, snap []byte) []fsm.Intent {
	t.Helper()
	lines := bytes.Split(bytes.TrimSuffix(snap, []byte{'\n'}), []byte{'\n'})
	var hdr struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal(lines[0], &hdr); err != nil || hdr.Count > len(lines)-2 {
		t.Fatalf("snapshot header %q: %v", lines[0], err)
	}
	out := make([]fsm.Intent, 0, hdr.Count)
	for _, line := range lines[1 : 1+hdr.Count] {
		var in fsm.Intent
		if err := json.Unmarshal(line, &in); err != nil {
			t.Fatalf("snapshot line %q: %v", line, err)
		}
		out = append(out, in)
	}
	return out
}

// checkSnapshotRoundTrip asserts a snapshot of l restores into a ledger
// with the same snapshot bytes and equal records, and returns it.
func checkSnapshotRoundTrip(t fataler, l *fsm.Ledger) *fsm.Ledger {
	t.Helper()
	snap := snapshotOf(t, l)
	restored, err := fsm.Restore(bytes.NewReader(snap))
	if err != nil {
		t.Fatalf("Restore of a fresh snapshot: %v", err)
	}
	if again := snapshotOf(t, restored); !bytes.Equal(snap, again) {
		t.Fatalf("snapshot round trip is not byte-identical\n%s\n%s", snap, again)
	}
	// A version 2 (JSON) snapshot of the same ledger, as an older node
	// writes, restores to the same ledger.
	fromJSON, err := fsm.Restore(bytes.NewReader(jsonSnapshotOf(t, l)))
	if err != nil {
		t.Fatalf("Restore of a version 2 snapshot: %v", err)
	}
	if again := snapshotOf(t, fromJSON); !bytes.Equal(snap, again) {
		t.Fatalf("version 2 round trip differs from version 3")
	}
	// The records themselves, not only their encoding, must be equal: a
	// replica restored from a snapshot answers with them.
	for _, in := range snapshotIntents(t, jsonSnapshotOf(t, l)) {
		got, want := restored.Get(in.Namespace, in.Key), l.Get(in.Namespace, in.Key)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("record %s/%s differs after restore\n got %+v\nwant %+v", in.Namespace, in.Key, got, want)
		}
	}
	if restored.Len() != l.Len() || !reflect.DeepEqual(restored.Counts(), l.Counts()) ||
		restored.AppliedIndex() != l.AppliedIndex() || restored.Now() != l.Now() {
		t.Fatalf("restored Len/Counts/AppliedIndex/Now differ")
	}
	return restored
}
