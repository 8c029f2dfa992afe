package fsm_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// verifyChain checks a namespace's audit log the way an external verifier
// would: contiguous seqs, each prev the previous hash (the anchor first),
// each hash the SHA-256 of the raw event bytes.
func verifyChain(t *testing.T, l *fsm.Machine, namespace string) int {
	t.Helper()
	head := l.AuditHead(namespace)
	page, _ := l.AuditEvents(namespace, 0, 1<<30)
	prev, seq := head.Anchor, head.FirstSeq
	for _, e := range page {
		var b fsm.ChainBody
		if err := json.Unmarshal(e.Body, &b); err != nil {
			t.Fatal(err)
		}
		if b.Seq != seq || e.Seq != seq || b.Prev != prev || fsm.ChainEventHash(e.Body) != e.Hash || b.Namespace != namespace {
			t.Fatalf("chain breaks at seq %d: %s", seq, e.Body)
		}
		prev, seq = e.Hash, seq+1
	}
	if prev != head.LastHash || (len(page) > 0 && seq-1 != head.LastSeq) {
		t.Fatalf("head %+v does not end the chain (last %d %s)", head, seq-1, prev)
	}
	return len(page)
}

func TestAuditChain(t *testing.T) {
	h := newHarness(t)
	r := h.must(claim("k", "A", payloadA), fsm.StatusGranted)
	h.must(claim("k", "B", payloadA), fsm.StatusInFlight)
	h.must(claim("k", "B", payloadB), fsm.StatusDivergent)
	h.must(complete("k", "A", r.Intent.FencingToken, fsm.OutcomeExecuted, resultOK), fsm.StatusOK)
	h.must(claim("k", "C", payloadA), fsm.StatusDuplicate)
	h.must(complete("k", "Z", 99, fsm.OutcomeExecuted, resultOK), fsm.StatusFenced)
	eq(t, "events", verifyChain(t, h.l, ns), 6)
	head := h.l.AuditHead(ns)
	eq(t, "anchor of a full log", head.Anchor, strings.Repeat("0", 64))

	// Tampering with any event breaks the chain for a verifier.
	page, _ := h.l.AuditEvents(ns, 0, 100)
	forged := bytes.Replace(page[3].Body, []byte(`"executed"`), []byte(`"failed"`), 1)
	if fsm.ChainEventHash(forged) == page[3].Hash {
		t.Fatal("an edited event still hashes to its hash")
	}

	// Retention trims the oldest events and moves the anchor.
	h.must(&fsm.SetSettings{Settings: fsm.Settings{AuditRetention: -1}}, fsm.StatusMalformed)
	h.must(&fsm.SetSettings{Settings: fsm.Settings{AuditRetention: 4}}, fsm.StatusOK)
	h.must(claim("k2", "A", payloadA), fsm.StatusGranted)
	eq(t, "kept events", verifyChain(t, h.l, ns), 4)
	head = h.l.AuditHead(ns)
	eq(t, "first seq", head.FirstSeq, uint64(4))
	eq(t, "anchor", head.Anchor, page[2].Hash)
	eq(t, "dropped", head.Dropped, uint64(3))

	// Paging.
	p1, next := h.l.AuditEvents(ns, 0, 3)
	p2, end := h.l.AuditEvents(ns, next, 3)
	eq(t, "page sizes", len(p1)+len(p2), 4)
	eq(t, "next", next, uint64(7))
	eq(t, "end", end, uint64(0))

	// A snapshot keeps the chain and its anchor.
	restored := checkSnapshotRoundTrip(t, h.l)
	eq(t, "restored events", verifyChain(t, restored, ns), 4)
	eq(t, "restored head", restored.AuditHead(ns), head)
	h2 := &harness{tb: t, l: restored, idx: h.idx, at: h.at}
	h2.must(claim("k3", "A", payloadA), fsm.StatusGranted)
	h.must(claim("k3", "A", payloadA), fsm.StatusGranted)
	eq(t, "restored ledger chains on identically", h2.l.AuditHead(ns), h.l.AuditHead(ns))
}
