package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// bigLedger holds n claimed intents, some with HTML characters and
// unicode in their payloads, across a few namespaces.
func bigLedger(t *testing.T, n int) *Machine {
	t.Helper()
	l := New()
	for i := 0; i < n; i++ {
		payload := fmt.Appendf(nil, `{"n":%d,"s":"<a&b> é \u2028 %d"}`, i, i)
		canonical, fp, err := Fingerprint("tool", payload)
		if err != nil {
			t.Fatal(err)
		}
		c := &Claim{Header: Header{At: int64(1e18) + int64(i)}, Namespace: fmt.Sprintf("ns%d", i%3),
			Key: fmt.Sprintf("key-%06d", i), Tool: "tool", Owner: "o", Payload: canonical, Fingerprint: fp,
			LeaseMS: 1000, DedupeWindowMS: 1000}
		if r := l.ApplyCommand(uint64(i+1), c); r.Status != StatusGranted {
			t.Fatalf("claim %d: %s", i, r.Status)
		}
	}
	return l
}

// sequentialRecords is the record frames of l encoded one by one.
func sequentialRecords(l *Machine) []byte {
	var b []byte
	for _, ns := range l.Namespaces() {
		l.ascend(ns, "", func(r *record) bool {
			at := len(b)
			b = append(b, 0, 0, 0, 0)
			b = appendRecord(b, r)
			binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
			return true
		})
	}
	return b
}

// parallelRecords is the record frames of l as writeRecords writes them.
func parallelRecords(t *testing.T, l *Machine) []byte {
	t.Helper()
	var got bytes.Buffer
	bw := bufio.NewWriter(&got)
	if err := l.writeRecords(bw); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return got.Bytes()
}

func TestWriteRecordsMatchesSequentialEncoding(t *testing.T) {
	for _, n := range []int{0, 1, snapshotChunk - 1, snapshotChunk, 3*snapshotChunk + 7} {
		l := bigLedger(t, n)
		if !bytes.Equal(parallelRecords(t, l), sequentialRecords(l)) {
			t.Fatalf("%d intents: parallel encoding differs from sequential", n)
		}
		var snap bytes.Buffer
		if err := l.WriteSnapshot(&snap); err != nil {
			t.Fatal(err)
		}
		r, err := Restore(bytes.NewReader(snap.Bytes()))
		if err != nil {
			t.Fatalf("%d intents: %v", n, err)
		}
		if r.Len() != n || r.Digest() != l.Digest() {
			t.Fatalf("%d intents: restored %d, digests equal %v", n, r.Len(), r.Digest() == l.Digest())
		}
	}
}

// frames returns the offsets of the record frames in a snapshot of n
// intents (the header is the first line).
func frames(t *testing.T, snap []byte, n int) []int {
	t.Helper()
	off := bytes.IndexByte(snap, '\n') + 1
	var out []int
	for i := 0; i < n; i++ {
		out = append(out, off)
		off += 4 + int(binary.BigEndian.Uint32(snap[off:]))
	}
	return append(out, off)
}

func TestRestoreRefusesABadRecordInALaterChunk(t *testing.T) {
	n := 2*snapshotChunk + 10
	l := bigLedger(t, n)
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	data := snap.Bytes()
	fr := frames(t, data, n)
	// Record snapshotChunk+5 is in the second chunk.
	i := snapshotChunk + 5
	for _, corrupt := range []struct {
		name string
		at   int
		b    byte
	}{
		{"state code", fr[i+1] - 10, 0xee}, // inside the record's fixed tail
		{"frame length", fr[i], 0x7f},      // a length past the limit
		{"a payload byte", fr[i] + 20, '!'},
	} {
		bad := bytes.Clone(data)
		bad[corrupt.at] ^= corrupt.b
		if _, err := Restore(bytes.NewReader(bad)); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("corrupt %s: %v", corrupt.name, err)
		}
	}
	if _, err := Restore(bytes.NewReader(data[:fr[i]+7])); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("truncated snapshot: %v", err)
	}
	// Two records swapped: both decode, but out of order.
	a, b, c := fr[i], fr[i+1], fr[i+2]
	swapped := append(append(append(bytes.Clone(data[:a]), data[b:c]...), data[a:b]...), data[c:]...)
	if _, err := Restore(bytes.NewReader(swapped)); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("swapped intents: %v", err)
	}
}

// TestLargeRecordsCutChunksEarly: records with large payloads end a chunk
// before snapshotChunk records, on writing and on restoring, and the bytes
// and the restored state are still those of the one-by-one encoding.
func TestLargeRecordsCutChunksEarly(t *testing.T) {
	l := bigLedger(t, snapshotChunk+50)
	big := []byte(`"` + string(bytes.Repeat([]byte("x"), snapshotChunkBytes/3)) + `"`)
	for i := 0; i < 7; i++ { // a chunk of small records, then chunks of three large ones
		c := &Claim{Header: Header{At: int64(2e18) + int64(i)}, Namespace: "ns1", Key: fmt.Sprintf("key-%06d-big", 100*i),
			Tool: "tool", Owner: "o", Payload: big, Fingerprint: "raw", LeaseMS: 1000, DedupeWindowMS: 1000}
		if r := l.ApplyCommand(uint64(snapshotChunk+100+i), c); r.Status != StatusGranted {
			t.Fatalf("big claim %d: %s %s", i, r.Status, r.Detail)
		}
	}
	if !bytes.Equal(parallelRecords(t, l), sequentialRecords(l)) {
		t.Fatal("parallel encoding differs from sequential")
	}
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	r, err := Restore(bytes.NewReader(snap.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != l.Len() || r.Digest() != l.Digest() {
		t.Fatalf("restored %d of %d intents, digests equal %v", r.Len(), l.Len(), r.Digest() == l.Digest())
	}
}

// TestRestoreCompactsPayloads: a payload and result that carry whitespace
// (a crafted frame) restore compact, as apply stores them.
func TestRestoreCompactsPayloads(t *testing.T) {
	loose, err := compact(&Intent{Namespace: "ns", Key: "k", State: StateExecuted, Fingerprint: strings.Repeat("0", 64),
		Payload: []byte(`{ "a" : [1, 2] }`), Result: []byte(`[ "ok" ]`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRecord(appendRecord(nil, loose))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.payload) != `{"a":[1,2]}` || got.result != `["ok"]` {
		t.Fatalf("payload %s, result %s: want them compact", got.payload, got.result)
	}
}

// TestConcurrentClones: raft's snapshot and an operator's backup clone the
// ledger at the same time under a shared read lock; run with -race, this
// fails if Clone writes shared state unguarded.
func TestConcurrentClones(t *testing.T) {
	l := bigLedger(t, 100)
	want := l.Digest()
	clones := make(chan *Machine, 4)
	for range 4 {
		go func() { clones <- l.Clone() }()
	}
	for range 4 {
		if c := <-clones; c.Digest() != want {
			t.Fatal("a clone differs from the ledger")
		}
	}
}
