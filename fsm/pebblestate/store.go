package pebblestate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/intentledger/intentd/fsm"
)

// Store is an fsm.Store in one pebble database (one generation of a Dir)
// with the WAL off. Writes since the last Commit go into one indexed batch
// that Get and Scan read through; Commit applies it without an fsync, Sync
// flushes the memtables.
//
// As fsm.Store says, Get, Scan and View may run concurrently with each
// other; Set, Delete, Commit and Sync run alone. Any error of pebble's
// panics with an error wrapping fsm.ErrStoreIO and the cause, and so does
// any use of a store that is closed.
type Store struct {
	db   *pebble.DB
	fs   vfs.FS
	path string // the generation's directory
	gen  uint64
	dir  *Dir
	log  *slog.Logger

	batch *pebble.Batch // writes since the last Commit; nil when there are none

	// bgErrs carries pebble's background errors to a waiting Sync.
	bgErrs chan error

	closed atomic.Bool // the database is closed (or closing)

	mu      sync.Mutex
	views   int  // views not yet released
	retired bool // close once views is 0
	remove  bool // and remove the directory
	closing bool // the close has begun
}

var _ fsm.Store = (*Store)(nil)

// ioPanic panics with err marked as fsm.ErrStoreIO.
func ioPanic(err error) {
	panic(fmt.Errorf("%w: %w", fsm.ErrStoreIO, err))
}

// errClosed is what an operation on a closed store or a released view
// panics with (wrapped in fsm.ErrStoreIO).
var errClosed = fmt.Errorf("pebblestate: %w", pebble.ErrClosed)

func (s *Store) checkOpen() {
	if s.closed.Load() {
		ioPanic(errClosed)
	}
}

// Get implements fsm.Store: it reads through the open batch, if any. The
// value returned is a copy.
func (s *Store) Get(key []byte) ([]byte, bool) {
	s.checkOpen()
	if s.batch != nil {
		return get(s.batch.Get, key)
	}
	return get(s.db.Get, key)
}

// Set implements fsm.Store.
func (s *Store) Set(key, value []byte) {
	s.checkOpen()
	if err := s.writeBatch().Set(key, value, nil); err != nil {
		ioPanic(err)
	}
}

// Delete implements fsm.Store.
func (s *Store) Delete(key []byte) {
	s.checkOpen()
	if err := s.writeBatch().Delete(key, nil); err != nil {
		ioPanic(err)
	}
}

func (s *Store) writeBatch() *pebble.Batch {
	if s.batch == nil {
		s.batch = s.db.NewIndexedBatch()
	}
	return s.batch
}

// Scan implements fsm.Store: it reads through the open batch, if any.
func (s *Store) Scan(lo, hi []byte, fn func(key, value []byte) bool) {
	s.checkOpen()
	if s.batch != nil {
		scan(s.batch.NewIter, lo, hi, fn)
		return
	}
	scan(s.db.NewIter, lo, hi, fn)
}

// Commit implements fsm.Store: the batch is applied atomically without an
// fsync (pebble.NoSync; the WAL is off in any case). A Commit with no
// writes since the last one does nothing.
func (s *Store) Commit() {
	s.checkOpen()
	b := s.batch
	if b == nil {
		return
	}
	s.batch = nil
	err := b.Commit(pebble.NoSync)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		ioPanic(err)
	}
}

// Sync implements fsm.Store: with the WAL off, everything committed becomes
// durable when the memtables are flushed to sstables (db.Flush). Writes not
// yet committed stay in the batch. Sync panics (fsm.ErrStoreIO) when pebble
// reports a background error while it waits: pebble retries a failed flush
// for ever, so waiting alone could hang on a failing disk.
func (s *Store) Sync() {
	s.checkOpen()
	if err := s.flush(); err != nil {
		ioPanic(err)
	}
}

func (s *Store) flush() error {
	for drained := false; !drained; { // errors from before this flush are not its
		select {
		case <-s.bgErrs:
		default:
			drained = true
		}
	}
	done, err := s.db.AsyncFlush()
	if err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	select {
	case <-done:
		return nil
	case err := <-s.bgErrs:
		return fmt.Errorf("flush: %w", err)
	}
}

// backgroundError is pebble's EventListener.BackgroundError: it logs err
// and hands it to a waiting Sync.
func (s *Store) backgroundError(err error) {
	s.log.Error("pebble background error", "dir", s.path, "err", err)
	select {
	case s.bgErrs <- err:
	default:
	}
}

// DiskUsage is the bytes the database's files take on disk
// (pebble.Metrics.DiskSpaceUsage): sstables, manifest and the rest. It is
// an engine statistic, never to be read inside apply (DESIGN.md).
func (s *Store) DiskUsage() uint64 {
	s.checkOpen()
	return s.db.Metrics().DiskSpaceUsage()
}

// View implements fsm.Store: a pebble snapshot of what is committed,
// O(1). Release it: an unreleased view pins the versions it sees against
// compaction, and a retired generation is closed and deleted only once its
// last view is released. View panics if writes are not yet committed (a
// view is of a Commit; the caller serialises View against the writer).
func (s *Store) View() fsm.StoreView {
	s.checkOpen()
	if s.batch != nil {
		panic("pebblestate: View with uncommitted writes")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		ioPanic(errClosed)
	}
	s.views++
	return &view{s: s, snap: s.db.NewSnapshot()}
}

// view is a StoreView over a pebble snapshot.
type view struct {
	s        *Store
	snap     *pebble.Snapshot
	released atomic.Bool
}

func (v *view) Get(key []byte) ([]byte, bool) {
	if v.released.Load() {
		ioPanic(errClosed)
	}
	return get(v.snap.Get, key)
}

func (v *view) Scan(lo, hi []byte, fn func(key, value []byte) bool) {
	if v.released.Load() {
		ioPanic(errClosed)
	}
	scan(v.snap.NewIter, lo, hi, fn)
}

// Release closes the snapshot; once a retired store's last view is
// released, the store is closed (and its directory removed). Errors are
// logged: Release has no caller to return them to, and what is left behind
// is removed by the next OpenDir.
func (v *view) Release() {
	if v.released.Swap(true) {
		return
	}
	s := v.s
	if err := v.snap.Close(); err != nil {
		s.log.Error("pebblestate: closing a view", "dir", s.path, "err", err)
	}
	s.mu.Lock()
	s.views--
	start := s.views == 0 && s.retired && !s.closing
	if start {
		s.closing = true
	}
	s.mu.Unlock()
	if start {
		if err := s.finish(); err != nil {
			s.log.Error("pebblestate: closing a retired generation", "dir", s.path, "err", err)
		}
	}
}

// retire closes the store once its views are released (now if there are
// none), and then removes its directory if remove is set. It drops
// writes not yet committed. The error is the close's if it happened now.
func (s *Store) retire(remove bool) error {
	if s.batch != nil {
		s.batch.Close()
		s.batch = nil
	}
	s.mu.Lock()
	s.retired = true
	s.remove = s.remove || remove
	start := s.views == 0 && !s.closing
	if start {
		s.closing = true
	}
	s.mu.Unlock()
	if !start {
		return nil
	}
	return s.finish()
}

// finish closes the database, removes its directory if asked to, and tells
// the Dir. It runs once, after closing is set.
func (s *Store) finish() error {
	s.closed.Store(true)
	err := s.db.Close()
	if err != nil {
		err = fmt.Errorf("close %s: %w", s.path, err)
	}
	if s.remove {
		if rerr := s.fs.RemoveAll(s.path); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", s.path, rerr))
		}
	}
	s.dir.storeClosed()
	return err
}

// get reads key with read (a DB's, batch's or snapshot's Get) and copies
// the value: pebble's is valid only until its closer is closed.
func get(read func([]byte) ([]byte, io.Closer, error), key []byte) ([]byte, bool) {
	v, c, err := read(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		ioPanic(err)
	}
	out := append(make([]byte, 0, len(v)), v...)
	if err := c.Close(); err != nil {
		ioPanic(err)
	}
	return out, true
}

// scan calls fn for the keys in [lo, hi) (nil hi: no upper bound) of an
// iterator from newIter, until fn returns false.
func scan(newIter func(*pebble.IterOptions) (*pebble.Iterator, error), lo, hi []byte, fn func(key, value []byte) bool) {
	if hi != nil && bytes.Compare(lo, hi) >= 0 {
		return
	}
	if len(lo) == 0 {
		lo = nil // the same bound; pebble's invariant checks trip on an empty one
	}
	it, err := newIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		ioPanic(err)
	}
	closed := false
	defer func() {
		if !closed { // fn or a read panicked: free the iterator all the same
			it.Close()
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			ioPanic(err)
		}
		if !fn(it.Key(), v) {
			break
		}
	}
	closed = true
	if err := it.Close(); err != nil { // also any error that ended the loop
		ioPanic(err)
	}
}
