package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/namespace"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// feedReplicator is the in-memory ledger with a change feed of its own:
// after each proposal it reports the keys the command may have changed
// (fsm.Touched), as the cluster's state machine does, and it can stand for
// a snapshot restore (AllChanged) and count its subscribers. It counts the
// reads done and lets a test wait for them.
type feedReplicator struct {
	*ledgertest.Memory

	ledgertest.ReadSignal

	mu    sync.Mutex
	sinks []*ledger.ChangeSink
}

func newFeed() *feedReplicator {
	return &feedReplicator{Memory: ledgertest.NewMemory(start)}
}

func (f *feedReplicator) SubscribeChanges(sink ledger.ChangeSink) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := &sink
	f.sinks = append(f.sinks, p)
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for i, have := range f.sinks {
			if have == p {
				f.sinks = append(f.sinks[:i], f.sinks[i+1:]...)
				return
			}
		}
	}
}

func (f *feedReplicator) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sinks)
}

func (f *feedReplicator) each(fn func(ledger.ChangeSink)) {
	f.mu.Lock()
	sinks := append([]*ledger.ChangeSink(nil), f.sinks...)
	f.mu.Unlock()
	for _, s := range sinks {
		fn(*s)
	}
}

func (f *feedReplicator) Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	r, err := f.Memory.Propose(ctx, cmd)
	if err == nil {
		keys, all := fsm.Touched(nil, cmd)
		f.each(func(s ledger.ChangeSink) {
			if all {
				s.AllChanged()
			} else {
				s.KeysChanged(keys)
			}
		})
	}
	return r, err
}

// restore stands for a snapshot restore: cmd changes the state behind the
// feed's back, then every subscriber hears that everything changed.
func (f *feedReplicator) restore(cmd fsm.Command) {
	f.Seed(cmd)
	f.each(func(s ledger.ChangeSink) { s.AllChanged() })
}

func (f *feedReplicator) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	if ctx.Value(uncountedKey{}) == nil {
		defer f.Signal()
	}
	return f.Memory.Read(ctx, c, fn)
}

// uncountedKey marks the context of a test's own claims (grant,
// mustClaim): the feed does not count the reads they make to sign the
// grant's execution token, only the long-polls'.
type uncountedKey struct{}

// uncounted is a context whose reads the feed does not count.
func uncounted() context.Context {
	return context.WithValue(context.Background(), uncountedKey{}, true)
}

type waitAnswer struct {
	in  *fsm.Intent
	err error
}

// startWait runs Wait in the background; its answer arrives on the channel.
func startWait(ctx context.Context, s *ledger.Service, key string, after uint64, wait time.Duration) <-chan waitAnswer {
	ch := make(chan waitAnswer, 1)
	go func() {
		in, err := s.Wait(ctx, "", key, after, wait, ledger.Stale)
		ch <- waitAnswer{in, err}
	}()
	return ch
}

func receive(t *testing.T, ch <-chan waitAnswer) waitAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second): // a hang guard, not a threshold
		t.Fatal("the long-poll did not answer")
		return waitAnswer{}
	}
}

// grant claims key with a one-second lease.
func grant(t *testing.T, s *ledger.Service, key string) *fsm.Result {
	t.Helper()
	req := claimReq(key, owner, `{"k":"`+key+`"}`)
	req.Lease = time.Second
	r, err := s.Claim(uncounted(), req)
	if err != nil || r.Status != fsm.StatusGranted {
		t.Fatalf("claim %s: %+v, %v", key, r, err)
	}
	return r.Result
}

func TestWaitWakesOnlyForItsKey(t *testing.T) {
	f := newFeed()
	s := ledgertest.NewService(t, f, ledger.Config{})
	g := grant(t, s, "a")

	done := startWait(context.Background(), s, "a", g.Intent.Version, 30*time.Second)
	f.Await(t, 1)
	for i := range 5 {
		grant(t, s, fmt.Sprintf("b%d", i))
	}
	if _, err := s.Complete(context.Background(), ledger.CompleteRequest{Key: "a", Owner: owner,
		FencingToken: g.Intent.FencingToken, Outcome: fsm.OutcomeExecuted}); err != nil {
		t.Fatal(err)
	}
	a := receive(t, done)
	if a.err != nil || a.in == nil || a.in.State != fsm.StateExecuted {
		t.Fatalf("woke with %+v, %v", a.in, a.err)
	}
	// One read on arrival, one when "a" changed: the claims on other keys
	// did not wake it.
	if got := f.Count(); got != 2 {
		t.Fatalf("the long-poll read %d times, want 2", got)
	}
}

func TestWaitWakesForASweepAndARestore(t *testing.T) {
	f := newFeed()
	s := ledgertest.NewService(t, f, ledger.Config{})
	g := grant(t, s, "a")
	grant(t, s, "c")

	// The leader's Expire sweep names several keys: each one's waiter wakes.
	done := startWait(context.Background(), s, "a", g.Intent.Version, 30*time.Second)
	f.Await(t, 1)
	f.Advance(2 * time.Second)
	if _, err := f.Propose(context.Background(), &fsm.Expire{Keys: []fsm.Ref{{Namespace: namespace.Default, Key: "c"},
		{Namespace: namespace.Default, Key: "a"}}}); err != nil {
		t.Fatal(err)
	}
	a := receive(t, done)
	if a.err != nil || a.in == nil || a.in.State != fsm.StateInDoubt {
		t.Fatalf("woke by the sweep with %+v, %v", a.in, a.err)
	}
	if got := f.Count(); got != 2 {
		t.Fatalf("the long-poll read %d times, want 2", got)
	}

	// A restore replaces the state without naming keys: every waiter wakes.
	done = startWait(context.Background(), s, "r", 0, 30*time.Second)
	f.Await(t, 3)
	f.restore(&fsm.Claim{Namespace: namespace.Default, Key: "r", Tool: tool, Owner: owner,
		Payload: []byte(`{}`), Fingerprint: fingerprintOf(t, `{}`), LeaseMS: 1000})
	a = receive(t, done)
	if a.err != nil || a.in == nil || a.in.Key != "r" {
		t.Fatalf("woke by the restore with %+v, %v", a.in, a.err)
	}
	if s.Waiting() != 0 {
		t.Fatalf("%d waiters left", s.Waiting())
	}
}

func fingerprintOf(t *testing.T, payload string) string {
	t.Helper()
	_, fp, err := fsm.Fingerprint(tool, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

func TestWaitCapsPerKeyAndPerNode(t *testing.T) {
	f := newFeed()
	s := ledgertest.NewService(t, f, ledger.Config{Limits: ledger.Limits{MaxWaiters: 3, MaxWaitersPerKey: 2}})
	g := grant(t, s, "a")
	v := g.Intent.Version
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	first, cancelFirst := context.WithCancel(ctx)
	a1 := startWait(first, s, "a", v, time.Minute)
	a2 := startWait(ctx, s, "a", v, time.Minute)
	f.Await(t, 2)

	// A third on "a" is past the per-key cap; it read once, and is told.
	_, err := s.Wait(ctx, "", "a", v, time.Minute, ledger.Stale)
	if !errors.Is(err, ledger.ErrTooManyWaiters) {
		t.Fatalf("third waiter on the key: %v, want ErrTooManyWaiters", err)
	}
	// Past a cap, a poll whose answer is already there gets it.
	if in, err := s.Wait(ctx, "", "a", 0, time.Minute, ledger.Stale); err != nil || in.Key != "a" {
		t.Fatalf("an answered poll past the cap: %+v, %v", in, err)
	}
	// A poll that does not wait takes no slot.
	if in, err := s.Wait(ctx, "", "a", v, 0, ledger.Stale); err != nil || in.Version != v {
		t.Fatalf("a poll without wait past the cap: %+v, %v", in, err)
	}
	reads := f.Count()
	b := startWait(ctx, s, "b", 0, time.Minute)
	f.Await(t, reads+1)
	if s.Waiting() != 3 {
		t.Fatalf("Waiting() = %d, want 3", s.Waiting())
	}
	// The node is full: any key is refused.
	if _, err := s.Wait(ctx, "", "c", 0, time.Minute, ledger.Stale); !errors.Is(err, ledger.ErrTooManyWaiters) {
		t.Fatalf("a waiter past the node's cap: %v, want ErrTooManyWaiters", err)
	}

	// A waiter that leaves frees its slot.
	cancelFirst()
	if a := receive(t, a1); a.err != nil || a.in.Version != v {
		t.Fatalf("cancelled waiter answered %+v, %v", a.in, a.err)
	}
	if s.Waiting() != 2 {
		t.Fatalf("Waiting() = %d after one left, want 2", s.Waiting())
	}
	reads = f.Count()
	a3 := startWait(ctx, s, "a", v, time.Minute)
	f.Await(t, reads+1)
	if s.Waiting() != 3 {
		t.Fatalf("Waiting() = %d, want 3", s.Waiting())
	}

	s.Close()
	for _, ch := range []<-chan waitAnswer{a2, a3, b} {
		if a := receive(t, ch); a.err != nil && !errors.Is(a.err, fsm.ErrNotFound) {
			t.Fatalf("closed waiter: %v", a.err)
		}
	}
	if s.Waiting() != 0 {
		t.Fatalf("Waiting() = %d after Close, want 0", s.Waiting())
	}
}

// TestWaitCapsPerCaller: the long-polls of one caller (WithWaitCaller),
// on intents and on the audit log alike, hold at most MaxWaitersPerCaller
// of the node's slots; another caller's poll still waits, and a slot the
// caller frees is its own again.
func TestWaitCapsPerCaller(t *testing.T) {
	f := newFeed()
	s := ledgertest.NewService(t, f, ledger.Config{Limits: ledger.Limits{MaxWaiters: 10, MaxWaitersPerKey: 10, MaxWaitersPerCaller: 2}})
	g := grant(t, s, "a")
	v := g.Intent.Version
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	hog := ledger.WithWaitCaller(base, "key:hog")
	other := ledger.WithWaitCaller(base, "key:other")

	first, cancelFirst := context.WithCancel(hog)
	reads := f.Count()
	h1 := startWait(first, s, "a", v, time.Minute)
	h2 := startAuditWait(hog, s, "", 2, time.Minute)
	f.Await(t, reads+2)

	for _, tc := range []struct {
		name string
		poll func() error
	}{
		{"a poll of another key", func() error {
			_, err := s.Wait(hog, "", "b", 0, time.Minute, ledger.Stale)
			return err
		}},
		{"an audit poll", func() error {
			_, err := s.WaitAudit(hog, "", 2, 0, time.Minute, ledger.Stale)
			return err
		}},
	} {
		if err := tc.poll(); !errors.Is(err, ledger.ErrTooManyWaiters) {
			t.Fatalf("the hog's third long-poll (%s): %v, want ErrTooManyWaiters", tc.name, err)
		}
	}
	// Another caller is not starved, nor is a poll that names no caller.
	reads = f.Count()
	o := startWait(other, s, "b", 0, time.Minute)
	n := startWait(base, s, "c", 0, time.Minute)
	f.Await(t, reads+2)
	if s.Waiting() != 4 {
		t.Fatalf("Waiting() = %d, want 4", s.Waiting())
	}
	// A slot the hog frees is usable by it again.
	cancelFirst()
	if a := receive(t, h1); a.err != nil || a.in.Version != v {
		t.Fatalf("cancelled poll answered %+v, %v", a.in, a.err)
	}
	reads = f.Count()
	h3 := startWait(hog, s, "b", 0, time.Minute)
	f.Await(t, reads+1)
	if s.Waiting() != 4 {
		t.Fatalf("Waiting() = %d, want 4", s.Waiting())
	}

	s.Close()
	receiveAudit(t, h2)
	for _, ch := range []<-chan waitAnswer{o, n, h3} {
		if a := receive(t, ch); a.err != nil && !errors.Is(a.err, fsm.ErrNotFound) {
			t.Fatalf("closed poll: %v", a.err)
		}
	}
}

func TestWaitersTimeOutWithoutLeaking(t *testing.T) {
	f := newFeed()
	s := ledgertest.NewService(t, f, ledger.Config{Limits: ledger.Limits{MaxWaiters: 50, MaxWaitersPerKey: 5}})
	g := grant(t, s, "k0")
	var wg sync.WaitGroup
	var refused atomic.Int64
	for round := range 4 {
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				if i%3 == 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Millisecond)
					defer cancel()
				}
				_, err := s.Wait(ctx, "", fmt.Sprintf("k%d", i%20), g.Intent.Version, time.Duration(1+round)*time.Millisecond, ledger.Stale)
				switch {
				case errors.Is(err, ledger.ErrTooManyWaiters):
					refused.Add(1)
				case err != nil && !errors.Is(err, fsm.ErrNotFound) && !errors.Is(err, context.DeadlineExceeded):
					t.Errorf("wait: %v", err)
				}
			}()
		}
		wg.Wait()
	}
	if s.Waiting() != 0 {
		t.Fatalf("%d waiters left after every one timed out (%d refused)", s.Waiting(), refused.Load())
	}
	// The slots are usable again: the registry is really empty.
	reads := f.Count() // before the wait starts: its read may come at once
	done := startWait(context.Background(), s, "k0", g.Intent.Version, time.Minute)
	f.Await(t, reads+1)
	if s.Waiting() != 1 {
		t.Fatalf("Waiting() = %d, want 1", s.Waiting())
	}
	s.Close()
	receive(t, done)
}

func TestCloseWakesEveryWaiterAtOnce(t *testing.T) {
	f := newFeed()
	s := ledgertest.NewService(t, f, ledger.Config{})
	g := grant(t, s, "a")
	var chans []<-chan waitAnswer
	for i := range 20 {
		key := "a"
		if i%2 == 1 {
			key = fmt.Sprintf("absent%d", i)
		}
		chans = append(chans, startWait(context.Background(), s, key, g.Intent.Version, ledger.MaxWait))
	}
	f.Await(t, 20)
	s.Close()
	for i, ch := range chans {
		a := receive(t, ch)
		switch {
		case i%2 == 0 && (a.err != nil || a.in.Version != g.Intent.Version):
			t.Errorf("waiter %d answered %+v, %v; want the intent as it is", i, a.in, a.err)
		case i%2 == 1 && !errors.Is(a.err, fsm.ErrNotFound):
			t.Errorf("waiter %d answered %v; want not found", i, a.err)
		}
	}
	// A poll after Close answers at once with what it reads.
	if in, err := s.Wait(context.Background(), "", "a", g.Intent.Version, ledger.MaxWait, ledger.Stale); err != nil || in.Version != g.Intent.Version {
		t.Fatalf("poll after Close: %+v, %v", in, err)
	}
	s.Close() // twice is fine
	if s.Waiting() != 0 || f.subscribers() != 0 {
		t.Fatalf("after Close: %d waiting, %d subscribed", s.Waiting(), f.subscribers())
	}
}

// BenchmarkIdleWaiters measures what one idle long-poll costs: the
// registry's entry and channel, the timer, and the goroutine that waits in
// Service.Wait (an HTTP request adds its connection on top).
func BenchmarkIdleWaiters(b *testing.B) {
	const n = 4096
	for range b.N {
		f := newFeed()
		s := ledgertest.NewService(b, f, ledger.Config{})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		chans := make([]<-chan waitAnswer, n)
		for i := range n {
			chans[i] = startWait(context.Background(), s, fmt.Sprintf("key-%d", i%1024), 0, ledger.MaxWait)
		}
		for s.Waiting() < n {
			runtime.Gosched()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perWaiter := float64((after.HeapAlloc+after.StackInuse)-(before.HeapAlloc+before.StackInuse)) / n
		b.ReportMetric(perWaiter, "B/waiter")
		s.Close()
		for _, ch := range chans {
			<-ch
		}
	}
}
