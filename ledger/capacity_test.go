package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// fakeResources are injected readings of the disk, the data dir and the
// live heap.
type fakeResources struct {
	free, size, dataBytes, heap atomic.Uint64
	collected                   atomic.Int64
	// heapAfterCollect, when not 0, is the live heap a collection leaves.
	heapAfterCollect atomic.Uint64
}

func (f *fakeResources) readers() ledger.CapacityReaders {
	return ledger.CapacityReaders{
		Disk:      func() (uint64, uint64, error) { return f.free.Load(), f.size.Load(), nil },
		DataBytes: func() (uint64, error) { return f.dataBytes.Load(), nil },
		HeapLive:  func() uint64 { return f.heap.Load() },
		Collect: func() {
			f.collected.Add(1)
			if v := f.heapAfterCollect.Load(); v != 0 {
				f.heap.Store(v)
			}
		},
	}
}

// monitor returns a CapacityMonitor of limits reading f, sampled once.
func (f *fakeResources) monitor(t *testing.T, limits ledger.CapacityLimits, opt ledger.CapacityOptions) *ledger.CapacityMonitor {
	t.Helper()
	mon, err := ledger.NewCapacityMonitor(limits, f.readers(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return mon
}

const (
	mib = 1 << 20
	gib = 1 << 30
)

// TestCapacityGuard: past each capacity a claim of a new key is refused
// with ErrLedgerFull naming the resource and its figures, and nothing is
// proposed; the repeat of a held key, its complete, its duplicate and
// reads are served; once the resource has room again (the next sample)
// claims of new keys are admitted.
func TestCapacityGuard(t *testing.T) {
	for _, tt := range []struct {
		name   string
		limits ledger.CapacityLimits
		// fill makes the resource full, room gives it room again.
		fill, room func(*fakeResources)
		resource   string
		detail     string
	}{
		{
			name:   "disk under a set reserve",
			limits: ledger.CapacityLimits{MinFreeDisk: 512 * mib},
			fill:   func(f *fakeResources) { f.free.Store(100 * mib) },
			room:   func(f *fakeResources) { f.free.Store(600 * mib) },
			// 100 MiB free of 10 GiB, reserve 512 MiB.
			resource: ledger.ResourceDisk, detail: "100 MiB free, under its reserve of 512 MiB",
		},
		{
			name:     "disk under the automatic reserve (1 GiB of a large file system)",
			limits:   ledger.CapacityLimits{MinFreeDiskAuto: true},
			fill:     func(f *fakeResources) { f.free.Store(gib - 1) },
			room:     func(f *fakeResources) { f.free.Store(gib) },
			resource: ledger.ResourceDisk, detail: "under its reserve of 1.0 GiB",
		},
		{
			name:     "disk under the automatic reserve (10% of a small file system)",
			limits:   ledger.CapacityLimits{MinFreeDiskAuto: true},
			fill:     func(f *fakeResources) { f.size.Store(2 * gib); f.free.Store(100 * mib) },
			room:     func(f *fakeResources) { f.free.Store(300 * mib) },
			resource: ledger.ResourceDisk, detail: "under its reserve of 205 MiB",
		},
		{
			name:     "data dir over its cap",
			limits:   ledger.CapacityLimits{MaxDataBytes: 64 * mib},
			fill:     func(f *fakeResources) { f.dataBytes.Store(64 * mib) },
			room:     func(f *fakeResources) { f.dataBytes.Store(10 * mib) },
			resource: ledger.ResourceDataDir, detail: "the data dir holds 64 MiB, its cap is 64 MiB",
		},
		{
			name:     "live heap over the high water",
			limits:   ledger.CapacityLimits{MaxMemory: 400 * mib},
			fill:     func(f *fakeResources) { f.heap.Store(330 * mib) },
			room:     func(f *fakeResources) { f.heap.Store(200 * mib) },
			resource: ledger.ResourceMemory, detail: "the live heap is 330 MiB, over the high water of 320 MiB of the memory capacity of 400 MiB",
		},
		{
			name:     "live heap over a set high water",
			limits:   ledger.CapacityLimits{MaxMemory: 400 * mib, MemoryHighWater: 0.5},
			fill:     func(f *fakeResources) { f.heap.Store(200 * mib) },
			room:     func(f *fakeResources) { f.heap.Store(179 * mib) }, // under the high water less the 5% re-admission margin
			resource: ledger.ResourceMemory, detail: "over the high water of 200 MiB",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f := &fakeResources{}
			f.free.Store(5 * gib)
			f.size.Store(10 * gib)
			f.heap.Store(10 * mib)
			mon := f.monitor(t, tt.limits, ledger.CapacityOptions{})
			m := ledgertest.NewMemory(start)
			s := ledgertest.NewService(t, m, ledger.Config{Capacity: mon})

			held := mustClaim(t, s, claimReq("held", owner, `{"cents":1}`), fsm.StatusGranted)
			done := mustClaim(t, s, claimReq("done", owner, `{"cents":2}`), fsm.StatusGranted)
			if r, err := s.Complete(ctx, ledger.CompleteRequest{Key: "done", Owner: owner,
				FencingToken: done.Intent.FencingToken, Outcome: fsm.OutcomeExecuted}); err != nil || r.Status != fsm.StatusOK {
				t.Fatalf("complete: %v %v", r, err)
			}

			tt.fill(f)
			if mon.Full() != nil {
				t.Fatal("full before a sample")
			}
			mon.Sample()
			proposed := m.Proposed()
			_, err := s.Claim(ctx, claimReq("new", owner, `{"cents":3}`))
			var ce *ledger.CapacityError
			if !errors.As(err, &ce) || !errors.Is(err, ledger.ErrLedgerFull) || ce.Resource != tt.resource {
				t.Fatalf("claim of a new key: %v, want ErrLedgerFull for %s", err, tt.resource)
			}
			if !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("detail %q does not say %q", err, tt.detail)
			}
			eq(t, "proposals after the refusal", m.Proposed(), proposed)
			eq(t, "refusals counted", mon.Refused(tt.resource), 1)
			if _, err := s.Get(ctx, "", "new", ledger.Linearizable); !errors.Is(err, fsm.ErrNotFound) {
				t.Fatalf("the refused key was written: %v", err)
			}

			// What the ledger holds is served.
			mustClaim(t, s, claimReq("held", owner, `{"cents":1}`), fsm.StatusGranted) // the owner's repeat
			mustClaim(t, s, claimReq("done", "someone-else", `{"cents":2}`), fsm.StatusDuplicate)
			if r, err := s.Complete(ctx, ledger.CompleteRequest{Key: "held", Owner: owner,
				FencingToken: held.Intent.FencingToken, Outcome: fsm.OutcomeFailed}); err != nil || r.Status != fsm.StatusOK {
				t.Fatalf("complete while full: %v %v", r, err)
			}
			mustClaim(t, s, claimReq("held", owner, `{"cents":1}`), fsm.StatusGranted) // a retry after failed
			if _, err := s.Get(ctx, "", "done", ledger.Linearizable); err != nil {
				t.Fatalf("read while full: %v", err)
			}
			var usage *ledger.ResourceUsage
			for _, u := range mon.Usage() {
				if u.Resource == tt.resource {
					usage = &u
				}
			}
			if usage == nil || !usage.Refusing || usage.Refused != 1 {
				t.Fatalf("usage of %s: %+v", tt.resource, mon.Usage())
			}

			// Room again: admitted from the next sample on.
			tt.room(f)
			mon.Sample()
			if e := mon.Full(); e != nil {
				t.Fatalf("still full after room came back: %v", e)
			}
			mustClaim(t, s, claimReq("new", owner, `{"cents":3}`), fsm.StatusGranted)
		})
	}
}

// TestCapacityGuardFollower: a follower does not refuse (the leader
// decides): its claim goes on to the leader.
func TestCapacityGuardFollower(t *testing.T) {
	f := &fakeResources{}
	f.heap.Store(390 * mib)
	mon := f.monitor(t, ledger.CapacityLimits{MaxMemory: 400 * mib}, ledger.CapacityOptions{})
	if mon.Full() == nil {
		t.Fatal("not full at 390 of 400 MiB")
	}
	m := ledgertest.NewMemory(start)
	s := ledgertest.NewService(t, m, ledger.Config{Capacity: mon, Leading: func() bool { return false }})
	mustClaim(t, s, claimReq("k", owner, `{}`), fsm.StatusGranted)
	eq(t, "refusals", mon.Refused(ledger.ResourceMemory), 0)
}

// TestCapacityMemoryCollects: while memory refuses, a sample collects
// (at most every CollectEvery) so that room purges made is seen though
// refused claims allocate nothing; the collection's reading decides.
func TestCapacityMemoryCollects(t *testing.T) {
	now := start
	f := &fakeResources{}
	f.heap.Store(390 * mib)
	mon := f.monitor(t, ledger.CapacityLimits{MaxMemory: 400 * mib},
		ledger.CapacityOptions{CollectEvery: 10 * time.Second, Now: func() time.Time { return now }})
	eq(t, "collections at the first sample", f.collected.Load(), 1)
	if mon.Full() == nil {
		t.Fatal("not full")
	}
	f.heapAfterCollect.Store(100 * mib)
	now = now.Add(time.Second)
	mon.Sample()
	eq(t, "collections a second later", f.collected.Load(), 1)
	if mon.Full() == nil {
		t.Fatal("not full before a collection")
	}
	now = now.Add(10 * time.Second)
	mon.Sample()
	eq(t, "collections after CollectEvery", f.collected.Load(), 2)
	if e := mon.Full(); e != nil {
		t.Fatalf("still full after the collection freed memory: %v", e)
	}
}

func TestCapacityLimitsValidate(t *testing.T) {
	for _, hw := range []float64{-0.1, 1.5} {
		if _, err := ledger.NewCapacityMonitor(ledger.CapacityLimits{MemoryHighWater: hw}, ledger.CapacityReaders{}, ledger.CapacityOptions{}); err == nil {
			t.Errorf("high water %v accepted", hw)
		}
	}
}

// TestCapacityMemoryReadmitsBelowAMargin: once memory refuses, a live heap
// back just under the high water (a collection's dip) keeps refusing;
// claims are admitted again only below the high water less 5% of the
// capacity. Without the margin the refusal flapped at every collection.
func TestCapacityMemoryReadmitsBelowAMargin(t *testing.T) {
	f := &fakeResources{}
	f.heap.Store(100 * mib) // capacity 400 MiB, high water 320 MiB, re-admission under 300 MiB
	mon := f.monitor(t, ledger.CapacityLimits{MaxMemory: 400 * mib}, ledger.CapacityOptions{})
	steps := []struct {
		heap    uint64
		refuses bool
	}{
		{310 * mib, false}, // under the high water, never refused: admitted
		{320 * mib, true},  // at the high water
		{319 * mib, true},  // a dip under it: still refusing
		{301 * mib, true},
		{299 * mib, false}, // under the re-admission mark
		{310 * mib, false}, // admitted again until the high water
		{330 * mib, true},
	}
	for i, s := range steps {
		f.heap.Store(s.heap)
		mon.Sample()
		e := mon.Full()
		if (e != nil) != s.refuses {
			t.Fatalf("step %d, heap %d MiB: refusing %v, want %v (%v)", i, s.heap/mib, e != nil, s.refuses, e)
		}
		if e != nil && !strings.Contains(e.Error(), "memory") {
			t.Fatalf("step %d: %v does not name memory", i, e)
		}
	}
}
