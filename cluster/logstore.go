package cluster

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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

// ErrLogStore is a log store New cannot open: an unknown kind, or a data
// dir that holds the other kind (a node keeps the log store its data dir
// was made with).
var ErrLogStore = errors.New("cluster: log store")

// openLogStore opens the Raft log and stable store of the given kind
// (LogStoreWAL or LogStoreBoltDB) in dataDir, and nothing else: a data
// dir that holds the other kind is refused, since opening the configured
// kind beside it would start a second, empty log, and the node would
// rejoin as if it had lost its disk. Both fsync before StoreLogs returns:
// durability is the same. noSync is the seeded bug faults.LogNoFsync: the
// store's log files are never fsynced (raft-boltdb's NoSync, raft-wal's
// segment files through a VFS whose Sync does nothing); the stable store
// (term, vote) still is.
func openLogStore(dataDir, kind string, logger hclog.Logger, noSync bool) (logStore, error) {
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
		s, err := raftboltdb.New(raftboltdb.Options{Path: mine, NoSync: noSync})
		if err != nil {
			return nil, fmt.Errorf("cluster: open %s: %w", mine, err)
		}
		return s, nil
	}
	if err := os.MkdirAll(mine, 0o750); err != nil {
		return nil, fmt.Errorf("cluster: wal dir: %w", err)
	}
	meta := &metadb.BoltMetaDB{}
	var vfs waltypes.VFS = walfs.New()
	if noSync {
		vfs = noSyncVFS{vfs}
	}
	w, err := wal.Open(mine, wal.WithLogger(logger), wal.WithMetaStore(meta), wal.WithSegmentFiler(segment.NewFiler(mine, vfs)))
	if err != nil {
		_ = meta.Close()
		return nil, fmt.Errorf("cluster: open wal: %w", err)
	}
	return &walStore{WAL: w, meta: meta}, nil
}

// walStore closes raft-wal's meta database along with the WAL: v0.4.0's
// Close leaves it open (and locked), so a node restarted in the same
// process would wait forever for the lock.
type walStore struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
}

// Close closes the WAL, then its meta database.
func (s *walStore) Close() error {
	return errors.Join(s.WAL.Close(), s.meta.Close())
}

// timedLogStore times every append to the log store (Config.ObserveLogWrite).
// It passes raft.MonotonicLogStore through: raft-wal refuses a gap in its
// indexes, and Raft deletes the old log after restoring a snapshot only
// when the store says so.
type timedLogStore struct {
	raft.LogStore
	observe func(time.Duration)
}

// IsMonotonic implements raft.MonotonicLogStore as the inner store does.
func (s timedLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// StoreLog implements raft.LogStore.
func (s timedLogStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

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
