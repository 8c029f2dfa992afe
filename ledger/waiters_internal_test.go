package ledger

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWaitersWakeOnlyTheirKeyAndRearm(t *testing.T) {
	r := newWaiters(10, 3, 10)
	a1, cha1, _ := r.add("ns", "a", "")
	a2, cha2, _ := r.add("ns", "a", "")
	_, chb, _ := r.add("ns", "b", "")
	_, chOther, _ := r.add("other", "a", "")

	r.KeysChanged([]fsm.Ref{{Namespace: "ns", Key: "b"}, {Namespace: "ns", Key: "zzz"}})
	if !fired(chb) || fired(cha1) || fired(cha2) || fired(chOther) {
		t.Fatal("a change of ns/b woke the wrong waiters")
	}
	r.KeysChanged([]fsm.Ref{{Namespace: "ns", Key: "a"}, {Namespace: "ns", Key: "a"}}) // twice in one batch
	if !fired(cha1) || !fired(cha2) || fired(chOther) {
		t.Fatal("a change of ns/a did not wake exactly its waiters")
	}
	// Woken, a waiter arms a new channel; until then changes are not lost
	// (it reads again anyway) and arming twice gives the same channel.
	re := r.arm(a1)
	if fired(re) || r.arm(a1) != re {
		t.Fatal("arm did not give one fresh channel")
	}
	r.AllChanged()
	if !fired(re) {
		t.Fatal("AllChanged did not wake an armed waiter")
	}
	r.remove(a2)
	r.remove(a2) // twice is harmless
	if r.len() != 3 {
		t.Fatalf("len = %d, want 3", r.len())
	}
}

func TestWaitersCapsAndFreeSlots(t *testing.T) {
	r := newWaiters(4, 2, 4)
	var ws []*waiter
	for _, k := range []string{"a", "a", "b", "c"} {
		w, _, err := r.add("ns", k, "")
		if err != nil {
			t.Fatalf("add %s: %v", k, err)
		}
		ws = append(ws, w)
	}
	if _, _, err := r.add("ns", "d", ""); !errors.Is(err, ErrTooManyWaiters) {
		t.Fatalf("past the node's cap: %v", err)
	}
	r.remove(ws[3])
	if _, _, err := r.add("ns", "a", ""); !errors.Is(err, ErrTooManyWaiters) {
		t.Fatalf("past the key's cap: %v", err)
	}
	if _, _, err := r.add("ns", "d", ""); err != nil {
		t.Fatalf("a freed slot: %v", err)
	}
}

// TestWaitersCapPerCaller: one caller's long-polls, on any keys, hold at
// most maxPerCaller slots, so the node's others stay free for other
// callers; a poll that names no caller is bounded per node and key only.
func TestWaitersCapPerCaller(t *testing.T) {
	type reg struct{ caller, ns, key string }
	for _, tc := range []struct {
		name     string
		before   []reg // registered first, all accepted
		try      reg
		refused  bool
		leaveOne bool // remove the first of before, then try again: accepted
	}{
		{name: "a caller at its cap, on another key", before: []reg{{"key:a", "ns", "k1"}, {"key:a", "ns", "k2"}},
			try: reg{"key:a", "ns", "k3"}, refused: true, leaveOne: true},
		{name: "a caller at its cap, namespace-wide", before: []reg{{"key:a", "ns", "k1"}, {"key:a", "other", "k1"}},
			try: reg{"key:a", "ns", namespaceWide}, refused: true, leaveOne: true},
		{name: "another caller", before: []reg{{"key:a", "ns", "k1"}, {"key:a", "ns", "k2"}},
			try: reg{"key:b", "ns", "k1"}},
		{name: "no caller", before: []reg{{"", "ns", "k1"}, {"", "ns", "k2"}, {"", "ns", "k3"}},
			try: reg{"", "ns", "k4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newWaiters(10, 5, 2)
			var ws []*waiter
			for _, b := range tc.before {
				w, _, err := r.add(b.ns, b.key, b.caller)
				if err != nil {
					t.Fatalf("add %+v: %v", b, err)
				}
				ws = append(ws, w)
			}
			_, _, err := r.add(tc.try.ns, tc.try.key, tc.try.caller)
			if got := errors.Is(err, ErrTooManyWaiters); got != tc.refused {
				t.Fatalf("add %+v: %v, want refused %v", tc.try, err, tc.refused)
			}
			if !tc.leaveOne {
				return
			}
			r.remove(ws[0])
			r.remove(ws[0]) // twice frees one slot only
			if _, _, err := r.add(tc.try.ns, tc.try.key, tc.try.caller); err != nil {
				t.Fatalf("after one left: %v", err)
			}
			if _, _, err := r.add(tc.try.ns, "again", tc.try.caller); !errors.Is(err, ErrTooManyWaiters) {
				t.Fatalf("a removal twice freed two slots: %v", err)
			}
		})
	}
}

// Waiters leave in every order; the registry ends empty, and each one
// still wakes until it leaves (swap-removal keeps positions right).
func TestWaitersEmptyAfterEveryoneLeaves(t *testing.T) {
	r := newWaiters(1000, 100, 1000)
	type reg struct {
		w  *waiter
		ch <-chan struct{}
	}
	var regs []reg
	for i := range 300 {
		w, ch, err := r.add("ns", fmt.Sprintf("k%d", i%7), fmt.Sprintf("c%d", i%3))
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, reg{w, ch})
	}
	for step, i := range []int{0, 299, 150, 7, 14, 1, 2, 3} {
		r.remove(regs[i].w)
		regs[i].w = nil
		r.KeysChanged([]fsm.Ref{{Namespace: "ns", Key: fmt.Sprintf("k%d", step%7)}})
	}
	r.AllChanged()
	for i, g := range regs {
		if g.w != nil && !fired(g.ch) {
			t.Fatalf("waiter %d was not woken", i)
		}
		if g.w != nil {
			r.remove(g.w)
		}
	}
	if r.len() != 0 || len(r.byKey) != 0 || len(r.byCaller) != 0 {
		t.Fatalf("after everyone left: len %d, %d keys, %d callers", r.len(), len(r.byKey), len(r.byCaller))
	}
}

func TestWaitersAfterClose(t *testing.T) {
	r := newWaiters(1, 1, 1)
	if _, _, err := r.add("ns", "a", ""); err != nil {
		t.Fatal(err)
	}
	r.close()
	r.close()
	if !fired(r.done) {
		t.Fatal("close did not close done")
	}
	if w, ch, err := r.add("ns", "a", ""); w != nil || ch != nil || err != nil {
		t.Fatalf("add after close = %v, %v, %v; want nothing registered", w, ch, err)
	}
}

// BenchmarkWaiterRegistry measures the registry's own cost of one idle
// long-poll (no goroutine, no timer).
func BenchmarkWaiterRegistry(b *testing.B) {
	const n = 4096
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i%1024)
	}
	for range b.N {
		r := newWaiters(n, 64, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ws := make([]*waiter, 0, n)
		for _, k := range keys {
			w, _, err := r.add("default", k, "")
			if err != nil {
				b.Fatal(err)
			}
			ws = append(ws, w)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/waiter")
		for _, w := range ws {
			r.remove(w)
		}
	}
}
