package pebblestate

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestClosedPanicsWithErrStoreIO: every operation on a closed store or a
// released view panics with fsm.ErrStoreIO.
func TestClosedPanicsWithErrStoreIO(t *testing.T) {
	d := openTestDir(t, vfs.NewMem(), "state")
	s := d.Current()
	s.Set([]byte("k"), []byte("v"))
	s.Commit()
	v := s.View()
	v.Release()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	k := []byte("k")
	tests := []struct {
		name string
		op   func()
	}{
		{"Get", func() { s.Get(k) }},
		{"Set", func() { s.Set(k, k) }},
		{"Delete", func() { s.Delete(k) }},
		{"Scan", func() { s.Scan(nil, nil, func(_, _ []byte) bool { return true }) }},
		{"Commit", func() { s.Commit() }},
		{"Sync", func() { s.Sync() }},
		{"View", func() { s.View() }},
		{"DiskUsage", func() { s.DiskUsage() }},
		{"view Get", func() { v.Get(k) }},
		{"view Scan", func() { v.Scan(nil, nil, func(_, _ []byte) bool { return true }) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { mustPanicIO(t, tt.name, tt.op) })
	}
	v.Release() // still idempotent
	if _, err := d.Stage(); err == nil {
		t.Fatal("Stage after Close: no error")
	}
}

// TestIOErrorsPanicWithErrStoreIO fails the file system under each
// operation that reads or writes it and wants a panic wrapping both
// fsm.ErrStoreIO and the file system's error.
func TestIOErrorsPanicWithErrStoreIO(t *testing.T) {
	sst := func(op errorfs.Op) bool { return strings.HasSuffix(op.Path, ".sst") }
	reads := func(op errorfs.Op) bool { return sst(op) && op.Kind.ReadOrWrite() == errorfs.OpIsRead }
	writes := func(op errorfs.Op) bool { return sst(op) && op.Kind.ReadOrWrite() == errorfs.OpIsWrite }
	tests := []struct {
		name string
		fail func(errorfs.Op) bool
		op   func(s *Store)
	}{
		{"Get", reads, func(s *Store) { s.Get([]byte("k050")) }},
		{"Get through a batch", reads, func(s *Store) {
			s.Set([]byte("other"), nil)
			s.Get([]byte("k050"))
		}},
		{"Scan", reads, func(s *Store) { s.Scan(nil, nil, func(_, _ []byte) bool { return true }) }},
		{"Scan through a batch", reads, func(s *Store) {
			s.Set([]byte("other"), nil)
			s.Scan([]byte("k"), nil, func(_, _ []byte) bool { return true })
		}},
		{"view Get", reads, func(s *Store) {
			v := s.View()
			defer v.Release()
			v.Get([]byte("k050"))
		}},
		{"view Scan", reads, func(s *Store) {
			v := s.View()
			defer v.Release()
			v.Scan(nil, []byte("k060"), func(_, _ []byte) bool { return true })
		}},
		{"Sync", writes, func(s *Store) {
			s.Set([]byte("k"), []byte("v"))
			s.Commit()
			s.Sync()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var on atomic.Bool
			mem := vfs.NewMem()
			fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if on.Load() && tt.fail(op) {
					return errorfs.ErrInjected
				}
				return nil
			}))
			// Write some keys to an sstable, then open again: nothing of
			// it is in the block cache.
			d := openTestDir(t, fs, "state")
			for i := range 100 {
				d.Current().Set(fmt.Appendf(nil, "k%03d", i), []byte("value"))
			}
			d.Current().Commit()
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = openTestDir(t, fs, "state")
			on.Store(true)
			err := mustPanicIO(t, tt.name, func() { tt.op(d.Current()) })
			on.Store(false)
			if !errors.Is(err, errorfs.ErrInjected) {
				t.Fatalf("the panic's error %v does not wrap the file system's", err)
			}
		})
	}
}

// TestPromoteFailsCleanly: when CURRENT cannot be written, Promote
// changes nothing and the staged store can be discarded.
func TestPromoteFailsCleanly(t *testing.T) {
	var on atomic.Bool
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && op.Kind == errorfs.OpCreate && strings.HasSuffix(op.Path, currentTemp) {
			return errorfs.ErrInjected
		}
		return nil
	}))
	d := openTestDir(t, fs, "state")
	old := d.Current()
	staged, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	staged.Set([]byte("k"), []byte("new"))
	staged.Commit()
	on.Store(true)
	if err := d.Promote(staged); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("Promote = %v, want the injected error", err)
	}
	on.Store(false)
	if d.Current() != old {
		t.Fatal("a failed Promote changed the current store")
	}
	if err := d.Discard(staged); err != nil {
		t.Fatal(err)
	}
	if got := memGenerations(t, fs); len(got) != 1 || got[0] != "gen-000001" {
		t.Fatalf("generations after Discard: %v", got)
	}
	if name, err := d.readCurrent(); err != nil || name != "gen-000001" {
		t.Fatalf("CURRENT names %q, %v", name, err)
	}
}
