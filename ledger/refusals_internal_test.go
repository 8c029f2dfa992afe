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
