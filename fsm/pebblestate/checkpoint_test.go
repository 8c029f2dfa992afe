package pebblestate

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/intentledger/intentd/fsm"
)

// TestCheckpointHoldsWhatWasSynced takes a checkpoint after a Sync and
// writes on: the checkpoint, opened read-only, holds exactly the state at
// the Sync, and refuses writes.
func TestCheckpointHoldsWhatWasSynced(t *testing.T) {
	dir := t.TempDir()
	d := openTestDir(t, vfs.Default, filepath.Join(dir, "state"))
	s := d.Current()
	want := fsm.NewMemoryStore()
	for i := range 500 {
		k, v := []byte(fmt.Sprintf("k%04d", i)), []byte(fmt.Sprintf("v%d", i))
		s.Set(k, v)
		want.Set(k, v)
	}
	s.Delete([]byte("k0007"))
	want.Delete([]byte("k0007"))
	s.Commit()
	s.Sync()
	cp := filepath.Join(dir, "checkpoint")
	if err := s.Checkpoint(cp); err != nil {
		t.Fatal(err)
	}
	s.Set([]byte("k0001"), []byte("changed after"))
	s.Set([]byte("later"), []byte("x"))
	s.Commit()
	s.Sync()

	ro, err := OpenReadOnly(cp, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got := scanAll(ro.Scan, nil, nil, 0)
	if exp := scanAll(want.Scan, nil, nil, 0); !samePairs(got, exp) {
		t.Fatalf("checkpoint holds %d pairs %v..., want %d", len(got), got[:min(3, len(got))], len(exp))
	}
	for _, write := range []func(){func() { ro.Set([]byte("a"), nil) }, func() { ro.Delete([]byte("a")) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("a write to a read-only store did not panic")
				}
			}()
			write()
		}()
	}
	if err := s.Checkpoint(cp); err == nil {
		t.Fatal("a checkpoint over an existing directory succeeded")
	}
	if _, err := OpenReadOnly(filepath.Join(dir, "none"), nil); err == nil || errors.Is(err, fsm.ErrStoreIO) {
		t.Fatalf("opening a missing checkpoint: %v", err)
	}
}
