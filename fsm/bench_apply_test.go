package fsm_test

import (
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// BenchmarkApplyClaim is the replica's cost of one unique-key claim: decode
// the log entry and apply it (record, audit event, namespace audit chain,
// indexes), as every node pays it for every grant.
func BenchmarkApplyClaim(b *testing.B) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	logs := make([][]byte, b.N)
	for i := range logs {
		logs[i] = benchClaimLog(b, i, at)
	}
	l := fsm.New()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := l.Apply(uint64(i+1), logs[i]); r.Status != fsm.StatusGranted {
			b.Fatalf("claim %d: %s %s", i, r.Status, r.Detail)
		}
	}
}

// BenchmarkDecodeClaim is the decoding share of BenchmarkApplyClaim.
func BenchmarkDecodeClaim(b *testing.B) {
	data := benchClaimLog(b, 1, 1)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := fsm.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
