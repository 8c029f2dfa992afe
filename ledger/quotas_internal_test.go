package ledger

import (
	"errors"
	"testing"
	"time"
)

// TestCheckFull is the stored-intents decision: only a claim that would
// add an intent to a namespace at (or past) its maximum is refused.
func TestCheckFull(t *testing.T) {
	for _, tt := range []struct {
		name    string
		max     int
		stored  int
		creates bool
		refused bool
	}{
		{"no maximum", 0, 1 << 20, true, false},
		{"under the maximum", 3, 2, true, false},
		{"at the maximum, a new key", 3, 3, true, true},
		{"past the maximum (in-flight claims), a new key", 3, 4, true, true},
		{"at the maximum, a key it holds", 3, 3, false, false},
		{"empty namespace, maximum 1", 1, 0, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkFull("ns", NamespaceQuota{MaxIntents: tt.max}, tt.stored, tt.creates)
			if got := errors.Is(err, ErrNamespaceFull); got != tt.refused {
				t.Fatalf("refused = %v (%v), want %v", got, err, tt.refused)
			}
		})
	}
}

// TestQuotaBuckets: claims per second with a burst, on the service's
// clock; a namespace without a rate is never limited; a reload keeps the
// bucket of a namespace whose rate did not change and replaces the other.
func TestQuotaBuckets(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q := newQuotas(func() time.Time { return now })
	q.set(NamespaceQuotas{"a": {ClaimsPerSecond: 2, Burst: 3}, "b": {MaxIntents: 5}, "c": {ClaimsPerSecond: 1}})
	type step struct {
		ns      string
		advance time.Duration
		ok      bool
		wait    time.Duration
	}
	for i, st := range []step{
		{"a", 0, true, 0}, {"a", 0, true, 0}, {"a", 0, true, 0},
		{"a", 0, false, 500 * time.Millisecond}, // the burst is spent: one token every 500 ms
		{"a", 500 * time.Millisecond, true, 0},
		{"a", 0, false, 500 * time.Millisecond},
		{"b", 0, true, 0}, {"b", 0, true, 0}, // no rate
		{"c", 0, true, 0}, {"c", 0, false, time.Second}, // burst 0 means 1
		{"unknown", 0, true, 0},
	} {
		now = now.Add(st.advance)
		ok, wait := q.take(st.ns)
		if ok != st.ok || wait != st.wait {
			t.Fatalf("step %d (%s): take = %v, %v; want %v, %v", i, st.ns, ok, wait, st.ok, st.wait)
		}
	}
	q.set(NamespaceQuotas{"a": {ClaimsPerSecond: 2, Burst: 3}, "c": {ClaimsPerSecond: 10}})
	if ok, _ := q.take("a"); ok {
		t.Error("reloading the same rate refilled a's bucket")
	}
	if ok, _ := q.take("c"); !ok {
		t.Error("c's new rate kept the old, empty bucket")
	}
}
