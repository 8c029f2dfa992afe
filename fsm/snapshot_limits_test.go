package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// bigJSON is a JSON string of exactly n bytes.
func bigJSON(n int) []byte {
	return []byte(`"` + strings.Repeat("a", n-2) + `"`)
}

// TestSnapshotHoldsTheLargestRecord: an intent with the largest payload
// and result the ledger accepts is written into a snapshot that restores
// to the same state.
func TestSnapshotHoldsTheLargestRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 32 MiB records")
	}
	l := New()
	fp := hex.EncodeToString(make([]byte, 32))
	blob := bigJSON(MaxBlobBytes)
	claim := &Claim{Header: Header{At: 1e18}, Namespace: "ns", Key: "k", Tool: "t", Owner: "o",
		Payload: blob, Fingerprint: fp, LeaseMS: 1000, DedupeWindowMS: 1000}
	if r := l.ApplyCommand(1, claim); r.Status != StatusGranted {
		t.Fatalf("claim: %s %s", r.Status, r.Detail)
	}
	done := &Complete{Header: Header{At: 1e18 + 1}, Namespace: "ns", Key: "k", Owner: "o", FencingToken: 1,
		Outcome: OutcomeExecuted, Result: blob}
	if r := l.ApplyCommand(2, done); r.Status != StatusOK {
		t.Fatalf("complete: %s %s", r.Status, r.Detail)
	}
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	back, err := Restore(&snap)
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if back.Digest() != l.Digest() {
		t.Fatal("restored ledger differs")
	}
}

// TestWriteSnapshotRefusesAnOversizedRecord: a record whose frame Restore
// would refuse fails the snapshot instead of producing one no node can
// restore.
func TestWriteSnapshotRefusesAnOversizedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a 64 MiB record")
	}
	r, err := compact(&Intent{Namespace: "ns", Key: "k", Fingerprint: hex.EncodeToString(make([]byte, 32)),
		State: StateDeclared, Payload: bigJSON(maxRecordFrame + 1)})
	if err != nil {
		t.Fatal(err)
	}
	l := New()
	l.put(nil, r)
	err = l.WriteSnapshot(&bytes.Buffer{})
	if !errors.Is(err, ErrUnsnapshottable) || !strings.Contains(err.Error(), "ns/k") {
		t.Fatalf("WriteSnapshot: %v, want %v naming ns/k", err, ErrUnsnapshottable)
	}
}

// allocated is the heap f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestRestoreDoesNotTrustAFrameLength: a frame that claims the largest
// size but is cut short costs about what the snapshot holds, not what
// the length claims.
func TestRestoreDoesNotTrustAFrameLength(t *testing.T) {
	l := New()
	r, err := compact(&Intent{Namespace: "ns", Key: "k", Fingerprint: hex.EncodeToString(make([]byte, 32)),
		State: StateDeclared})
	if err != nil {
		t.Fatal(err)
	}
	l.put(nil, r)
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	header := snap.Bytes()[:bytes.IndexByte(snap.Bytes(), '\n')+1]
	lying := append(bytes.Clone(header), binary.BigEndian.AppendUint32(nil, maxRecordFrame)...)
	lying = append(lying, make([]byte, 100)...)
	var restoreErr error
	alloc := allocated(func() { _, restoreErr = Restore(bytes.NewReader(lying)) })
	if !errors.Is(restoreErr, ErrBadSnapshot) {
		t.Fatalf("Restore of a truncated frame: %v, want %v", restoreErr, ErrBadSnapshot)
	}
	if alloc > 8<<20 {
		t.Fatalf("a frame claiming %d bytes, of which 100 were there, cost %d bytes", maxRecordFrame, alloc)
	}
}

// TestDecodeRecordAllocatesWhatItDecodes: a count that claims every byte
// left is an element makes the decoder allocate with the elements it
// decodes, not with the count.
func TestDecodeRecordAllocatesWhatItDecodes(t *testing.T) {
	r, err := compact(&Intent{Namespace: "ns", Key: "k", Fingerprint: hex.EncodeToString(make([]byte, 32)),
		State: StateDeclared})
	if err != nil {
		t.Fatal(err)
	}
	b := appendRecord(nil, r)
	b = b[:len(b)-1]          // no extras marker
	b = append(b, 1, 0, 0, 0) // extras, require approval false, 0 required, no approvers
	const n = 1 << 20         // approvals claimed: one per byte left
	b = appendUvarint(b, n)   //
	b = append(b, make([]byte, n)...)
	var decodeErr error
	alloc := allocated(func() { _, decodeErr = decodeRecord(b) })
	if alloc > 4*uint64(len(b)) {
		t.Fatalf("decoding a %d-byte record allocated %d bytes (err %v)", len(b), alloc, decodeErr)
	}
	if decodeErr == nil {
		t.Fatal("a count past the end was accepted")
	}
}

// TestDecodeRecordRefusesWhatApplyCannotMake: a snapshot's record is
// checked as the command decoders check a log entry.
func TestDecodeRecordRefusesWhatApplyCannotMake(t *testing.T) {
	good := func() *Intent {
		return &Intent{Namespace: "ns", Key: "k", Owner: "o", Tool: "t", Fingerprint: hex.EncodeToString(make([]byte, 32)),
			State: StateExecuted, Payload: []byte(`{"a":1}`), Result: []byte(`"ok"`), RequireApproval: true,
			Approvers: []string{"alice"}}
	}
	encode := func(in *Intent) []byte {
		r, err := compact(in)
		if err != nil {
			t.Fatal(err)
		}
		return appendRecord(nil, r)
	}
	if _, err := decodeRecord(encode(good())); err != nil {
		t.Fatalf("a good record: %v", err)
	}
	boolAt := func() []byte { // require_approval is the first byte after the extras marker
		b := encode(good())
		g := good()
		g.RequireApproval = false
		alt := encode(g)
		for i := range b {
			if b[i] != alt[i] {
				b[i] = 2
				return b
			}
		}
		t.Fatal("require_approval not found")
		return nil
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"payload not JSON", encode(func() *Intent { in := good(); in.Payload = []byte("not json"); return in }())},
		{"result not JSON", encode(func() *Intent { in := good(); in.Result = []byte("{"); return in }())},
		{"key not UTF-8", encode(func() *Intent { in := good(); in.Key = "k\xff"; return in }())},
		{"approver not UTF-8", encode(func() *Intent { in := good(); in.Approvers = []string{"\xfe"}; return in }())},
		{"boolean neither 0 nor 1", boolAt()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeRecord(tc.data); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
