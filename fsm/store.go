package fsm

import (
	"bytes"
	"sync"

	"github.com/google/btree"
)

// Store is the ordered key-value store a Machine keeps what grows with the
// ledger in: the records, the lease and purge indexes, the audit logs and
// the few values that describe them (DESIGN.md, "The state machine on
// disk"). The Machine is its only writer; keys and values are the
// Machine's business (storekeys.go).
//
// Writes since the last Commit are visible to Get and Scan at once (an
// apply batch reads its own writes) and become one atomic unit at Commit:
// a store that is reopened after a crash holds the state as of some
// Commit, never half of one. Commit need not be durable; Sync is.
//
// A store cannot answer an I/O error as a refusal (another replica would
// not see it), so an implementation panics with an error wrapping
// ErrStoreIO: the node stops and replays the entry from the Raft log.
//
// Get, Scan and View may run concurrently with each other; Set, Delete
// and Commit run alone (the Machine's caller serialises them against every
// read, as it does today).
type Store interface {
	// Get returns the value at key, or false. The value is the caller's.
	Get(key []byte) ([]byte, bool)
	// Set stores value at key; the store keeps copies of both.
	Set(key, value []byte)
	// Delete removes key (a missing key is no error).
	Delete(key []byte)
	// Scan calls fn for every key in [lo, hi) in byte order until fn
	// returns false (a nil hi: no upper bound). key and value are valid
	// only during the call.
	Scan(lo, hi []byte, fn func(key, value []byte) bool)
	// Commit makes the writes since the last Commit one atomic unit.
	Commit()
	// Sync makes everything committed durable.
	Sync()
	// View returns a read-only, consistent view of what is committed; the
	// store goes on changing beneath it. Release it when done.
	View() StoreView
}

// StoreView is a read-only view of a Store at one Commit.
type StoreView interface {
	Get(key []byte) ([]byte, bool)
	Scan(lo, hi []byte, fn func(key, value []byte) bool)
	// Release frees what the view holds; it may be called more than once.
	Release()
}

// ErrStoreIO marks a store's I/O failure in a panic (see Store).
var ErrStoreIO = errStoreIO{}

type errStoreIO struct{}

func (errStoreIO) Error() string { return "fsm: state store I/O failed" }

// MemoryStore is a Store in memory: a B-tree of byte keys, copy-on-write
// so a View costs O(1). It is what New uses, and the reference the
// on-disk store is tested against.
type MemoryStore struct {
	mu sync.Mutex // serialises View (a B-tree Clone writes bookkeeping)
	t  *btree.BTreeG[kv]
}

type kv struct{ k, v []byte }

func lessKV(a, b kv) bool { return bytes.Compare(a.k, b.k) < 0 }

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{t: btree.NewG(btreeDegree, lessKV)}
}

// Get implements Store.
func (s *MemoryStore) Get(key []byte) ([]byte, bool) { return getKV(s.t, key) }

func getKV(t *btree.BTreeG[kv], key []byte) ([]byte, bool) {
	e, ok := t.Get(kv{k: key})
	return e.v, ok
}

// Set implements Store.
func (s *MemoryStore) Set(key, value []byte) {
	s.t.ReplaceOrInsert(kv{k: bytes.Clone(key), v: bytes.Clone(value)})
}

// Delete implements Store.
func (s *MemoryStore) Delete(key []byte) { s.t.Delete(kv{k: key}) }

// Scan implements Store.
func (s *MemoryStore) Scan(lo, hi []byte, fn func(key, value []byte) bool) { scanKV(s.t, lo, hi, fn) }

func scanKV(t *btree.BTreeG[kv], lo, hi []byte, fn func(key, value []byte) bool) {
	if hi == nil {
		t.AscendGreaterOrEqual(kv{k: lo}, func(e kv) bool { return fn(e.k, e.v) })
		return
	}
	t.AscendRange(kv{k: lo}, kv{k: hi}, func(e kv) bool { return fn(e.k, e.v) })
}

// Commit implements Store: writes are in place already.
func (s *MemoryStore) Commit() {}

// Sync implements Store: memory is as durable as it gets.
func (s *MemoryStore) Sync() {}

// View implements Store.
func (s *MemoryStore) View() StoreView {
	s.mu.Lock()
	defer s.mu.Unlock()
	return memoryView{s.t.Clone()}
}

// Fork returns an independent store holding what s holds, in O(1)
// (copy-on-write): a Clone of a ledger in memory can go on applying.
func (s *MemoryStore) Fork() *MemoryStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &MemoryStore{t: s.t.Clone()}
}

type memoryView struct{ t *btree.BTreeG[kv] }

func (v memoryView) Get(key []byte) ([]byte, bool) { return getKV(v.t, key) }
func (v memoryView) Scan(lo, hi []byte, fn func(key, value []byte) bool) {
	scanKV(v.t, lo, hi, fn)
}
func (memoryView) Release() {}
