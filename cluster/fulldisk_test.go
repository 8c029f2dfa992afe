package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	walfs "github.com/hashicorp/raft-wal/fs"
	waltypes "github.com/hashicorp/raft-wal/types"
)

// fullVFS is raft-wal's file system on a disk that can be made full: while
// full, a new segment file is created (its entry fits in the directory)
// but preallocating it fails with ENOSPC, the debris a real full disk
// leaves. Writes into a segment's preallocated space succeed.
type fullVFS struct {
	waltypes.VFS
	full *atomic.Bool
}

// OpenWriter opens a segment file whose writes past its current size
// (a segment recovered from a failed preallocation) fail while full.
func (v fullVFS) OpenWriter(dir, name string) (waltypes.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	return fullFile{f, v.full, fi.Size()}, nil
}

type fullFile struct {
	waltypes.WritableFile
	full *atomic.Bool
	size int64 // allocated
}

func (f fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.full.Load() && off+int64(len(p)) > f.size {
		return 0, syscall.ENOSPC
	}
	return f.WritableFile.WriteAt(p, off)
}

func (v fullVFS) Create(dir, name string, size uint64) (waltypes.WritableFile, error) {
	if v.full.Load() {
		if f, err := v.VFS.Create(dir, name, 0); err == nil {
			_ = f.Close()
		}
		return nil, syscall.ENOSPC
	}
	return v.VFS.Create(dir, name, size)
}

// fullMeta is raft-wal's meta database on a disk that can be made full:
// while full, committing a new state (bolt growing its file) fails with
// ENOSPC.
type fullMeta struct {
	waltypes.MetaStore
	full *atomic.Bool
}

func (m fullMeta) CommitState(st waltypes.PersistentState) error {
	if m.full.Load() {
		return syscall.ENOSPC
	}
	return m.MetaStore.CommitState(st)
}

// A full disk makes raft-wal's rotation to a new segment fail (creating
// the segment file, or committing the meta database). raft-wal v0.4.2
// then answers every append "segment is sealed" until the process
// restarts; the log store must take appends again by itself once space
// returns, and keep every entry, then and after a restart.
func TestWALRotationOnAFullDiskRecovers(t *testing.T) {
	for _, tc := range []struct {
		name         string
		vfs, meta    bool // which one the full disk fails
		wantReopened bool
	}{
		{name: "segment create fails", vfs: true},
		{name: "meta commit fails", meta: true},
		{name: "both fail", vfs: true, meta: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var fullDisk, never atomic.Bool
			pick := func(b bool) *atomic.Bool {
				if b {
					return &fullDisk
				}
				return &never
			}
			opt := logStoreOptions{segmentSize: 1 << 20, vfs: fullVFS{walfs.New(), pick(tc.vfs)},
				wrapMeta: func(m waltypes.MetaStore) waltypes.MetaStore { return fullMeta{m, pick(tc.meta)} }}
			s, err := openLogStore(dir, LogStoreWAL, hclog.NewNullLogger(), opt)
			if err != nil {
				t.Fatal(err)
			}
			entry := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i)}, 16<<10) }
			idx := uint64(0)
			appendOne := func() error {
				err := s.StoreLogs([]*raft.Log{{Index: idx + 1, Term: 1, Data: entry(idx + 1)}})
				if err == nil {
					idx++
				}
				return err
			}
			for i := 0; i < 50; i++ { // most of the first 1 MiB segment
				if err := appendOne(); err != nil {
					t.Fatal(err)
				}
			}
			fullDisk.Store(true)
			failed := 0
			for i := 0; i < 40; i++ { // past the end of the segment
				if appendOne() != nil {
					failed++
				}
			}
			if failed == 0 {
				t.Fatal("no append failed while the disk was full: the test did not reach a rotation")
			}
			fullDisk.Store(false)
			// A reopen that failed while full is retried at a later append.
			waitFor(t, 10*time.Second, "an append to succeed once space returned", func() bool { return appendOne() == nil })
			for i := 0; i < 150; i++ { // and past the next segment's end
				if err := appendOne(); err != nil {
					t.Fatalf("append of entry %d after space returned: %v", idx+1, err)
				}
			}
			check := func(when string) {
				for i := uint64(1); i <= idx; i++ {
					var l raft.Log
					if err := s.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, entry(i)) {
						t.Fatalf("%s: entry %d: %v (%d bytes)", when, i, err, len(l.Data))
					}
				}
				if last, err := s.LastIndex(); err != nil || last != idx {
					t.Fatalf("%s: last index %d %v, want %d", when, last, err, idx)
				}
			}
			check("after space returned")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = openLogStore(dir, LogStoreWAL, hclog.NewNullLogger(), opt); err != nil {
				t.Fatalf("restart: %v", err)
			}
			defer s.Close()
			check("after a restart")
			if err := appendOne(); err != nil {
				t.Fatalf("append after a restart: %v", err)
			}
		})
	}
}

// failingSink is raft's file snapshot sink on a full disk: its writes
// failed, and Cancel, flushing its buffer again, fails before it removes
// the snapshot's temporary directory (raft v1.7.3's FileSnapshotSink).
type failingSink struct {
	raft.SnapshotSink
	id string
}

func (s failingSink) ID() string    { return s.id }
func (s failingSink) Cancel() error { return syscall.ENOSPC }
func (s failingSink) Close() error  { return syscall.ENOSPC }

// A snapshot a full disk cut short leaves no temporary directory behind,
// whether raft cancels it or closes it; and a node starting finds none
// left from before.
func TestFailedSnapshotLeavesNoDebris(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(raft.SnapshotSink) error
	}{
		{"cancel", raft.SnapshotSink.Cancel},
		{"close", raft.SnapshotSink.Close},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tmp := filepath.Join(dir, "2-100-1.tmp")
			if err := os.MkdirAll(tmp, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tmp, "state.bin"), make([]byte, 4096), 0o600); err != nil {
				t.Fatal(err)
			}
			sink := &durableSink{SnapshotSink: failingSink{id: "2-100-1"}, dir: dir, sync: func(string) error { return nil }}
			_ = tc.end(sink)
			if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the failed snapshot's directory is still there (%v)", err)
			}
		})
	}
	t.Run("start", func(t *testing.T) {
		dir := t.TempDir()
		for _, d := range []string{"2-100-1.tmp", "2-200-2.tmp", "2-50-0"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
				t.Fatal(err)
			}
		}
		n, err := removeTempSnapshots(dir, func(string) error { return nil })
		if err != nil || n != 2 {
			t.Fatalf("removed %d, %v; want 2", n, err)
		}
		left, _ := os.ReadDir(dir)
		if len(left) != 1 || left[0].Name() != "2-50-0" {
			t.Fatalf("left %v, want the complete snapshot only", left)
		}
	})
}

// A node whose appends fail for want of space stops standing for election
// (its timeouts are raised once) and stands again once a probe write
// fits; an append that succeeds meanwhile (a small batch in preallocated
// space) does not end the wait.
func TestFullGuardHoldsANodeBackUntilSpaceReturns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var probeOK atomic.Bool
	probed := make(chan struct{}, 1)
	calls := make(chan bool, 10)
	g := &fullGuard{ctx: ctx, log: slog.New(slog.DiscardHandler), every: time.Millisecond,
		probe: func() error {
			select {
			case probed <- struct{}{}:
			default:
			}
			if probeOK.Load() {
				return nil
			}
			return syscall.ENOSPC
		},
		stand: func(ok bool) { calls <- ok }}
	g.observe(nil)
	g.observe(errors.New("some other failure"))
	if len(calls) != 0 {
		t.Fatalf("%d timeout changes without a full disk", len(calls))
	}
	g.observe(fmt.Errorf("write seg.wal: %w", syscall.ENOSPC))
	g.observe(fmt.Errorf("write seg.wal: %w", syscall.ENOSPC))
	if ok := <-calls; ok {
		t.Fatal("a full disk let the node stand for election")
	}
	<-probed // a probe failed: still full
	g.observe(nil)
	<-probed
	if !g.isFull() || len(calls) != 0 {
		t.Fatalf("the node stands again while probes fail (full %v, %d changes)", g.isFull(), len(calls))
	}
	probeOK.Store(true)
	if ok := <-calls; !ok {
		t.Fatal("space came back but the node still may not stand")
	}
	g.observe(nil)
	if len(calls) != 0 || g.isFull() {
		t.Fatalf("%d more timeout changes after space returned (full %v)", len(calls), g.isFull())
	}
}

// probeWrite fails on a full disk and leaves nothing behind.
func TestProbeWrite(t *testing.T) {
	dir := t.TempDir()
	if err := probeWrite(dir); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("probe left %v", left)
	}
	if err := probeWrite(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a probe in a directory that does not exist succeeded")
	}
}

// raft's file snapshot store makes a snapshot's directory, then fails to
// create its state file on a full disk and returns without removing the
// directory; Create leaves nothing behind.
func TestFailedSnapshotCreateLeavesNoDebris(t *testing.T) {
	dataDir := t.TempDir()
	fileSnaps, err := raft.NewFileSnapshotStoreWithLogger(dataDir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(dataDir, "snapshots")
	s := &indexedSnapshots{SnapshotStore: fileSnaps, dir: dir, sync: func(string) error { return nil }}
	// Make creating state.bin fail: a directory named state.bin cannot be
	// opened for writing. raft names the snapshot's directory after the
	// clock, so every name of the next second is prepared up front.
	now := time.Now().UnixMilli()
	for ms := now; ms < now+1000; ms++ {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("3-42-%d.tmp", ms), "state.bin"), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(raft.SnapshotVersionMax, 42, 3, raft.Configuration{}, 1, nil); err == nil {
		t.Fatal("Create succeeded with its state file blocked")
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if len(left) != 0 {
		t.Fatalf("a failed Create left %d temporary directories", len(left))
	}
}
