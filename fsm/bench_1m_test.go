package fsm_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// The 1 M-intent benchmarks (make bench-fsm) measure what the ledger costs
// at scale: heap bytes per stored intent beyond its payload, and the time
// to snapshot and restore a million intents. They report; they assert
// nothing about time or size.

const (
	bench1M           = 1_000_000
	benchPayloadBytes = 100
	benchKeyBytes     = 32
)

// benchClaimLog returns the encoded claim for intent i as a replica reads
// it from the log: a 32-byte key, a 100-byte canonical JSON payload (its
// bytes differ per intent, as real payloads do) and a unique owner.
func benchClaimLog(tb testing.TB, i int, at int64) []byte {
	payload := fmt.Appendf(nil, `{"d":"%0*d"}`, benchPayloadBytes-8, i)
	canonical, fp, err := fsm.Fingerprint("bench.tool", payload)
	if err != nil {
		tb.Fatal(err)
	}
	data, err := fsm.Encode(at, &fsm.Claim{
		Namespace: "default", Key: fmt.Sprintf("bench/%0*d", benchKeyBytes-6, i), Tool: "bench.tool",
		Owner: fmt.Sprintf("agent/host/%08d", i), Payload: canonical, Fingerprint: fp,
		LeaseMS: 30_000, DedupeWindowMS: 24 * 3600 * 1000,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func benchCompleteLog(tb testing.TB, i int, fence uint64, at int64) []byte {
	data, err := fsm.Encode(at, &fsm.Complete{
		Namespace: "default", Key: fmt.Sprintf("bench/%0*d", benchKeyBytes-6, i),
		Owner: fmt.Sprintf("agent/host/%08d", i), FencingToken: fence, Outcome: fsm.OutcomeExecuted,
		Result: []byte(`{"ok":true}`),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// load1M applies n claims (and, when complete, a completion of each) the
// way a replica does: Apply on encoded log entries.
func load1M(tb testing.TB, n int, complete bool) *fsm.Machine {
	l := fsm.New()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var index uint64
	for i := 0; i < n; i++ {
		index++
		r := l.Apply(index, benchClaimLog(tb, i, at))
		if r.Status != fsm.StatusGranted {
			tb.Fatalf("claim %d: %s %s", i, r.Status, r.Detail)
		}
		if complete {
			index++
			if r := l.Apply(index, benchCompleteLog(tb, i, index-1, at)); r.Status != fsm.StatusOK {
				tb.Fatalf("complete %d: %s %s", i, r.Status, r.Detail)
			}
		}
	}
	return l
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory1M reports the live heap per stored intent after loading
// a million of them, and that figure less the payload (and the result, for
// finished intents): what the ledger itself costs per intent (record,
// strings, audit event, B-tree and index entries).
func BenchmarkMemory1M(b *testing.B) {
	for _, tc := range []struct {
		name     string
		complete bool
		userData int // payload (+ result) bytes per intent
	}{
		{"declared", false, benchPayloadBytes},
		{"executed", true, benchPayloadBytes + len(`{"ok":true}`)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var perIntent float64
			for i := 0; i < b.N; i++ {
				before := heapInUse()
				l := load1M(b, bench1M, tc.complete)
				after := heapInUse()
				if l.Len() != bench1M {
					b.Fatalf("%d intents", l.Len())
				}
				perIntent = float64(after-before) / bench1M
				runtime.KeepAlive(l)
			}
			b.ReportMetric(perIntent, "heap-B/intent")
			b.ReportMetric(perIntent-float64(tc.userData), "overhead-B/intent")
			b.ReportMetric(0, "ns/op")
		})
	}
}

var (
	bench1MOnce   sync.Once
	bench1MLedger *fsm.Machine
)

// finished1M is a million executed intents, built once per process.
func finished1M(b *testing.B) *fsm.Machine {
	bench1MOnce.Do(func() { bench1MLedger = load1M(b, bench1M, true) })
	return bench1MLedger
}

// BenchmarkSnapshot1M writes a snapshot of a million executed intents to a
// file and fsyncs it, as raft's file snapshot store does.
func BenchmarkSnapshot1M(b *testing.B) {
	l := finished1M(b)
	path := filepath.Join(b.TempDir(), "snap")
	var size int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Clone().WriteSnapshot(f); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		st, _ := f.Stat()
		size = st.Size()
		f.Close()
	}
	b.StopTimer()
	b.ReportMetric(float64(size)/1e6, "MB")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/snapshot")
}

// BenchmarkRestore1M restores a million executed intents from a snapshot
// held in memory (the read from disk is not timed).
func BenchmarkRestore1M(b *testing.B) {
	l := finished1M(b)
	var buf bytes.Buffer
	if err := l.WriteSnapshot(&buf); err != nil {
		b.Fatal(err)
	}
	snap := buf.Bytes()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := fsm.Restore(bytes.NewReader(snap))
		if err != nil {
			b.Fatal(err)
		}
		if r.Len() != bench1M {
			b.Fatalf("%d intents", r.Len())
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(snap))/1e6, "MB")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/restore")
}
