package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
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

// Log store kinds, as reported in the node's start log.
const (
	storeWAL  = "raft-wal"
	storeBolt = "raft-boltdb"
)

// openLogStore opens the node's Raft log and stable store. A new data dir
// gets raft-wal in wal/: one append and one fsync per StoreLogs, where
// raft-boltdb pays a B+tree copy-on-write commit with two fdatasyncs. A
// data dir that already holds raft.db (written by an earlier version)
// keeps raft-boltdb, so an existing node restarts on its own log; to move
// a node to raft-wal, replace it with a new node (fresh data dir). Both
// fsync before StoreLogs returns: durability is the same.
func openLogStore(dataDir string, logger hclog.Logger) (logStore, string, error) {
	boltPath := filepath.Join(dataDir, "raft.db")
	walDir := filepath.Join(dataDir, "wal")
	_, boltErr := os.Stat(boltPath)
	_, walErr := os.Stat(walDir)
	if boltErr == nil && errors.Is(walErr, os.ErrNotExist) {
		s, err := raftboltdb.New(raftboltdb.Options{Path: boltPath})
		if err != nil {
			return nil, "", fmt.Errorf("cluster: open raft.db: %w", err)
		}
		return s, storeBolt, nil
	}
	if err := os.MkdirAll(walDir, 0o750); err != nil {
		return nil, "", fmt.Errorf("cluster: wal dir: %w", err)
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(walDir, wal.WithLogger(logger), wal.WithMetaStore(meta))
	if err != nil {
		_ = meta.Close()
		return nil, "", fmt.Errorf("cluster: open wal: %w", err)
	}
	return &walStore{WAL: w, meta: meta}, storeWAL, nil
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
