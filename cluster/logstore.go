package cluster

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	waltypes "github.com/hashicorp/raft-wal/types"
)

// logCacheSize is how many recent log entries the leader keeps in memory,
// so that replicating them to followers does not read them back from disk.
const logCacheSize = 1024

// logStore is where Raft persists its log and its stable state (term,
// vote).
type logStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

// Log stores Config.LogStore selects.
const (
	// LogStoreWAL is raft-wal in DataDir/wal/: one append and one fsync
	// per batch of entries. The default.
	LogStoreWAL = "wal"
	// LogStoreBoltDB is raft-boltdb in DataDir/raft.db: a B+tree
	// copy-on-write commit with two fdatasyncs per batch.
	LogStoreBoltDB = "boltdb"
)

// MinWALSegmentSize is the smallest Config.WALSegmentSize (64 KiB): a few
// hundred typical entries, so that rotations (a file created and
// preallocated, a meta database commit) stay rare next to appends. An entry
// larger than a segment still fits: raft-wal seals a segment after the
// append that fills it.
const MinWALSegmentSize = 64 << 10

// MaxWALSegmentSize is the largest Config.WALSegmentSize: raft-wal keeps
// segment offsets in 32 bits, and preallocates at most 2 GiB - 1.
const MaxWALSegmentSize = 1<<31 - 1

// logStoreOptions are openLogStore's knobs beyond the kind.
type logStoreOptions struct {
	// noSync is the seeded bug faults.LogNoFsync (see openLogStore).
	noSync bool
	// segmentSize is raft-wal's segment size (0: raft-wal's default, 64 MiB).
	segmentSize int
	// vfs replaces raft-wal's file system (tests inject faults with it).
	vfs waltypes.VFS
	// wrapMeta wraps raft-wal's meta database (tests inject faults).
	wrapMeta func(waltypes.MetaStore) waltypes.MetaStore
}

// ErrLogStore is a log store New cannot open: an unknown kind, or a data
// dir that holds the other kind (a node keeps the log store its data dir
// was made with).
var ErrLogStore = errors.New("cluster: log store")

// openLogStore opens the Raft log and stable store of the given kind
// (LogStoreWAL or LogStoreBoltDB) in dataDir, and nothing else: a data
// dir that holds the other kind is refused, since opening the configured
// kind beside it would start a second, empty log, and the node would
// rejoin as if it had lost its disk. Both fsync before StoreLogs returns:
// durability is the same. opt.noSync is the seeded bug faults.LogNoFsync: the
// store's log files are never fsynced (raft-boltdb's NoSync, raft-wal's
// segment files through a VFS whose Sync does nothing); the stable store
// (term, vote) still is.
func openLogStore(dataDir, kind string, logger hclog.Logger, opt logStoreOptions) (logStore, error) {
	boltPath := filepath.Join(dataDir, "raft.db")
	walDir := filepath.Join(dataDir, "wal")
	var mine, other, otherKind string
	switch kind {
	case LogStoreWAL:
		mine, other, otherKind = walDir, boltPath, LogStoreBoltDB
	case LogStoreBoltDB:
		mine, other, otherKind = boltPath, walDir, LogStoreWAL
	default:
		return nil, fmt.Errorf("%w %q: want %q or %q", ErrLogStore, kind, LogStoreWAL, LogStoreBoltDB)
	}
	if _, err := os.Stat(other); err == nil {
		return nil, fmt.Errorf("%w %q: the data dir %s holds a %q log store (%s); start with log store %q, "+
			"or give the node a fresh data dir", ErrLogStore, kind, dataDir, otherKind, other, otherKind)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrLogStore, err)
	}
	if kind == LogStoreBoltDB {
		s, err := raftboltdb.New(raftboltdb.Options{Path: mine, NoSync: opt.noSync})
		if err != nil {
			return nil, fmt.Errorf("cluster: open %s: %w", mine, err)
		}
		return s, nil
	}
	if err := os.MkdirAll(mine, 0o750); err != nil {
		return nil, fmt.Errorf("cluster: wal dir: %w", err)
	}
	var vfs waltypes.VFS = walfs.New()
	if opt.vfs != nil {
		vfs = opt.vfs
	}
	if opt.noSync {
		vfs = noSyncVFS{vfs}
	}
	s := &walStore{dir: mine, vfs: vfs, logger: logger, segmentSize: opt.segmentSize, wrapMeta: opt.wrapMeta}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

// walStore is raft-wal with two fixes.
//
// It closes raft-wal's meta database along with the WAL: v0.4.0's Close
// leaves it open (and locked), so a node restarted in the same process
// would wait forever for the lock.
//
// It reopens the WAL when raft-wal wedged itself on a full disk. raft-wal
// rotates to a new segment in the background once the tail is full; when
// that rotation fails (ENOSPC creating or preallocating the new segment
// file, or committing the meta database) it only logs "rotate error", and
// every later append fails with "segment is sealed" until the process
// restarts: a node whose disk filled for a moment never appended again by
// itself. On that answer walStore closes the WAL and opens it again, which
// recovers the state from the meta database and the files (the same
// recovery as a restart), then retries the append; while the disk is
// still full the reopen or the retried append fails and the next append
// tries again.
type walStore struct {
	dir         string
	vfs         waltypes.VFS
	logger      hclog.Logger
	segmentSize int
	wrapMeta    func(waltypes.MetaStore) waltypes.MetaStore

	// mu guards w and meta: held shared by every call into the WAL,
	// exclusively by a reopen.
	mu   sync.RWMutex
	w    *wal.WAL // nil after a failed reopen
	meta *metadb.BoltMetaDB
	// lastReopen paces reopens that fail (at most one per reopenPause).
	lastReopen time.Time
	closed     bool // by Close: no more reopens
}

// reopenPause is the least time between two tries at reopening a wedged
// WAL while the disk stays full.
const reopenPause = 200 * time.Millisecond

// errWALClosed is a call made while a reopen of the WAL has failed.
var errWALClosed = errors.New("cluster: the log store is being reopened after a full disk")

// open opens the WAL and its meta database; s.mu is held or s not shared.
func (s *walStore) open() error {
	if err := s.finishRotation(); err != nil {
		return fmt.Errorf("cluster: open wal: %w", err)
	}
	meta := &metadb.BoltMetaDB{}
	var ms waltypes.MetaStore = meta
	if s.wrapMeta != nil {
		ms = s.wrapMeta(meta)
	}
	// A segment size of 0 is raft-wal's default.
	w, err := wal.Open(s.dir, wal.WithLogger(s.logger), wal.WithMetaStore(ms),
		wal.WithSegmentFiler(segment.NewFiler(s.dir, s.vfs)), wal.WithSegmentSize(s.segmentSize))
	if err != nil {
		_ = meta.Close()
		return fmt.Errorf("cluster: open wal: %w", err)
	}
	s.w, s.meta = w, meta
	return nil
}

// finishRotation completes a rotation that a full disk cut short after
// the tail segment was sealed in its file but before the meta database
// recorded it (the commit of the meta database failed). raft-wal's
// recovery opens such a tail as the tail again, sealed, and never rotates
// it: every append fails with "segment is sealed", restarts included.
// finishRotation records the seal and a new, empty tail segment after it
// in the meta database, as raft-wal's rotation does; raft-wal's recovery
// then creates the new segment's file. The WAL must be closed.
func (s *walStore) finishRotation() error {
	meta := &metadb.BoltMetaDB{}
	var ms waltypes.MetaStore = meta
	if s.wrapMeta != nil {
		ms = s.wrapMeta(meta)
	}
	defer meta.Close()
	st, err := ms.Load(s.dir)
	if err != nil {
		return err
	}
	if len(st.Segments) == 0 {
		return nil
	}
	tail := st.Segments[len(st.Segments)-1]
	if !tail.SealTime.IsZero() {
		return nil
	}
	sw, err := segment.NewFiler(s.dir, s.vfs).RecoverTail(tail)
	if err != nil {
		return nil // raft-wal's own recovery handles (or reports) it
	}
	sealed, indexStart, err := sw.Sealed()
	last := sw.LastIndex()
	_ = sw.Close()
	if err != nil || !sealed {
		return err
	}
	s.logger.Warn("finishing a segment rotation a full disk cut short", "segment", tail.ID, "last_index", last)
	tail.SealTime = time.Now()
	tail.MaxIndex = last
	tail.IndexStart = indexStart
	st.Segments[len(st.Segments)-1] = tail
	size := s.segmentSize
	if size == 0 {
		size = wal.DefaultSegmentSize
	}
	st.Segments = append(st.Segments, waltypes.SegmentInfo{
		ID: st.NextSegmentID, BaseIndex: last + 1, MinIndex: last + 1, SizeLimit: uint32(size),
		Codec: wal.CodecBinaryV1, CreateTime: time.Now(),
	})
	st.NextSegmentID++
	return ms.CommitState(st)
}

// reopen closes the WAL and opens it again, unless another call did so
// since stale was read.
func (s *walStore) reopen(stale *wal.WAL) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return wal.ErrClosed
	}
	if s.w != stale && s.w != nil {
		return nil // reopened meanwhile
	}
	if s.w == nil && time.Since(s.lastReopen) < reopenPause {
		return errWALClosed
	}
	s.lastReopen = time.Now()
	if s.w != nil {
		s.logger.Error("the log store cannot rotate its segment (full disk?): reopening it")
		err := errors.Join(s.w.Close(), s.meta.Close())
		s.w, s.meta = nil, nil
		if err != nil {
			s.logger.Warn("closing the wedged log store", "err", err)
		}
	}
	if err := s.open(); err != nil {
		s.logger.Error("reopening the log store failed; trying again at the next write", "err", err)
		return fmt.Errorf("%w: %w", errWALClosed, err)
	}
	s.logger.Warn("the log store is open again")
	return nil
}

// current returns the open WAL with s.mu held shared (release with
// s.mu.RUnlock), reopening it first if a reopen failed.
func (s *walStore) current() (*wal.WAL, error) {
	s.mu.RLock()
	if s.w != nil {
		return s.w, nil
	}
	s.mu.RUnlock()
	if err := s.reopen(nil); err != nil {
		return nil, err
	}
	return s.current()
}

// do runs f on the open WAL.
func (s *walStore) do(f func(w *wal.WAL) error) error {
	w, err := s.current()
	if err != nil {
		return err
	}
	defer s.mu.RUnlock()
	return f(w)
}

// FirstIndex implements raft.LogStore.
func (s *walStore) FirstIndex() (i uint64, err error) {
	err = s.do(func(w *wal.WAL) error { i, err = w.FirstIndex(); return err })
	return i, err
}

// LastIndex implements raft.LogStore.
func (s *walStore) LastIndex() (i uint64, err error) {
	err = s.do(func(w *wal.WAL) error { i, err = w.LastIndex(); return err })
	return i, err
}

// GetLog implements raft.LogStore.
func (s *walStore) GetLog(index uint64, l *raft.Log) error {
	return s.do(func(w *wal.WAL) error { return w.GetLog(index, l) })
}

// StoreLog implements raft.LogStore.
func (s *walStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs implements raft.LogStore: raft-wal's append, after a reopen if
// raft-wal answers that a failed rotation left its tail sealed.
func (s *walStore) StoreLogs(logs []*raft.Log) error {
	var used *wal.WAL
	err := s.do(func(w *wal.WAL) error { used = w; return w.StoreLogs(logs) })
	if !errors.Is(err, waltypes.ErrSealed) {
		return err
	}
	if rerr := s.reopen(used); rerr != nil {
		return fmt.Errorf("%w (%w)", err, rerr)
	}
	return s.do(func(w *wal.WAL) error { return w.StoreLogs(logs) })
}

// DeleteRange implements raft.LogStore.
func (s *walStore) DeleteRange(min, max uint64) error {
	return s.do(func(w *wal.WAL) error { return w.DeleteRange(min, max) })
}

// IsMonotonic implements raft.MonotonicLogStore as raft-wal does.
func (s *walStore) IsMonotonic() bool { return true }

// Set implements raft.StableStore.
func (s *walStore) Set(key, val []byte) error {
	return s.do(func(w *wal.WAL) error { return w.Set(key, val) })
}

// Get implements raft.StableStore.
func (s *walStore) Get(key []byte) (v []byte, err error) {
	err = s.do(func(w *wal.WAL) error { v, err = w.Get(key); return err })
	return v, err
}

// SetUint64 implements raft.StableStore.
func (s *walStore) SetUint64(key []byte, val uint64) error {
	return s.do(func(w *wal.WAL) error { return w.SetUint64(key, val) })
}

// GetUint64 implements raft.StableStore.
func (s *walStore) GetUint64(key []byte) (v uint64, err error) {
	err = s.do(func(w *wal.WAL) error { v, err = w.GetUint64(key); return err })
	return v, err
}

// Close closes the WAL, then its meta database.
func (s *walStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.w == nil {
		return nil
	}
	err := errors.Join(s.w.Close(), s.meta.Close())
	s.w, s.meta = nil, nil
	return err
}

// The log store wrappers between raft's log cache and the store
// (checkedLog, guardedLogStore, timedLogStore) each add to StoreLogs (and
// checkedLog to GetLog), and embed the store they wrap for the rest. Two
// methods each wrapper must still declare, in one line that calls the
// helper below: StoreLog, so that a single append goes through the
// wrapper's own StoreLogs (embedding would send it straight to the inner
// store), and IsMonotonic, since raft.LogStore does not carry
// raft.MonotonicLogStore: raft-wal refuses a gap in its indexes, and raft
// deletes the old log after restoring a snapshot only when the store says
// so (raft asserts it on its log cache, which asks the store under it).

// innerMonotonic is a wrapper's raft.MonotonicLogStore answer: the answer
// of the store it wraps, false when that store does not implement it.
func innerMonotonic(inner raft.LogStore) bool {
	m, ok := inner.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// timedLogStore times every append to the log store (Config.ObserveLogWrite).
type timedLogStore struct {
	raft.LogStore
	observe func(time.Duration)
}

// IsMonotonic implements raft.MonotonicLogStore as the inner store does.
func (s timedLogStore) IsMonotonic() bool { return innerMonotonic(s.LogStore) }

// StoreLog implements raft.LogStore through StoreLogs.
func (s timedLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: the inner store's append, timed.
func (s timedLogStore) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := s.LogStore.StoreLogs(logs)
	s.observe(time.Since(start))
	return err
}

// noSyncVFS is raft-wal's file system with a Sync that does nothing: the
// seeded bug faults.LogNoFsync.
type noSyncVFS struct{ waltypes.VFS }

// Create creates a segment file whose Sync does nothing.
func (v noSyncVFS) Create(dir, name string, size uint64) (waltypes.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// OpenWriter opens a segment file whose Sync does nothing.
func (v noSyncVFS) OpenWriter(dir, name string) (waltypes.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

type noSyncFile struct{ waltypes.WritableFile }

// Sync does nothing.
func (noSyncFile) Sync() error { return nil }
