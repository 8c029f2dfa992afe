package fsm_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// scenario is a fixed log touching every state, two namespaces, lazy
// expiry, refusals and a purge; payloads and results carry HTML characters
// and insignificant whitespace.
func scenario(t testing.TB) [][]byte {
	t.Helper()
	var log [][]byte
	at := t0
	add := func(d int64, cmd fsm.Command) {
		at += d
		data, err := fsm.Encode(at, cmd)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, data)
	}
	html := claim("html", "A", `{"q":"<a&b>", "n": 1.50}`)
	add(0, html)                                                                      // 1
	add(0, claim("k", "A", payloadA))                                                 // 2
	add(ms(1), claim("k", "B", payloadA))                                             // 3 in_flight
	add(ms(1), complete("html", "A", 1, fsm.OutcomeExecuted, "{ \"id\" : \"<x>\" }")) // 4
	add(ms(1), claim("pend", "A", payloadA))                                          // 5
	add(0, claimApproval("appr", "A", payloadA))                                      // 6
	add(0, claimApproval("rej", "A", payloadA))                                       // 7
	add(0, approve("appr"))                                                           // 8
	add(0, reject("rej"))                                                             // 9
	other := claim("k", "Z", payloadB)
	other.Namespace = "other"
	add(0, other)                                              // 10
	add(0, claim("k", "C", payloadB))                          // 11 divergent
	add(ms(leaseMS)+1, claim("fresh", "A", payloadA))          // 12: k, pend, other/k leases pass
	add(0, expire("pend"))                                     // 13
	add(0, commit("html", "A"))                                // 14
	add(0, claim("k", "B", payloadA))                          // 15: lazy expiry of k
	add(0, complete("fresh", "A", 12, fsm.OutcomeFailed, ""))  // 16
	add(0, claim("fresh", "B", payloadA))                      // 17 new generation
	add(0, claim("gone", "A", payloadA))                       // 18
	add(0, complete("gone", "A", 18, fsm.OutcomeExecuted, "")) // 19
	add(ms(dedupeMS)+ms(leaseMS), purge("gone", "rej", "k"))   // 20: purges gone and rej
	add(0, claim("gone", "D", payloadB))                       // 21 key reused
	return log
}

func applyLog(t testing.TB, l *fsm.Machine, log [][]byte, from uint64) []*fsm.Result {
	t.Helper()
	out := make([]*fsm.Result, len(log))
	for i, e := range log {
		out[i] = l.Apply(from+uint64(i), e)
	}
	return out
}

func TestSnapshotDeterministic(t *testing.T) {
	log := scenario(t)
	a, b := fsm.New(), fsm.New()
	applyLog(t, a, log, 1)
	applyLog(t, b, log, 1)
	sa, sb := snapshotOf(t, a), snapshotOf(t, b)
	if !bytes.Equal(sa, sb) {
		t.Fatalf("two ledgers from the same log give different snapshots\n%s\n%s", sa, sb)
	}
	if !bytes.Equal(sa, snapshotOf(t, a)) {
		t.Fatalf("snapshotting twice gives different bytes")
	}
	sum := sha256.Sum256(sa)
	eq(t, "Digest", a.Digest(), hex.EncodeToString(sum[:]))

	// A snapshot starts with a JSON header line naming its format and
	// version.
	var v1 struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
		Count   int    `json:"count"`
	}
	if err := json.Unmarshal(sa[:bytes.IndexByte(sa, '\n')], &v1); err != nil {
		t.Fatal(err)
	}
	eq(t, "format", v1.Format, fsm.SnapshotFormat)
	eq(t, "version", v1.Version, fsm.SnapshotVersion)
	eq(t, "count", v1.Count, a.Len())

	// The JSON dump (WriteSnapshotJSON): header, one line per intent in
	// (namespace, key) order, one per audit log event, trailer.
	sj := dumpOf(t, a)
	if !bytes.Equal(sj, dumpOf(t, b)) {
		t.Fatalf("two ledgers from the same log give different JSON dumps")
	}
	lines := strings.Split(strings.TrimSuffix(string(sj), "\n"), "\n")
	var hdr struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
		Index   uint64 `json:"index"`
		Now     int64  `json:"now"`
		Count   int    `json:"count"`
		Events  int    `json:"events"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &hdr); err != nil {
		t.Fatal(err)
	}
	eq(t, "format", hdr.Format, fsm.DumpFormat)
	eq(t, "version", hdr.Version, fsm.SnapshotVersion)
	eq(t, "index", hdr.Index, uint64(len(log)))
	eq(t, "now", hdr.Now, a.Now())
	eq(t, "count", hdr.Count, a.Len())
	eq(t, "lines", len(lines), a.Len()+hdr.Events+2)
	if hdr.Events == 0 {
		t.Fatal("the snapshot holds no audit log events")
	}
	var keys []string
	for _, line := range lines[1 : 1+hdr.Count] {
		var in fsm.Intent
		if err := json.Unmarshal([]byte(line), &in); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, in.Namespace+"/"+in.Key)
	}
	eq(t, "order", strings.Join(keys, " "), "ns/appr ns/fresh ns/gone ns/html ns/k ns/pend other/k")
	body := strings.Join(lines[:len(lines)-1], "\n") + "\n"
	sum = sha256.Sum256([]byte(body))
	eq(t, "trailer", lines[len(lines)-1], `{"sha256":"`+hex.EncodeToString(sum[:])+`"}`)
	// Stored raw JSON is compact and not HTML-escaped.
	if !strings.Contains(string(sj), `"payload":{"n":1.5,"q":"<a&b>"}`) || !strings.Contains(string(sj), `"result":{"id":"<x>"}`) {
		t.Fatalf("html payload not stored canonically:\n%s", sj)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	log := scenario(t)
	l := fsm.New()
	applyLog(t, l, log, 1)
	orig := snapshotOf(t, l)
	restored, err := fsm.Restore(bytes.NewReader(orig))
	if err != nil {
		t.Fatal(err)
	}
	if got := snapshotOf(t, restored); !bytes.Equal(got, orig) {
		t.Fatalf("restored ledger snapshots differently\n%s\n%s", got, orig)
	}
	eq(t, "AppliedIndex", restored.AppliedIndex(), l.AppliedIndex())
	eq(t, "Now", restored.Now(), l.Now())
	eq(t, "Len", restored.Len(), l.Len())
	if !reflect.DeepEqual(restored.Counts(), l.Counts()) {
		t.Fatalf("counts %v, want %v", restored.Counts(), l.Counts())
	}
	for _, ref := range []fsm.Ref{{Namespace: ns, Key: "html"}, {Namespace: ns, Key: "k"}, {Namespace: "other", Key: "k"}} {
		if !reflect.DeepEqual(restored.Get(ref.Namespace, ref.Key), l.Get(ref.Namespace, ref.Key)) {
			t.Fatalf("%v differs after restore\n%+v\n%+v", ref, restored.Get(ref.Namespace, ref.Key), l.Get(ref.Namespace, ref.Key))
		}
	}
	// Both go on identically.
	more := [][]byte{}
	for _, cmd := range []fsm.Command{
		complete("fresh", "B", 17, fsm.OutcomeExecuted, `{"a":"&"}`),
		claim("html", "E", payloadA),
		claim("gone", "E", payloadB),
		resolve("k", fsm.OutcomeFailed, ""),
		claim("k", "E", payloadA),
		expire("pend", "k"),
	} {
		data, err := fsm.Encode(l.Now()+ms(dedupeMS), cmd)
		if err != nil {
			t.Fatal(err)
		}
		more = append(more, data)
	}
	ra := applyLog(t, l, more, l.AppliedIndex()+1)
	rb := applyLog(t, restored, more, restored.AppliedIndex()+1)
	if !reflect.DeepEqual(ra, rb) {
		t.Fatalf("results differ after restore")
	}
	eq(t, "Digest", restored.Digest(), l.Digest())
}

// Raw values in log entries need not be compact (Encode keeps them as the
// proposer wrote them): the records a restored replica holds must still
// equal the ones of a replica that applied the log.
func TestRestoredRecordsEqualAppliedOnes(t *testing.T) {
	var entries [][]byte
	for i, cmd := range []fsm.Command{
		&fsm.Claim{Namespace: "ns", Key: "w", Tool: "t", Owner: "A", Payload: raw(`{ "a" : [1, 2], "h":"<&>" }`), Fingerprint: "x",
			LeaseMS: 1000, DedupeWindowMS: 1000},
		&fsm.Complete{Namespace: "ns", Key: "w", Owner: "A", FencingToken: 1, Outcome: fsm.OutcomeExecuted, Result: raw("{\n \"r\" : 1 }")},
	} {
		data, err := fsm.Encode(int64(i+1), cmd)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, data)
	}
	l := fsm.New()
	applyLog(t, l, entries, 1)
	in := l.Get(ns, "w")
	eq(t, "Payload", string(in.Payload), `{"a":[1,2],"h":"<&>"}`)
	eq(t, "Result", string(in.Result), `{"r":1}`)
	restored := checkSnapshotRoundTrip(t, l)
	if !reflect.DeepEqual(restored.Get(ns, "w"), in) {
		t.Fatalf("restored record differs\n%+v\n%+v", restored.Get(ns, "w"), in)
	}
}

func TestSnapshotOfCloneWhileApplying(t *testing.T) {
	log := scenario(t)
	l := fsm.New()
	applyLog(t, l, log[:10], 1)
	clone := l.Clone()
	before := snapshotOf(t, l)
	applyLog(t, l, log[10:], 11)
	if got := snapshotOf(t, clone); !bytes.Equal(got, before) {
		t.Fatalf("clone changed when the original applied")
	}
	if bytes.Equal(snapshotOf(t, l), before) {
		t.Fatalf("original did not move")
	}
}

func TestSnapshotEmptyLedger(t *testing.T) {
	snap := snapshotOf(t, fsm.New())
	l, err := fsm.Restore(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Len", l.Len(), 0)
	eq(t, "AppliedIndex", l.AppliedIndex(), uint64(0))
}

// seal appends the checksum trailer to lines (each without its newline).
func seal(lines ...string) []byte {
	body := strings.Join(lines, "\n") + "\n"
	sum := sha256.Sum256([]byte(body))
	return []byte(body + `{"sha256":"` + hex.EncodeToString(sum[:]) + `"}` + "\n")
}

func header(format string, version int, count int) string {
	return fmt.Sprintf(`{"format":%q,"version":%d,"index":7,"now":%d,"count":%d}`, format, version, t0, count)
}

// TestRestoreRejects: what is not a snapshot of this version is refused,
// with an error wrapping ErrBadSnapshot that says why (record frames that
// do not fit are TestRestoreRefusesBadFrames).
func TestRestoreRejects(t *testing.T) {
	v := fsm.SnapshotVersion
	l := fsm.New()
	applyLog(t, l, scenario(t)[:4], 1)
	cases := map[string]struct {
		data []byte
		text string
	}{
		"empty":                     {nil, "header"},
		"header only":               {[]byte(header(fsm.SnapshotFormat, v, 0) + "\n"), "trailer"},
		"no trailer":                {[]byte(header(fsm.SnapshotFormat, v, 0) + "\n" + `{"sha256":"x"}`), "trailer"},
		"wrong format":              {seal(header("consul-kv", v, 0)), `format "consul-kv" version 1`},
		"next version":              {seal(header(fsm.SnapshotFormat, v+1, 0)), "version 2; this version reads"},
		"version zero":              {seal(header(fsm.SnapshotFormat, 0, 0)), "version 0; this version reads"},
		"version 3 (before v1)":     {seal(header(fsm.SnapshotFormat, 3, 0)), "version 3; this version reads"},
		"a JSON dump":               {dumpOf(t, l), "a JSON dump"},
		"an empty ledger's dump":    {dumpOf(t, fsm.New()), "a JSON dump"},
		"negative count":            {seal(header(fsm.SnapshotFormat, v, -1)), "count -1"},
		"header not JSON":           {seal(`format=intentd-ledger`), "header"},
		"count past the frames":     {seal(header(fsm.SnapshotFormat, v, 1)), "intent 0"},
		"bad checksum":              {[]byte(header(fsm.SnapshotFormat, v, 0) + "\n" + `{"sha256":"` + strings.Repeat("0", 64) + `"}` + "\n"), "checksum"},
		"trailer not JSON":          {[]byte(header(fsm.SnapshotFormat, v, 0) + "\nsha256\n"), "trailer"},
		"more intents than entries": {seal(header(fsm.SnapshotFormat, v, 8)), "commands applied"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := fsm.Restore(bytes.NewReader(tc.data))
			if !errors.Is(err, fsm.ErrBadSnapshot) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Restore error %v, want ErrBadSnapshot saying %q", err, tc.text)
			}
			if l != nil {
				t.Fatalf("ledger returned with an error")
			}
		})
	}
}

func TestRestoreRejectsEveryTruncation(t *testing.T) {
	l := fsm.New()
	applyLog(t, l, scenario(t)[:4], 1)
	snap := snapshotOf(t, l)
	for n := 0; n < len(snap); n++ {
		if _, err := fsm.Restore(bytes.NewReader(snap[:n])); !errors.Is(err, fsm.ErrBadSnapshot) {
			t.Fatalf("truncated to %d of %d bytes: error %v", n, len(snap), err)
		}
	}
}

func TestRestoreRejectsEveryFlippedByte(t *testing.T) {
	l := fsm.New()
	applyLog(t, l, scenario(t)[:4], 1)
	snap := snapshotOf(t, l)
	for i := range snap {
		for _, mask := range []byte{0x01, 0x80} {
			bad := bytes.Clone(snap)
			bad[i] ^= mask
			if _, err := fsm.Restore(bytes.NewReader(bad)); !errors.Is(err, fsm.ErrBadSnapshot) {
				t.Fatalf("byte %d (%q) ^ %#x accepted: %v", i, snap[i], mask, err)
			}
		}
	}
}

func TestIndexesRebuiltAfterRestore(t *testing.T) {
	h := newHarness(t)
	h.must(claim("a", "A", payloadA), fsm.StatusGranted) // lease t0+1s
	h.advance(ms(10))
	h.must(claim("b", "A", payloadA), fsm.StatusGranted) // lease t0+1.01s
	h.must(claim("c", "A", payloadA), fsm.StatusGranted)
	h.must(complete("c", "A", 3, fsm.OutcomeExecuted, ""), fsm.StatusOK) // purge at t0+10ms+window
	h.must(claim("d", "A", payloadA), fsm.StatusGranted)
	h.must(complete("d", "A", 5, fsm.OutcomeFailed, ""), fsm.StatusOK)

	restored, err := fsm.Restore(bytes.NewReader(snapshotOf(t, h.l)))
	if err != nil {
		t.Fatal(err)
	}
	far := t0 + ms(10*dedupeMS)
	for _, at := range []int64{t0, t0 + ms(leaseMS) + 1, t0 + ms(leaseMS+10) + 1, far} {
		if got, want := restored.DueLeases(at, 10), h.l.DueLeases(at, 10); !reflect.DeepEqual(got, want) {
			t.Fatalf("DueLeases(%d) after restore = %v, want %v", at, got, want)
		}
		if got, want := restored.DuePurges(at, 10), h.l.DuePurges(at, 10); !reflect.DeepEqual(got, want) {
			t.Fatalf("DuePurges(%d) after restore = %v, want %v", at, got, want)
		}
	}
	eq(t, "due leases far out", len(restored.DueLeases(far, 10)), 2)
	eq(t, "due purges far out", len(restored.DuePurges(far, 10)), 2)
	// The rebuilt indexes are kept up to date by later commands.
	data, err := fsm.Encode(far, expire("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	r := restored.Apply(restored.AppliedIndex()+1, data)
	eq(t, "expired", r.Count, 2)
	eq(t, "due leases after expiry", len(restored.DueLeases(far, 10)), 0)
	data, err = fsm.Encode(far, purge("c", "d", "a"))
	if err != nil {
		t.Fatal(err)
	}
	r = restored.Apply(restored.AppliedIndex()+1, data)
	eq(t, "purged", r.Count, 2)
	eq(t, "due purges after purge", len(restored.DuePurges(far, 10)), 0)
	checkCounts(t, restored)
}

// FuzzRestore: Restore never panics, and whatever it accepts snapshots and
// restores again to the same ledger. Each input is tried as it is and, so
// the fuzzer gets past the checksum, as the body of a snapshot whose
// trailer is computed for it.
func FuzzRestore(f *testing.F) {
	l := fsm.New()
	applyLog(f, l, scenario(f), 1)
	f.Add(snapshotOf(f, l))
	f.Add(snapshotOf(f, fsm.New()))
	small := fsm.New()
	applyLog(f, small, scenario(f)[:2], 1)
	f.Add(snapshotOf(f, small))
	f.Add(dumpOf(f, small))
	v := fsm.SnapshotVersion
	f.Add(seal(header(fsm.SnapshotFormat, v, 1<<40)))
	f.Add(seal(header(fsm.SnapshotFormat, v+1, 0)))
	f.Add([]byte(header(fsm.SnapshotFormat, v, 1) + "\n\x00\x00\x00\x01\x00\n"))
	f.Add(seal(strings.Replace(header(fsm.SnapshotFormat, v, 0), `"index":7`, `"index":18446744073709551615`, 1)))
	f.Add(seal(strings.Replace(header(fsm.SnapshotFormat, v, 0), `"now":`, `"now":9223372036854775807,"x":`, 1)))
	f.Add(seal(strings.Replace(header(fsm.SnapshotFormat, v, 0), "}", `,"keys":[{"id":"k","seed":"AQID","created_at":0}]}`, 1)))
	f.Add([]byte("\n\n\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		body := data
		if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
			body = body[:i]
		}
		for _, in := range [][]byte{data, seal(string(body))} {
			l, err := fsm.Restore(bytes.NewReader(in))
			if err != nil {
				if !errors.Is(err, fsm.ErrBadSnapshot) || l != nil {
					t.Fatalf("Restore: %v (ledger %v)", err, l != nil)
				}
				continue
			}
			checkCounts(t, l)
			again := checkSnapshotRoundTrip(t, l)
			if !reflect.DeepEqual(again.Counts(), l.Counts()) || again.AppliedIndex() != l.AppliedIndex() || again.Now() != l.Now() {
				t.Fatalf("second restore differs")
			}
			// Indexes are usable: sweeping everything due changes only what is due.
			leases, purges := l.DueLeases(l.Now(), 1000), l.DuePurges(l.Now(), 1000)
			for _, ref := range leases {
				if in := l.Get(ref.Namespace, ref.Key); in == nil || in.State != fsm.StateDeclared {
					t.Fatalf("due lease %v is %+v", ref, in)
				}
			}
			for _, ref := range purges {
				if in := l.Get(ref.Namespace, ref.Key); in == nil || !in.State.Finished() {
					t.Fatalf("due purge %v is %+v", ref, in)
				}
			}
		}
	})
}
