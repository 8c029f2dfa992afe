package httpapi

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// TestLedgerFullHTTP: past a capacity a claim of a new key is answered
// 507 problem+json ledger_full, without Retry-After, naming the resource
// and its figures, and nothing is written; the owner's repeat, the
// complete, the duplicate and reads are served and the refusal is
// counted; once there is room a claim of a new key is granted.
func TestLedgerFullHTTP(t *testing.T) {
	var heap atomic.Uint64
	heap.Store(1 << 20)
	mon, err := ledger.NewCapacityMonitor(ledger.CapacityLimits{MaxMemory: 400 << 20},
		ledger.CapacityReaders{HeapLive: heap.Load}, ledger.CapacityOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, ledger.Config{Capacity: mon})
	g := answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("held", "o1")), http.StatusCreated)

	heap.Store(330 << 20)
	mon.Sample()
	before := proposed(e.mem)
	r := e.do(t, http.MethodPost, "/v1/intents", newClaim("new", "o1"))
	p := problemOf(t, r, http.StatusInsufficientStorage, CodeLedgerFull)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Errorf("Content-Type %q", ct)
	}
	if ra := r.header.Get("Retry-After"); ra != "" || p.RetryAfterMS != 0 {
		t.Errorf("ledger_full with Retry-After %q / retry_after_ms %d: room is not promised", ra, p.RetryAfterMS)
	}
	for _, want := range []string{"(memory)", "330 MiB", "320 MiB", "400 MiB"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("detail %q does not say %q", p.Detail, want)
		}
	}
	if proposed(e.mem) != before {
		t.Fatal("a claim refused as ledger_full was proposed")
	}
	problemOf(t, e.do(t, http.MethodGet, keyPath("new"), nil), http.StatusNotFound, string(fsm.StatusNotFound))

	answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("held", "o1")), http.StatusOK) // the owner's repeat
	if r := e.do(t, http.MethodPost, keyPath("held", "complete"),
		map[string]any{"owner": "o1", "fencing_token": g.FencingToken, "outcome": "executed"}); r.status != http.StatusOK {
		t.Fatalf("complete while full: %s", r)
	}
	answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("held", "o2")), http.StatusOK) // duplicate
	if r := e.do(t, http.MethodGet, keyPath("held"), nil); r.status != http.StatusOK {
		t.Fatalf("read while full: %s", r)
	}
	if n := counterValue(t, e.reg, "intentd_claims_total", map[string]string{"status": CodeLedgerFull}); n != 1 {
		t.Fatalf("ledger_full refusals counted: %v, want 1", n)
	}

	heap.Store(100 << 20)
	mon.Sample()
	answer(t, e.do(t, http.MethodPost, "/v1/intents", newClaim("new", "o1")), http.StatusCreated)
}
