package ledger

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// gatedReads is a Replicator whose linearizable reads wait for gate and
// are counted.
type gatedReads struct {
	Replicator
	gate  chan struct{}
	reads atomic.Int64
}

func (g *gatedReads) Read(ctx context.Context, c Consistency, fn func(*fsm.Machine)) error {
	if c == Linearizable {
		g.reads.Add(1)
		<-g.gate
	}
	return nil
}

// awaitCond waits until cond holds (a hang guard, not a threshold).
func awaitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never", what)
		}
		runtime.Gosched()
	}
}

// TestConfirmationsAreShared: calls that arrive while a confirmation runs
// share the next one, which starts after all of them arrived: twenty
// refusals cost two confirmations, not twenty.
func TestConfirmationsAreShared(t *testing.T) {
	g := &gatedReads{gate: make(chan struct{})}
	var c confirmer
	var wg sync.WaitGroup
	errs := make(chan error, 21)
	call := func() {
		defer wg.Done()
		errs <- c.confirm(context.Background(), g)
	}
	wg.Add(1)
	go call()
	awaitCond(t, "the first confirmation runs", func() bool { return g.reads.Load() == 1 })
	const later = 20
	wg.Add(later)
	for range later {
		go call()
	}
	awaitCond(t, "the later calls wait for the next round", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.next != nil && c.next.waiters == later
	})
	close(g.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := g.reads.Load(); n != 2 {
		t.Fatalf("%d confirmations for %d calls, want 2", n, later+1)
	}
	awaitCond(t, "the confirmer stops", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.running && c.next == nil
	})
}

// TestTakeForgetsIdleHolds: take forgets the keys held for refusals,
// duplicates and divergent claims once they were last used more than a
// minute before, and keeps those used since.
func TestTakeForgetsIdleHolds(t *testing.T) {
	rf := newRefusals(RefusalNotes{}, func() time.Time { return time.Unix(0, 0) })
	const t0 = int64(1_000_000_000_000)
	minute := int64(time.Minute)
	old, recent := [2]string{"default", "old"}, [2]string{"default", "recent"}
	for _, k := range [][2]string{old, recent} {
		used := t0
		if k == recent {
			used = t0 + 1
		}
		rf.held[k] = used
		rf.dupHeld[k] = dupHold{fence: 1, used: used}
		rf.divHeld[k] = used
	}
	rf.take(t0 + minute) // a minute exactly: both kept
	for name, n := range map[string]int{"held": len(rf.held), "dupHeld": len(rf.dupHeld), "divHeld": len(rf.divHeld)} {
		if n != 2 {
			t.Errorf("a minute on, %s holds %d keys, want 2", name, n)
		}
	}
	rf.take(t0 + minute + 1)
	for name, m := range map[string]func(k [2]string) bool{
		"held":    func(k [2]string) bool { _, ok := rf.held[k]; return ok },
		"dupHeld": func(k [2]string) bool { _, ok := rf.dupHeld[k]; return ok },
		"divHeld": func(k [2]string) bool { _, ok := rf.divHeld[k]; return ok },
	} {
		if m(old) || !m(recent) {
			t.Errorf("past a minute, %s: old kept %v, recent kept %v; want false, true", name, m(old), m(recent))
		}
	}
}
