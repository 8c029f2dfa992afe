package pebblestate

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/intentledger/intentd/fsm"
)

// BenchmarkApply applies claims and completes of unique keys (200-byte
// payload, 100-byte result) in batches of 256 entries with a Commit after
// each, as the cluster does, to the ledger on pebble and in memory.
func BenchmarkApply(b *testing.B) {
	pad := make([]byte, 180)
	for i := range pad {
		pad[i] = 'a' + byte(i%26)
	}
	for _, engine := range []string{"memory", "pebble"} {
		b.Run(engine, func(b *testing.B) {
			var st fsm.Store = fsm.NewMemoryStore()
			if engine == "pebble" {
				d, err := OpenDir(filepath.Join(b.TempDir(), "state"), Options{fs: vfs.Default})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { d.Close() })
				st = d.Current()
			}
			l, err := fsm.Open(st)
			if err != nil {
				b.Fatal(err)
			}
			entries := make([][]byte, 0, 2*b.N)
			at := int64(1e18)
			for i := range b.N {
				key := fmt.Sprintf("key-%09d", i)
				payload, fp, err := fsm.Fingerprint("tool", []byte(fmt.Sprintf(`{"k":%q,"pad":%q}`, key, pad)))
				if err != nil {
					b.Fatal(err)
				}
				claim, err := fsm.Encode(at, &fsm.Claim{Namespace: "ns", Key: key, Tool: "tool", Owner: "o",
					Payload: payload, Fingerprint: fp, LeaseMS: 60_000, DedupeWindowMS: 86_400_000})
				if err != nil {
					b.Fatal(err)
				}
				complete, err := fsm.Encode(at, &fsm.Complete{Namespace: "ns", Key: key, Owner: "o",
					FencingToken: uint64(2*i + 1), Outcome: fsm.OutcomeExecuted, Result: []byte(fmt.Sprintf(`{"ok":%q}`, pad[:80]))})
				if err != nil {
					b.Fatal(err)
				}
				entries = append(entries, claim, complete)
				at += 1000
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i, e := range entries {
				if r := l.Apply(uint64(i+1), e); r.Status != fsm.StatusGranted && r.Status != fsm.StatusOK {
					b.Fatalf("entry %d: %s %s", i+1, r.Status, r.Detail)
				}
				if i%256 == 255 {
					l.Commit(uint64(i + 1))
				}
			}
			l.Commit(uint64(len(entries)))
		})
	}
}
