package storeeval

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	bolt "go.etcd.io/bbolt"
)

// Key spaces. Every key starts with its table's byte; bbolt keeps a bucket
// per table and the rest of the key in it.
const (
	tableRecord = 'r' // r ns 0 key → record frame
	tableLease  = 'l' // l deadline(8, big-endian) ns 0 key → nothing: declared by lease deadline
	tablePurge  = 'p' // p purgeAt(8) ns 0 key → nothing: finished by purge time
	tableChain  = 'c' // c ns 0 seq(8) → hash and body of a namespace audit event
	tableMeta   = 'm' // m "applied" → applied index, time, chain head
)

var tables = []byte{tableRecord, tableLease, tablePurge, tableChain, tableMeta}

// Txn is what one apply batch sees: its own writes, then the store.
type Txn interface {
	Get(key []byte) ([]byte, bool, error)
	Set(key, value []byte) error
	Delete(key []byte) error
	// Due returns up to max keys of table t (without the table byte: the
	// 8-byte time, then the namespace and key) with a time in
	// [from, until), in time order.
	Due(t byte, from, until int64, max int) ([][]byte, error)
}

// Store is a candidate engine.
type Store interface {
	// Apply runs fn in one batch, committed without an fsync.
	Apply(fn func(Txn) error) error
	// Get reads a key outside any batch (a read on the API path).
	Get(key []byte) ([]byte, bool, error)
	// Checkpoint writes a consistent copy to path: what a raft snapshot
	// sink would receive. It returns the bytes written.
	Checkpoint(path string) (int64, error)
	// Close closes the store cleanly (a restart's first half).
	Close() error
}

// Engine names.
const (
	EnginePebbleWAL   = "pebble"       // WAL on, no fsync per batch
	EnginePebbleNoWAL = "pebble-nowal" // WAL off: flushed memtables only
	EngineBolt        = "bbolt"        // NoSync, NoFreelistSync, map freelist
	EngineMemory      = "fsm-memory"   // today's fsm.Machine, through its API
)

// Engines lists the storage candidates (EngineMemory is run apart).
var Engines = []string{EnginePebbleWAL, EnginePebbleNoWAL, EngineBolt}

// CacheBytes bounds pebble's block cache.
const CacheBytes = 64 << 20

// Open opens (or creates) engine's store in dir.
func Open(engine, dir string) (Store, error) {
	switch engine {
	case EnginePebbleWAL, EnginePebbleNoWAL:
		return openPebble(dir, engine == EnginePebbleNoWAL)
	case EngineBolt:
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		return openBolt(filepath.Join(dir, "state.db"))
	}
	return nil, fmt.Errorf("unknown engine %q", engine)
}

// ---- pebble ----

type pebbleStore struct {
	db    *pebble.DB
	cache interface{ Unref() }
	noWAL bool
}

func openPebble(dir string, noWAL bool) (*pebbleStore, error) {
	cache := pebble.NewCache(CacheBytes)
	opts := &pebble.Options{
		Cache:        cache,
		DisableWAL:   noWAL,
		MemTableSize: 16 << 20,
		Logger:       quietLogger{},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("pebble open: %w", err)
	}
	return &pebbleStore{db: db, cache: cache, noWAL: noWAL}, nil
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

type pebbleTxn struct {
	b *pebble.Batch
}

func (t pebbleTxn) Get(key []byte) ([]byte, bool, error) {
	v, c, err := t.b.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := bytes.Clone(v)
	return out, true, c.Close()
}

func (t pebbleTxn) Set(key, value []byte) error { return t.b.Set(key, value, nil) }
func (t pebbleTxn) Delete(key []byte) error     { return t.b.Delete(key, nil) }

func (t pebbleTxn) Due(table byte, from, until int64, max int) ([][]byte, error) {
	lower := binary.BigEndian.AppendUint64([]byte{table}, uint64(from))
	upper := binary.BigEndian.AppendUint64([]byte{table}, uint64(until))
	it, err := t.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for ok := it.First(); ok && len(out) < max; ok = it.Next() {
		out = append(out, bytes.Clone(it.Key()[1:]))
	}
	return out, it.Close()
}

func (s *pebbleStore) Apply(fn func(Txn) error) error {
	b := s.db.NewIndexedBatch()
	defer b.Close()
	if err := fn(pebbleTxn{b}); err != nil {
		return err
	}
	return b.Commit(pebble.NoSync)
}

func (s *pebbleStore) Get(key []byte) ([]byte, bool, error) {
	v, c, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := bytes.Clone(v)
	return out, true, c.Close()
}

// Checkpoint streams every key and value of a pebble snapshot to path
// (uvarint lengths), as a raft snapshot sink would receive them, and
// fsyncs it.
func (s *pebbleStore) Checkpoint(path string) (int64, error) {
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(nil)
	if err != nil {
		return 0, err
	}
	return streamTo(path, func(emit func(k, v []byte) error) error {
		for ok := it.First(); ok; ok = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			if err := emit(it.Key(), v); err != nil {
				return err
			}
		}
		return it.Close()
	})
}

// LinkCheckpoint is pebble's own Checkpoint: hard links of the sstables
// and a copy of the manifest (and WAL), into dir.
func (s *pebbleStore) LinkCheckpoint(dir string) error {
	return s.db.Checkpoint(dir, pebble.WithFlushedWAL())
}

func (s *pebbleStore) Close() error {
	if s.noWAL {
		// Without a WAL the memtables are lost unless flushed: a clean
		// shutdown flushes; a crash keeps the last flushed applied index.
		if err := s.db.Flush(); err != nil {
			return err
		}
	}
	err := s.db.Close()
	s.cache.Unref()
	return err
}

// ---- bbolt ----

type boltStore struct {
	db *bolt.DB
}

func openBolt(path string) (*boltStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		NoSync: true, NoFreelistSync: true, NoGrowSync: true, FreelistType: bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("bbolt open: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, t := range tables {
			if _, err := tx.CreateBucketIfNotExists([]byte{t}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &boltStore{db: db}, nil
}

type boltTxn struct{ tx *bolt.Tx }

func (t boltTxn) Get(key []byte) ([]byte, bool, error) {
	v := t.tx.Bucket(key[:1]).Get(key[1:])
	if v == nil {
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

func (t boltTxn) Set(key, value []byte) error {
	// bbolt keeps key and value until the transaction commits.
	return t.tx.Bucket(key[:1]).Put(bytes.Clone(key[1:]), bytes.Clone(value))
}

func (t boltTxn) Delete(key []byte) error { return t.tx.Bucket(key[:1]).Delete(key[1:]) }

func (t boltTxn) Due(table byte, from, until int64, max int) ([][]byte, error) {
	c := t.tx.Bucket([]byte{table}).Cursor()
	var out [][]byte
	for k, _ := c.Seek(binary.BigEndian.AppendUint64(nil, uint64(from))); k != nil && len(out) < max; k, _ = c.Next() {
		if int64(binary.BigEndian.Uint64(k[:8])) >= until {
			break
		}
		out = append(out, bytes.Clone(k))
	}
	return out, nil
}

func (s *boltStore) Apply(fn func(Txn) error) error {
	return s.db.Update(func(tx *bolt.Tx) error { return fn(boltTxn{tx}) })
}

func (s *boltStore) Get(key []byte) ([]byte, bool, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(key[:1]).Get(key[1:]); v != nil {
			out = bytes.Clone(v)
		}
		return nil
	})
	return out, out != nil, err
}

// Checkpoint writes the file as of one read transaction (tx.WriteTo).
func (s *boltStore) Checkpoint(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	err = s.db.View(func(tx *bolt.Tx) error {
		n, err = tx.WriteTo(f)
		return err
	})
	if err != nil {
		return n, err
	}
	return n, f.Sync()
}

func (s *boltStore) Close() error { return s.db.Close() }

// streamTo writes what produce emits to path, each key and value with a
// uvarint length, and fsyncs it.
func streamTo(path string, produce func(emit func(k, v []byte) error) error) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cw := &countWriter{w: f}
	bw := bufio.NewWriterSize(cw, 1<<20)
	var lb [2 * binary.MaxVarintLen64]byte
	err = produce(func(k, v []byte) error {
		n := binary.PutUvarint(lb[:], uint64(len(k)))
		n += binary.PutUvarint(lb[n:], uint64(len(v)))
		if _, err := bw.Write(lb[:n]); err != nil {
			return err
		}
		if _, err := bw.Write(k); err != nil {
			return err
		}
		_, err := bw.Write(v)
		return err
	})
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}
