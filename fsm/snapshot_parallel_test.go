package fsm

import (
	"bufio"
	"bytes"
	"encoding/json"
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

func TestWriteIntentsMatchesSequentialEncoding(t *testing.T) {
	for _, n := range []int{0, 1, snapshotChunk - 1, snapshotChunk, 3*snapshotChunk + 7} {
		l := bigLedger(t, n)
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		l.intents.Ascend(func(in *Intent) bool {
			if err := enc.Encode(in); err != nil {
				t.Fatal(err)
			}
			return true
		})
		var got bytes.Buffer
		bw := bufio.NewWriter(&got)
		if err := l.writeIntents(bw); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
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

func TestRestoreRefusesABadLineInALaterChunk(t *testing.T) {
	l := bigLedger(t, 2*snapshotChunk+10)
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(snap.Bytes(), []byte("\n"))
	bad := bytes.Clone(snap.Bytes())
	// Line 1+snapshotChunk+5 is an intent in the second chunk.
	off := 0
	for _, ln := range lines[:1+snapshotChunk+5] {
		off += len(ln)
	}
	bad[off] = '!'
	if _, err := Restore(bytes.NewReader(bad)); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("corrupt intent line: %v", err)
	}
	truncated := snap.Bytes()[:off]
	if _, err := Restore(bytes.NewReader(truncated)); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("truncated snapshot: %v", err)
	}
	// Two intents swapped: decodes fine, but out of order.
	swapped := append([][]byte{}, lines...)
	swapped[snapshotChunk+3], swapped[snapshotChunk+4] = swapped[snapshotChunk+4], swapped[snapshotChunk+3]
	if _, err := Restore(bytes.NewReader(bytes.Join(swapped, nil))); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("swapped intents: %v", err)
	}
}
