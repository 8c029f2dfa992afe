package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// bigLedger holds n claimed intents, some with HTML characters and
// unicode in their payloads, across a few namespaces.
func bigLedger(t *testing.T, n int) *Ledger {
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
func sequentialRecords(l *Ledger) []byte {
	var b []byte
	l.intents.Ascend(func(r *record) bool {
		at := len(b)
		b = append(b, 0, 0, 0, 0)
		b = appendRecord(b, r)
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
		return true
	})
	return b
}

func TestWriteRecordsMatchesSequentialEncoding(t *testing.T) {
	for _, n := range []int{0, 1, snapshotChunk - 1, snapshotChunk, 3*snapshotChunk + 7} {
		l := bigLedger(t, n)
		want := sequentialRecords(l)
		var got bytes.Buffer
		bw := bufio.NewWriter(&got)
		if err := l.writeRecords(bw); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
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

// frames returns the offsets of the record frames in a version 3
// snapshot of n intents (the header is the first line).
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
