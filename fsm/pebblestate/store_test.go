package pebblestate

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

// testTB is what the helpers need of a *testing.T or a *rapid.T.
type testTB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// openTestDir opens a Dir in path on fs with small memtables (so flushes
// and sstable reads happen in small tests) and closes it at the end of
// the test if the test has not.
func openTestDir(t testTB, fs vfs.FS, path string) *Dir {
	t.Helper()
	d, err := OpenDir(path, Options{MemTableBytes: 256 << 10, CacheBytes: 1 << 20, fs: fs})
	if err != nil {
		t.Fatalf("OpenDir: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

type pair struct{ k, v []byte }

func (p pair) String() string { return fmt.Sprintf("%x=%x", p.k, p.v) }

// scanAll collects what Scan passes to fn, copied, up to limit pairs (0:
// all).
func scanAll(scan func(lo, hi []byte, fn func(k, v []byte) bool), lo, hi []byte, limit int) []pair {
	var out []pair
	scan(lo, hi, func(k, v []byte) bool {
		out = append(out, pair{bytes.Clone(k), bytes.Clone(v)})
		return limit == 0 || len(out) < limit
	})
	return out
}

func samePairs(a, b []pair) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].k, b[i].k) || !bytes.Equal(a[i].v, b[i].v) {
			return false
		}
	}
	return true
}

// keys are short strings over a small alphabet, so sets, deletes and
// bounds collide often; the alphabet has the extremes of byte order.
var keys = rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 0x01, 'a', 'b', 0xff}), 0, 3)

// viewPair is a view of each store and what both held when it was taken.
type viewPair struct {
	p, m fsm.StoreView
	want []pair
}

// TestConformsToMemoryStore runs random sequences of writes, reads,
// commits, syncs and views on a Store and on fsm.MemoryStore, the
// reference, and compares every answer; each view must go on showing what
// was committed when it was taken.
func TestConformsToMemoryStore(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := openTestDir(rt, vfs.NewMem(), "state")
		p := d.Current()
		m := fsm.NewMemoryStore()
		pending := false // writes since the last Commit
		var views []*viewPair
		rt.Cleanup(func() {
			for _, v := range views {
				v.p.Release()
			}
		})
		rt.Repeat(map[string]func(*rapid.T){
			"set": func(rt *rapid.T) {
				k := keys.Draw(rt, "key")
				v := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(rt, "value")
				p.Set(k, v)
				m.Set(k, v)
				pending = true
			},
			"delete": func(rt *rapid.T) {
				k := keys.Draw(rt, "key")
				p.Delete(k)
				m.Delete(k)
				pending = true
			},
			"get": func(rt *rapid.T) {
				k := keys.Draw(rt, "key")
				pv, pok := p.Get(k)
				mv, mok := m.Get(k)
				if pok != mok || !bytes.Equal(pv, mv) {
					rt.Fatalf("Get(%x) = %x, %v; the memory store has %x, %v", k, pv, pok, mv, mok)
				}
			},
			"scan": func(rt *rapid.T) {
				lo, hi := drawBounds(rt)
				limit := rapid.IntRange(0, 4).Draw(rt, "limit")
				got, want := scanAll(p.Scan, lo, hi, limit), scanAll(m.Scan, lo, hi, limit)
				if !samePairs(got, want) {
					rt.Fatalf("Scan(%x, %x) limit %d = %v; the memory store has %v", lo, hi, limit, got, want)
				}
			},
			"commit": func(rt *rapid.T) {
				p.Commit()
				m.Commit()
				pending = false
			},
			"sync": func(rt *rapid.T) {
				p.Sync()
				m.Sync()
			},
			"view": func(rt *rapid.T) {
				if pending {
					rt.Skip("a view is of a Commit")
				}
				views = append(views, &viewPair{p: p.View(), m: m.View(), want: scanAll(m.Scan, nil, nil, 0)})
			},
			"read a view": func(rt *rapid.T) {
				if len(views) == 0 {
					rt.Skip("no view")
				}
				v := views[rapid.IntRange(0, len(views)-1).Draw(rt, "view")]
				if got := scanAll(v.p.Scan, nil, nil, 0); !samePairs(got, v.want) {
					rt.Fatalf("the view changed: %v, was %v", got, v.want)
				}
				lo, hi := drawBounds(rt)
				if got, want := scanAll(v.p.Scan, lo, hi, 0), scanAll(v.m.Scan, lo, hi, 0); !samePairs(got, want) {
					rt.Fatalf("view Scan(%x, %x) = %v; the memory store's view has %v", lo, hi, got, want)
				}
				k := keys.Draw(rt, "key")
				pv, pok := v.p.Get(k)
				mv, mok := v.m.Get(k)
				if pok != mok || !bytes.Equal(pv, mv) {
					rt.Fatalf("view Get(%x) = %x, %v; the memory store's view has %x, %v", k, pv, pok, mv, mok)
				}
			},
			"release a view": func(rt *rapid.T) {
				if len(views) == 0 {
					rt.Skip("no view")
				}
				i := rapid.IntRange(0, len(views)-1).Draw(rt, "view")
				views[i].p.Release()
				views[i].p.Release() // idempotent
				views[i].m.Release()
				views = append(views[:i], views[i+1:]...)
			},
		})
	})
}

// drawBounds draws a Scan's bounds: lo possibly nil, hi possibly nil (no
// bound) and possibly below lo.
func drawBounds(rt *rapid.T) (lo, hi []byte) {
	if rapid.Bool().Draw(rt, "has lo") {
		lo = keys.Draw(rt, "lo")
	}
	if rapid.Bool().Draw(rt, "has hi") {
		hi = keys.Draw(rt, "hi")
	}
	return lo, hi
}

// TestGetReturnsACopy: the value Get returns is the caller's, whether it
// came from the batch or from the database, and Set keeps its own copies.
func TestGetReturnsACopy(t *testing.T) {
	s := openTestDir(t, vfs.NewMem(), "state").Current()
	k, v := []byte("k"), []byte("value")
	s.Set(k, v)
	k[0], v[0] = 'x', 'x'
	for _, stage := range []string{"in the batch", "committed", "flushed"} {
		switch stage {
		case "committed":
			s.Commit()
		case "flushed":
			s.Sync()
		}
		got, ok := s.Get([]byte("k"))
		if !ok || string(got) != "value" {
			t.Fatalf("%s: Get = %q, %v; want value", stage, got, ok)
		}
		got[0] = 'X'
		if again, _ := s.Get([]byte("k")); string(again) != "value" {
			t.Fatalf("%s: a change to a returned value reached the store: %q", stage, again)
		}
	}
}

// TestConcurrentReads reads through an open batch, the database and views
// from several goroutines at once (the race detector is the check).
func TestConcurrentReads(t *testing.T) {
	s := openTestDir(t, vfs.NewMem(), "state").Current()
	for i := range 100 {
		s.Set(fmt.Appendf(nil, "k%03d", i), []byte{byte(i)})
	}
	s.Commit()
	v := s.View()
	defer v.Release()
	for _, open := range []string{"no batch", "a batch"} {
		if open == "a batch" {
			s.Set([]byte("k050"), []byte("new"))
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, ok := s.Get([]byte("k010")); !ok {
					t.Error("k010 missing")
				}
				if n := len(scanAll(s.Scan, nil, nil, 0)); n != 100 {
					t.Errorf("Scan saw %d keys, want 100", n)
				}
				if got, _ := v.Get([]byte("k050")); !bytes.Equal(got, []byte{50}) {
					t.Errorf("the view's k050 = %q", got)
				}
				if open == "no batch" {
					w := s.View()
					if _, ok := w.Get([]byte("k099")); !ok {
						t.Error("a new view misses k099")
					}
					w.Release()
				}
				if s.DiskUsage() == 0 {
					t.Error("DiskUsage is 0")
				}
			})
		}
		wg.Wait()
	}
}
