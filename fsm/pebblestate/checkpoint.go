package pebblestate

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Checkpoint writes a consistent copy of what the store has flushed to
// destDir, which must not exist: hard links of its sstables and a copy of
// its manifest (pebble.DB.Checkpoint), so it costs time and disk in the
// number of files, not in their bytes, until compaction replaces the
// files it links. With the WAL off, writes still in the memtables are not
// in it: Sync first, with nothing committed in between, for a checkpoint
// of the last Commit.
func (s *Store) Checkpoint(destDir string) error {
	s.checkOpen()
	if s.batch != nil {
		panic("pebblestate: Checkpoint with uncommitted writes")
	}
	if err := s.db.Checkpoint(destDir); err != nil {
		return fmt.Errorf("pebblestate: checkpoint to %s: %w", destDir, err)
	}
	return nil
}

// ReadOnly is a checkpoint (or a closed generation) opened for reading: an
// fsm.Store whose writes panic. Close it when done.
type ReadOnly struct {
	*Store
	cache *pebble.Cache
}

// OpenReadOnly opens the database in dir for reading, with its own small
// cache (what streaming it once needs). Two may not be open on one
// directory at a time.
func OpenReadOnly(dir string, log *slog.Logger) (*ReadOnly, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cache := pebble.NewCache(8 << 20)
	s := &Store{fs: vfs.Default, path: dir, log: log, bgErrs: make(chan error, 1)}
	opts := &pebble.Options{
		Cache:            cache,
		ReadOnly:         true,
		DisableWAL:       true,
		ErrorIfNotExists: true,
		Logger:           pebbleLogger{log.With("dir", dir)},
		EventListener:    &pebble.EventListener{BackgroundError: s.backgroundError},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("pebblestate: open %s read-only: %w", dir, err)
	}
	s.db = db
	return &ReadOnly{Store: s, cache: cache}, nil
}

// Set panics: the store is read-only.
func (r *ReadOnly) Set(key, value []byte) { panic("pebblestate: Set on a read-only store") }

// Delete panics: the store is read-only.
func (r *ReadOnly) Delete(key []byte) { panic("pebblestate: Delete on a read-only store") }

// Commit does nothing: there is never anything to commit.
func (r *ReadOnly) Commit() {}

// Sync does nothing: nothing is written.
func (r *ReadOnly) Sync() {}

// Close closes the database and frees its cache.
func (r *ReadOnly) Close() error {
	r.closed.Store(true)
	err := r.db.Close()
	r.cache.Unref()
	return err
}
