package fsm_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

var (
	propRefs = []fsm.Ref{{Namespace: ns, Key: "k0"}, {Namespace: ns, Key: "k1"}, {Namespace: ns, Key: "k2"},
		{Namespace: "other", Key: "k0"}}
	propOwners = []string{"o0", "o1", "o2"}
	// The third payload equals the first under JCS: same fingerprint.
	propPayloads = []string{`{"v":0,"w":"<&>"}`, `{"v":1}`, `{ "w" : "<&>", "v" : 0.0 }`}
	propResults  = []string{"", `{"id":1}`, `{ "id" : 2 }`}
	propLeases   = []int64{50, 1000, 1000}
	propWindows  = []int64{200, 3000}
	// Proposal clock steps in nanoseconds, including ones that pass
	// leases and dedupe windows; negative steps stamp a command in the past
	// (an older leader's clock) without moving the proposer's clock.
	propSteps = []int64{0, 0, 1, ms(1), ms(1), ms(10), ms(49), ms(50) + 1, ms(400), ms(1000) + 1, ms(3001), -ms(500)}
	// Payload choices, weighted towards the two equal ones.
	propPayloadPicks = []int{0, 0, 0, 2, 2, 2, 1}
)

// propModel generates commands against a ledger and checks every answer.
type propModel struct {
	l     *fsm.Machine
	clock int64
	log   [][]byte
	res   []*fsm.Result

	// grants[key][generation] is the owner granted in the key's current
	// incarnation (a purge starts a new one).
	grants map[fsm.Ref]map[uint64]string
	// tokens[key] are the fencing tokens granted for the key, in order,
	// across incarnations, with the owner each went to.
	tokens      map[fsm.Ref][]uint64
	tokenOwners map[fsm.Ref]map[uint64]string
}

func (m *propModel) key(t *rapid.T) fsm.Ref { return rapid.SampledFrom(propRefs).Draw(t, "key") }

func (m *propModel) owner(t *rapid.T, ref fsm.Ref) string {
	if in := m.l.Get(ref.Namespace, ref.Key); in != nil && in.Owner != "" && rapid.Bool().Draw(t, "right owner") {
		return in.Owner
	}
	return rapid.SampledFrom(propOwners).Draw(t, "owner")
}

func (m *propModel) token(t *rapid.T, ref fsm.Ref) uint64 {
	switch rapid.IntRange(0, 3).Draw(t, "token kind") {
	case 0, 1:
		if in := m.l.Get(ref.Namespace, ref.Key); in != nil {
			return in.FencingToken
		}
	case 2:
		if ts := m.tokens[ref]; len(ts) > 0 {
			return rapid.SampledFrom(ts).Draw(t, "stale token")
		}
	}
	return rapid.Uint64Range(0, uint64(len(m.log))+2).Draw(t, "random token")
}

func (m *propModel) refs(t *rapid.T, due []fsm.Ref) []fsm.Ref {
	if len(due) > 0 && rapid.Bool().Draw(t, "sweep what is due") {
		return due
	}
	return rapid.SliceOfN(rapid.SampledFrom(propRefs), 0, 3).Draw(t, "sweep keys")
}

// command draws the next command, or raw log bytes for an entry that is
// ignorable or malformed.
func (m *propModel) command(t *rapid.T, at int64) (fsm.Command, []byte) {
	ref := m.key(t)
	outcome := rapid.SampledFrom([]fsm.Outcome{fsm.OutcomeExecuted, fsm.OutcomeFailed}).Draw(t, "outcome")
	result := rapid.SampledFrom(propResults).Draw(t, "result")
	switch kind := rapid.IntRange(0, 19).Draw(t, "kind"); {
	case kind < 7:
		c := claim(ref.Key, rapid.SampledFrom(propOwners).Draw(t, "owner"), propPayloads[rapid.SampledFrom(propPayloadPicks).Draw(t, "payload")])
		c.Namespace = ref.Namespace
		c.LeaseMS = rapid.SampledFrom(propLeases).Draw(t, "lease")
		c.DedupeWindowMS = rapid.SampledFrom(propWindows).Draw(t, "window")
		c.RequireApproval = rapid.IntRange(0, 5).Draw(t, "approval") == 0
		return c, nil
	case kind < 10:
		c := complete(ref.Key, m.owner(t, ref), m.token(t, ref), outcome, result)
		c.Namespace = ref.Namespace
		return c, nil
	case kind < 11:
		c := renew(ref.Key, m.owner(t, ref), m.token(t, ref), rapid.SampledFrom(propLeases).Draw(t, "lease"))
		c.Namespace = ref.Namespace
		return c, nil
	case kind < 12:
		c := commit(ref.Key, m.owner(t, ref))
		c.Namespace = ref.Namespace
		return c, nil
	case kind < 14:
		c := resolve(ref.Key, outcome, result)
		c.Namespace = ref.Namespace
		return c, nil
	case kind < 15:
		if rapid.Bool().Draw(t, "approve") {
			c := approve(ref.Key)
			c.Namespace = ref.Namespace
			return c, nil
		}
		c := reject(ref.Key)
		c.Namespace = ref.Namespace
		return c, nil
	case kind < 17:
		return &fsm.Expire{Keys: m.refs(t, m.l.DueLeases(at, 5))}, nil
	case kind < 19:
		return &fsm.Purge{Keys: m.refs(t, m.l.DuePurges(at, 5))}, nil
	default:
		if rapid.Bool().Draw(t, "ignorable") {
			return nil, []byte{byte(fsm.IgnorableFlag | 0x10), fsm.EncodingVersion, '{', '}'}
		}
		return nil, []byte{byte(fsm.TypeComplete), fsm.EncodingVersion, '{'}
	}
}

func TestProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &propModel{
			l: fsm.New(), clock: t0,
			grants:      map[fsm.Ref]map[uint64]string{},
			tokens:      map[fsm.Ref][]uint64{},
			tokenOwners: map[fsm.Ref]map[uint64]string{},
		}
		n := rapid.IntRange(1, 80).Draw(t, "commands")
		cloneAt := rapid.IntRange(0, n).Draw(t, "clone at")
		var clone *fsm.Machine
		var cloneDigest string
		var cloneIntents []byte

		for i := 0; i < n; i++ {
			if i == cloneAt {
				clone = m.l.Clone()
				cloneDigest = clone.Digest()
				cloneIntents = mustJSON(t, intentsOf(clone))
			}
			dt := rapid.SampledFrom(propSteps).Draw(t, "dt")
			at := m.clock + dt
			if dt > 0 {
				m.clock = at
			}
			cmd, data := m.command(t, at)
			if cmd != nil {
				var err error
				if data, err = fsm.Encode(at, cmd); err != nil {
					t.Fatalf("encode: %v", err)
				}
			}
			m.step(t, data, at)
		}
		if clone == nil {
			clone = m.l.Clone()
			cloneDigest = clone.Digest()
			cloneIntents = mustJSON(t, intentsOf(clone))
		}

		// (d) The clone did not move while the original applied.
		if clone.Digest() != cloneDigest {
			t.Fatalf("clone digest changed after later applies")
		}
		if !bytes.Equal(mustJSON(t, intentsOf(clone)), cloneIntents) {
			t.Fatalf("clone records changed after later applies")
		}

		// (c) Snapshot at a random point, restore, apply the rest: same
		// results and the same digest as applying everything directly.
		split := rapid.IntRange(0, len(m.log)).Draw(t, "snapshot at")
		b := fsm.New()
		for i, e := range m.log[:split] {
			if r := b.Apply(uint64(i+1), e); !reflect.DeepEqual(r, m.res[i]) {
				t.Fatalf("entry %d: replay differs\n%+v\n%+v", i+1, r, m.res[i])
			}
		}
		var buf bytes.Buffer
		if err := b.Clone().WriteSnapshot(&buf); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		restored, err := fsm.Restore(&buf)
		if err != nil {
			t.Fatalf("restore: %v", err)
		}
		for i := split; i < len(m.log); i++ {
			r := restored.Apply(uint64(i+1), m.log[i])
			if !reflect.DeepEqual(r, m.res[i]) {
				t.Fatalf("entry %d after restoring a snapshot at %d: result differs\n got %+v\nwant %+v",
					i+1, split, r, m.res[i])
			}
		}
		if restored.Digest() != m.l.Digest() {
			t.Fatalf("digest after restore at %d differs from direct application", split)
		}
		checkCounts(t, restored)

		// (e) A ledger reopened from its store after a Commit goes on as
		// if it had never stopped: what Commit writes (usage, audit heads,
		// policies, the indexes) is all Open needs.
		st := fsm.NewMemoryStore()
		o, err := fsm.Open(st)
		if err != nil {
			t.Fatal(err)
		}
		reopenAt := rapid.IntRange(0, len(m.log)).Draw(t, "reopen at")
		for i, e := range m.log {
			if i == reopenAt {
				o.Commit(uint64(i))
				if o, err = fsm.Open(st); err != nil {
					t.Fatalf("reopen at %d: %v", i, err)
				}
				if o.StoredIndex() != uint64(i) {
					t.Fatalf("reopened at %d: stored index %d", i, o.StoredIndex())
				}
			}
			if r := o.Apply(uint64(i+1), e); !reflect.DeepEqual(r, m.res[i]) {
				t.Fatalf("entry %d after reopening at %d: result differs\n got %+v\nwant %+v", i+1, reopenAt, r, m.res[i])
			}
		}
		checkSameLedger(t, o, m.l)
	})
}

// checkSameLedger fails unless got and want hold the same ledger, as
// every reader sees it.
func checkSameLedger(t *rapid.T, got, want *fsm.Machine) {
	if got.Digest() != want.Digest() {
		t.Fatalf("digest differs")
	}
	if !reflect.DeepEqual(got.Counts(), want.Counts()) || got.Len() != want.Len() || got.Now() != want.Now() {
		t.Fatalf("counts %v len %d now %d, want %v %d %d", got.Counts(), got.Len(), got.Now(), want.Counts(), want.Len(), want.Now())
	}
	if !reflect.DeepEqual(got.Namespaces(), want.Namespaces()) {
		t.Fatalf("namespaces %v, want %v", got.Namespaces(), want.Namespaces())
	}
	for _, ns := range append(want.Namespaces(), fsm.SystemNamespace) {
		if !reflect.DeepEqual(got.NamespaceUsage(ns), want.NamespaceUsage(ns)) {
			t.Fatalf("usage of %q differs", ns)
		}
		if got.AuditHead(ns) != want.AuditHead(ns) {
			t.Fatalf("audit head of %q: %+v, want %+v", ns, got.AuditHead(ns), want.AuditHead(ns))
		}
		ge, gn := got.AuditEvents(ns, 0, 1000)
		we, wn := want.AuditEvents(ns, 0, 1000)
		if !reflect.DeepEqual(ge, we) || gn != wn {
			t.Fatalf("audit events of %q differ", ns)
		}
	}
	for _, due := range []int64{0, t0, t0 + 1e12, 1 << 62} {
		if !reflect.DeepEqual(got.DueLeases(due, 100), want.DueLeases(due, 100)) ||
			!reflect.DeepEqual(got.DuePurges(due, 100), want.DuePurges(due, 100)) {
			t.Fatalf("due at %d differs", due)
		}
	}
	if !reflect.DeepEqual(got.Policies(), want.Policies()) || !reflect.DeepEqual(got.SigningKeys(), want.SigningKeys()) ||
		got.Settings() != want.Settings() {
		t.Fatalf("policies, keys or settings differ")
	}
}

// step applies one entry stamped at and checks the properties that hold
// after every command.
func (m *propModel) step(t *rapid.T, data []byte, at int64) {
	index := uint64(len(m.log) + 1)
	before := map[fsm.Ref]*fsm.Intent{}
	for _, ref := range propRefs {
		before[ref] = m.l.Get(ref.Namespace, ref.Key)
	}
	prevNow := m.l.Now()
	effective := max(at, prevNow)
	cmd, _ := fsm.Decode(data)

	r := m.l.Apply(index, data)
	m.log = append(m.log, data)
	m.res = append(m.res, r)
	checkErr(t, r)
	if r.Index != index || m.l.AppliedIndex() != index {
		t.Fatalf("index %d: result index %d, applied %d", index, r.Index, m.l.AppliedIndex())
	}
	// Time never runs backwards and is the command's when that is later.
	if cmd != nil && m.l.Now() != effective {
		t.Fatalf("Now() = %d after a command at %d with previous time %d", m.l.Now(), at, prevNow)
	}
	if m.l.Now() < prevNow {
		t.Fatalf("time ran backwards")
	}

	if c, ok := cmd.(*fsm.Claim); ok && r.Status == fsm.StatusGranted {
		ref := fsm.Ref{Namespace: c.Namespace, Key: c.Key}
		in, prev := r.Intent, before[ref]
		// (b) An in_doubt key, or a declared one whose lease this command
		// passes, is never granted.
		if prev != nil && (prev.State == fsm.StateInDoubt || (prev.State == fsm.StateDeclared && effective > prev.LeaseDeadline)) {
			t.Fatalf("index %d: granted %v from %s (lease deadline %d, time %d)", index, ref, prev.State,
				prev.LeaseDeadline, effective)
		}
		if in.Owner != c.Owner || in.State != fsm.StateDeclared {
			t.Fatalf("granted intent %+v for claim by %s", in, c.Owner)
		}
		// (a) One owner per key and generation; tokens of successive grants
		// strictly increase.
		gens := m.grants[ref]
		if gens == nil {
			gens = map[uint64]string{}
			m.grants[ref] = gens
		}
		if owner, seen := gens[in.Generation]; seen && owner != c.Owner {
			t.Fatalf("index %d: %v generation %d granted to %s and %s", index, ref, in.Generation, owner, c.Owner)
		}
		if r.Created {
			if in.FencingToken != index {
				t.Fatalf("new grant token %d at index %d", in.FencingToken, index)
			}
			if ts := m.tokens[ref]; len(ts) > 0 && ts[len(ts)-1] >= in.FencingToken {
				t.Fatalf("token %d does not increase on %d", in.FencingToken, ts[len(ts)-1])
			}
			if _, seen := gens[in.Generation]; seen {
				t.Fatalf("generation %d of %v granted twice", in.Generation, ref)
			}
			var want uint64 = 1
			if prev != nil {
				want = prev.Generation + 1
			}
			if in.Generation != want {
				t.Fatalf("new grant generation %d, want %d", in.Generation, want)
			}
			gens[in.Generation] = c.Owner
			m.tokens[ref] = append(m.tokens[ref], in.FencingToken)
			if m.tokenOwners[ref] == nil {
				m.tokenOwners[ref] = map[uint64]string{}
			}
			m.tokenOwners[ref][in.FencingToken] = c.Owner
		} else if prev == nil || prev.FencingToken != in.FencingToken || prev.Owner != c.Owner {
			t.Fatalf("repeated grant changed the grant: %+v -> %+v", prev, in)
		}
	}

	for _, ref := range propRefs {
		in, prev := m.l.Get(ref.Namespace, ref.Key), before[ref]
		if in == nil {
			if prev != nil {
				// Only a purge removes a record, and only a finished one
				// whose window has passed.
				if _, ok := cmd.(*fsm.Purge); !ok || !prev.State.Finished() ||
					effective < prev.UpdatedAt+prev.DedupeWindowMS*int64(1e6) {
					t.Fatalf("index %d: %v (%s) removed by %T", index, ref, prev.State, cmd)
				}
				delete(m.grants, ref) // a new incarnation starts
			}
			continue
		}
		if in.Version > index || in.Namespace != ref.Namespace || in.Key != ref.Key {
			t.Fatalf("record %+v", in)
		}
		if prev != nil && !reflect.DeepEqual(in, prev) && in.Version != index {
			t.Fatalf("index %d: %v changed but Version is %d", index, ref, in.Version)
		}
		// (f) Whoever executed (or committed) was granted that token.
		if in.State == fsm.StateExecuted || in.State == fsm.StateCommitted {
			if owner, ok := m.tokenOwners[ref][in.FencingToken]; !ok || owner != in.Owner {
				t.Fatalf("index %d: %v %s by %s with token %d, which was granted to %q", index, ref, in.State,
					in.Owner, in.FencingToken, owner)
			}
		}
		// An in_doubt record only leaves in_doubt through a report or a resolve.
		if prev != nil && prev.State == fsm.StateInDoubt && in.State != fsm.StateInDoubt {
			switch cmd.(type) {
			case *fsm.Complete, *fsm.Resolve:
			default:
				t.Fatalf("index %d: %v left in_doubt for %s by %T", index, ref, in.State, cmd)
			}
		}
		if len(in.Audit) > fsm.MaxAuditEvents {
			t.Fatalf("audit of %d events", len(in.Audit))
		}
	}
	// (e) Counts match a recount.
	checkCounts(t, m.l)
}

func intentsOf(l *fsm.Machine) []*fsm.Intent {
	var out []*fsm.Intent
	for _, n := range []string{ns, "other"} {
		page, _ := l.List(fsm.ListOptions{Namespace: n, Limit: 1000})
		out = append(out, page...)
	}
	return out
}

func mustJSON(t fataler, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Equal payloads under JCS never diverge, whatever their bytes.
func TestPropertyEqualPayloadsNeverDiverge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.MapOfN(rapid.StringMatching(`[a-c<&]{1,3}`), rapid.OneOf(
			rapid.Map(rapid.IntRange(-1000, 1000), func(i int) any { return i }),
			rapid.Map(rapid.StringMatching(`[a-z<>&é]{0,4}`), func(s string) any { return s }),
			rapid.Just[any](nil),
		), 0, 4).Draw(t, "payload")
		a, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		// The same value with indentation and HTML escaping.
		var ind bytes.Buffer
		if err := json.Indent(&ind, a, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		l := fsm.New()
		data, _ := fsm.Encode(t0, claim("k", "A", string(a)))
		l.Apply(1, data)
		data, _ = fsm.Encode(t0, claim("k", "B", ind.String()))
		r := l.Apply(2, data)
		if r.Status != fsm.StatusInFlight {
			t.Fatalf("%s then %s: %s (%s)", a, ind.String(), r.Status, r.Detail)
		}
	})
}
