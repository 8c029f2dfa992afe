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
	sealed := append([]byte{fsm.SealedSeedVersion}, bytes.Repeat([]byte{9}, fsm.SealedSeedSize-1)...)
	return []fsm.Command{
		c, done, more, ack,
		resolve("refund:ord_98231", fsm.OutcomeFailed, `null`),
		approve("refund:ord_98231"),
		reject("refund:ord_98231"),
		&fsm.Expire{Keys: []fsm.Ref{{Namespace: "a", Key: "x"}, {Namespace: "b", Key: "y"}}},
		&fsm.Purge{Keys: []fsm.Ref{{Namespace: "a", Key: "x"}}},
		&fsm.PutPolicy{Policy: fsm.Policy{Name: "approval", Tools: []string{"refund.*"}, Priority: 5, RequireApproval: true,
			ApprovalsRequired: 2, Approvers: []string{"alice", "bob <b>"}, AllowSelfApproval: true, MaxPayloadBytes: 4096},
			ExpectVersion: 7, Actor: "admin"},
		&fsm.DeletePolicy{Name: "old", Actor: "admin"},
		&fsm.AddSigningKey{Key: fsm.SigningKey{ID: "k-sealed", Sealed: sealed}},
		&fsm.UseToken{Namespace: ns, Key: "refund:ord_98231", Owner: "agent-7/host-a/41ab", FencingToken: 42,
			Fingerprint: mustFP(payloadA), Presented: "not-hex", Expires: 1_740_000_900, Actor: "tool <x>"},
		&fsm.SetSettings{Settings: fsm.Settings{AuditRetention: 1000}, Actor: "admin"},
		&fsm.NoteDuplicates{Node: "n2", Notes: []fsm.DuplicateNote{
			{Namespace: ns, Key: "refund:ord_98231", Owner: "agent-9 <retry>", Fingerprint: mustFP(payloadA), FencingToken: 42,
				Note: "n2/1740000000123456789", AnsweredAt: 1_740_000_000_123_456_789},
			{Namespace: "other", Key: "k", Owner: "o", Fingerprint: "not-hex", Note: "n2/1740000000123456790", AnsweredAt: -1},
		}},
		&fsm.NoteRefusals{Node: "n1", Notes: []fsm.RefusalNote{
			{Namespace: ns, Key: "refund:ord_98231", Status: fsm.StatusInFlight, FencingToken: 42, Count: 377,
				Owners: []string{"agent-9 <retry>", "agent-10"}, MoreOwners: 3, First: 1_740_000_000_123_456_789, Last: 1_740_000_001_000_000_000},
			{Namespace: "other", Key: "k", Status: fsm.StatusInDoubt, FencingToken: 7, Count: 1, Owners: []string{"o"}, First: -1, Last: -1},
		}},
		&fsm.NoteDivergent{Node: "n1", Notes: []fsm.DivergentNote{
			{Namespace: ns, Key: "refund:ord_98231", Fingerprint: mustFP(payloadA), FencingToken: 42, CreatedAt: 1_740_000_000_000_000_001,
				Count: 1234, Owners: []string{"agent-9 <retry>", "agent-10"}, MoreOwners: 2,
				Fingerprints: []string{mustFP(payloadB), "not-hex"}, MoreFingerprints: 5,
				First: 1_740_000_000_123_456_789, Last: 1_740_000_001_000_000_000},
			{Namespace: "other", Key: "k", Fingerprint: "not-hex", Count: 1, Owners: []string{"o"},
				Fingerprints: []string{mustFP(payloadA)}, First: -1, Last: -1},
		}},
	}
}

// jsonBodied are the command types whose body is JSON; the others have a
// binary body.
var jsonBodied = map[fsm.CommandType]bool{
	fsm.TypePutPolicy: true, fsm.TypeDeletePolicy: true, fsm.TypeAddSigningKey: true, fsm.TypeSetSettings: true,
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	seen := map[fsm.CommandType]bool{}
	for _, cmd := range everyCommand() {
		t.Run(fmt.Sprintf("%T", cmd), func(t *testing.T) {
			const at = int64(1_740_000_000_123_456_789)
			data, err := fsm.Encode(at, cmd)
			if err != nil {
				t.Fatal(err)
			}
			if data[0] != byte(cmd.Type()) || data[1] != fsm.EncodingVersion {
				t.Fatalf("header bytes %v, want type %d version %d", data[:2], cmd.Type(), fsm.EncodingVersion)
			}
			if isJSON := json.Valid(data[2:]); isJSON != jsonBodied[cmd.Type()] {
				t.Fatalf("body is JSON: %t, want %t: %q", isJSON, jsonBodied[cmd.Type()], data[2:])
			}
			got, err := fsm.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, cmd) {
				t.Fatalf("round trip\n got %#v\nwant %#v", got, cmd)
			}
			again, err := fsm.Encode(at, got)
			if err != nil || !bytes.Equal(again, data) {
				t.Fatalf("re-encoding differs (%v)\n%q\n%q", err, again, data)
			}
			seen[cmd.Type()] = true
		})
	}
	for typ := fsm.TypeClaim; typ <= fsm.TypeNoteDivergent; typ++ {
		if !seen[typ] {
			t.Errorf("command type %d not covered", typ)
		}
	}
}

// TestCallerSurvivesTheLog: the caller a claim, complete, renew or commit
// carries (principal and override) and a policy's allow_self_approval
// come out of the log as they went in, whatever their values.
func TestCallerSurvivesTheLog(t *testing.T) {
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
		data, err := fsm.Encode(rapid.Int64().Draw(t, "at"), cmd)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fsm.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Fatalf("decodes to\n%#v\nwant\n%#v", got, cmd)
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
	c := complete("k", "A", 1, fsm.OutcomeExecuted, "")
	c.Result = json.RawMessage(`{"x":`)
	if _, err := fsm.Encode(t0, c); err == nil {
		t.Fatal("Encode accepted a result that is not JSON")
	}
	cl := claim("k", "A", payloadA)
	cl.Payload = json.RawMessage(`[1,`)
	if _, err := fsm.Encode(t0, cl); err == nil {
		t.Fatal("Encode accepted a payload that is not JSON")
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
	v := fsm.EncodingVersion
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, fsm.ErrMalformed},
		{"one byte", []byte{byte(fsm.TypeCommit)}, fsm.ErrMalformed},
		{"unknown type", withHeader(0x3f, v), fsm.ErrUnknownCommand},
		{"type zero", withHeader(0, v), fsm.ErrUnknownCommand},
		{"unknown ignorable type", withHeader(byte(fsm.IgnorableFlag)|0x3f, v), fsm.ErrIgnorableCommand},
		{"ignorable type with other version", withHeader(byte(fsm.IgnorableFlag)|0x01, 9), fsm.ErrIgnorableCommand},
		{"next version", withHeader(byte(fsm.TypeCommit), v+1), fsm.ErrBadVersion},
		{"version zero", withHeader(byte(fsm.TypeCommit), 0), fsm.ErrBadVersion},
		{"version 255", withHeader(byte(fsm.TypeCommit), 0xff), fsm.ErrBadVersion},
		{"JSON body in another version", append([]byte{byte(fsm.TypeSetSettings), v + 1}, `{"settings":{}}`...), fsm.ErrBadVersion},
		{"body without the caller", valid[:len(valid)-3], fsm.ErrMalformed},
		{"bytes after the body", append(bytes.Clone(valid), 0), fsm.ErrMalformed},
		{"empty body", []byte{byte(fsm.TypeCommit), v}, fsm.ErrMalformed},
		{"JSON body of a binary type", append([]byte{byte(fsm.TypeCommit), v}, `{"ns":"ns","key":"k","owner":"A"}`...), fsm.ErrMalformed},
		{"JSON body not JSON", []byte{byte(fsm.TypePutPolicy), v, '{'}, fsm.ErrMalformed},
		{"empty JSON body", []byte{byte(fsm.TypePutPolicy), v}, fsm.ErrMalformed},
		{"wrong field type", append([]byte{byte(fsm.TypeSetSettings), v}, `{"settings":{"audit_retention":"long"}}`...), fsm.ErrMalformed},
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

// TestRestamp: a command encoded at time 0 and restamped is the entry
// Encode makes at the new time, for every type; entries Decode refuses are
// refused.
func TestRestamp(t *testing.T) {
	for _, cmd := range everyCommand() {
		t.Run(fmt.Sprintf("%T", cmd), func(t *testing.T) {
			unstamped, err := fsm.Encode(0, cmd)
			if err != nil {
				t.Fatal(err)
			}
			keep := bytes.Clone(unstamped)
			for _, at := range []int64{1, t0, 1_740_000_000_123_456_789, -5} {
				got, err := fsm.Restamp(unstamped, at)
				if err != nil {
					t.Fatal(err)
				}
				want, err := fsm.Encode(at, cmd)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("restamped at %d\n got %q\nwant %q", at, got, want)
				}
			}
			if !bytes.Equal(unstamped, keep) {
				t.Fatal("Restamp changed its input")
			}
		})
	}
	valid, err := fsm.Encode(0, commit("k", "A"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, fsm.ErrMalformed},
		{"unknown type", append([]byte{0x3f, fsm.EncodingVersion}, valid[2:]...), fsm.ErrUnknownCommand},
		{"other version", append([]byte{valid[0], fsm.EncodingVersion + 1}, valid[2:]...), fsm.ErrBadVersion},
		{"truncated", valid[:len(valid)-1], fsm.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := fsm.Restamp(tc.data, t0); !errors.Is(err, tc.want) || got != nil {
				t.Fatalf("Restamp = %q, %v; want %v", got, err, tc.want)
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
		data := []byte{typ, fsm.EncodingVersion, '{', '}'}
		v := mustPanic(t, func() { h.l.Apply(2, data) })
		if msg := fmt.Sprint(v); !strings.Contains(msg, "cannot apply log entry 2") || !strings.Contains(msg, "unknown command type") {
			t.Fatalf("panic %q does not explain itself", msg)
		}
	}
	eq(t, "AppliedIndex", h.l.AppliedIndex(), uint64(1))
	eq(t, "Digest", h.l.Digest(), before)
}

// An entry of another encoding version stops the replica, as an unknown
// type does: a replica that skipped it would diverge from one that reads
// it.
func TestApplyBadVersionPanics(t *testing.T) {
	h := newHarness(t)
	h.run(toState(fsm.StateDeclared))
	data, err := fsm.Encode(t0, complete("k", "A", 1, fsm.OutcomeExecuted, ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []byte{0, 2, 3, fsm.EncodingVersion + 1, 0xff} {
		data[1] = version
		v := mustPanic(t, func() { h.l.Apply(2, data) })
		if msg := fmt.Sprint(v); !strings.Contains(msg, "unsupported command encoding version") ||
			!strings.Contains(msg, fmt.Sprintf("version %d", version)) {
			t.Fatalf("panic %q does not name the version", msg)
		}
	}
	eq(t, "State", h.get("k").State, fsm.StateDeclared)
	eq(t, "AppliedIndex", h.l.AppliedIndex(), uint64(1))
}

func TestApplyIgnorableUnknownType(t *testing.T) {
	for _, version := range []byte{fsm.EncodingVersion, fsm.EncodingVersion + 1} {
		h := newHarness(t)
		h.run(toState(fsm.StateDeclared))
		before := h.get("k")
		data := append([]byte{byte(fsm.IgnorableFlag | 0x21), version}, `{"at":99999999999999999,"whatever":[1,2]}`...)
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
}

// A body cut short or followed by a byte is malformed for every type, and
// refusing it changes nothing but the applied index.
func TestApplyMalformedBodyChangesNothing(t *testing.T) {
	for _, cmd := range everyCommand() {
		valid, err := fsm.Encode(t0, cmd)
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{
			"cut short":   valid[:len(valid)-1],
			"a byte more": append(bytes.Clone(valid), '0'),
		} {
			t.Run(fmt.Sprintf("%T/%s", cmd, name), func(t *testing.T) {
				h := newHarness(t)
				h.run(toState(fsm.StateExecuted))
				before, digest := h.get("k"), h.l.Digest()
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
}

func addEncodedSeeds(f *testing.F) {
	for _, cmd := range everyCommand() {
		data, err := fsm.Encode(t0, cmd)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	v := fsm.EncodingVersion
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{1, v})
	f.Add([]byte{byte(fsm.TypeSetSettings), v, 'n', 'u', 'l', 'l'})
	f.Add(append([]byte{byte(fsm.TypePutPolicy), v}, `{"policy":{"name":"p","tools":["a.*"]}, "at":-1}`...))
	f.Add(append([]byte{byte(fsm.TypeAddSigningKey), v}, `{"key":{"id":"k","seed":"","sealed":"AQ=="}}`...))
	f.Add(append([]byte{byte(fsm.TypeClaim), v}, "{\"payload\": { \"b\" : [1, 2.50, \"<\"] , \"a\":null }, \"key\":\"k\"}"...))
	f.Add([]byte{byte(fsm.TypeExpire), v, 0, 0})
	f.Add([]byte{byte(fsm.TypePurge), v, 1, 1, 1, 'n', 1, 'k'})
	f.Add([]byte{byte(fsm.TypeResolve), v, 0, 0, 0, 0, 3, '"', 0xff, '"'})
	f.Add([]byte{0x81, v, '{', '}'})
	f.Add([]byte{byte(fsm.TypePutPolicy), v + 1, '{', '}'})
	f.Add([]byte{byte(fsm.TypeClaim), 3})
}

// FuzzDecode: Decode never panics, and a command it accepts re-encodes into
// an entry that decodes to the same command (and re-encodes to the same
// bytes).
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
		if cmd.Type() != fsm.CommandType(data[0]) || data[1] != fsm.EncodingVersion {
			t.Fatalf("decoded %T from type byte %d, version %d", cmd, data[0], data[1])
		}
		at := reflect.ValueOf(cmd).Elem().FieldByName("At").Int()
		enc, err := fsm.Encode(at, cmd)
		if err != nil {
			t.Fatalf("re-encode %#v: %v", cmd, err)
		}
		again, err := fsm.Decode(enc)
		if err != nil {
			t.Fatalf("decode of re-encoded %q: %v", enc, err)
		}
		same := reflect.DeepEqual(again, cmd)
		if !same && jsonBodied[cmd.Type()] {
			// A JSON body may spell an empty list or byte string that the
			// encoder leaves out (omitempty): the same command.
			a, _ := json.Marshal(again)
			b, _ := json.Marshal(cmd)
			same = bytes.Equal(a, b)
		}
		if !same {
			t.Fatalf("round trip\n got %#v\nwant %#v", again, cmd)
		}
		enc2, err := fsm.Encode(at, again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not a fixed point (%v)\n%q\n%q", err, enc, enc2)
		}
	})
}

// fuzzLedger is a ledger with a record in every state (keys k0..k7 of ns)
// and the last index applied. The records of even keys are bound to API
// key P, the others to none.
func fuzzLedger(t testing.TB) (*fsm.Machine, uint64) {
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
// read independently of the ledger's indexes from its JSON dump.
func checkCounts(t fataler, l *fsm.Machine) {
	t.Helper()
	recount := map[fsm.State]int{}
	records := dumpIntents(t, dumpOf(t, l))
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

func snapshotOf(t fataler, l *fsm.Machine) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := l.WriteSnapshot(&buf); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	return buf.Bytes()
}

// dumpOf is l's JSON dump (WriteSnapshotJSON), with intents as JSON lines.
func dumpOf(t fataler, l *fsm.Machine) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := l.WriteSnapshotJSON(&buf); err != nil {
		t.Fatalf("WriteSnapshotJSON: %v", err)
	}
	return buf.Bytes()
}

// dumpIntents decodes the intent lines of a JSON dump.
func dumpIntents(t fataler, snap []byte) []fsm.Intent {
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
func checkSnapshotRoundTrip(t fataler, l *fsm.Machine) *fsm.Machine {
	t.Helper()
	snap := snapshotOf(t, l)
	restored, err := fsm.Restore(bytes.NewReader(snap))
	if err != nil {
		t.Fatalf("Restore of a fresh snapshot: %v", err)
	}
	if again := snapshotOf(t, restored); !bytes.Equal(snap, again) {
		t.Fatalf("snapshot round trip is not byte-identical\n%s\n%s", snap, again)
	}
	// The records themselves, not only their encoding, must be equal: a
	// replica restored from a snapshot answers with them.
	for _, in := range dumpIntents(t, dumpOf(t, l)) {
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
