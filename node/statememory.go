package node

// StateMemory is what the on-disk state engine (cluster.StateEnginePebble)
// holds in memory whatever the ledger's size: its block cache and its
// memtables. pebble allocates both outside the Go heap when built with cgo
// (GOMEMLIMIT and the capacity guard's live heap do not see them), inside
// it without.
type StateMemory struct {
	CacheBytes    uint64
	MemTableBytes uint64
}

// stateMemTables is how many memtables pebble may hold at once: one
// filling and two waiting to be flushed (its MemTableStopWritesThreshold)
// before writes stall.
const stateMemTables = 3

// Reserved is the most the engine holds: the cache and every memtable.
func (s StateMemory) Reserved() uint64 { return s.CacheBytes + stateMemTables*s.MemTableBytes }

// Bounds of the automatic sizing (SizeStateMemory).
const (
	minStateCache    = 8 << 20
	maxStateCache    = 64 << 20
	minStateMemTable = 4 << 20
	maxStateMemTable = 16 << 20
)

// SizeStateMemory sizes the engine's memory for a node of the given
// memory capacity (0: unknown, pebble's sizes): the cache an eighth of it
// (8 to 64 MiB) unless cacheBytes sets it, a memtable a fortieth (4 to
// 16 MiB). A node in a small container then keeps room for its heap;
// from 640 MiB on the sizes are the engine's defaults.
func SizeStateMemory(capacity, cacheBytes uint64) StateMemory {
	if capacity == 0 {
		capacity = 1 << 40
	}
	s := StateMemory{
		CacheBytes:    min(max(capacity/8, minStateCache), maxStateCache),
		MemTableBytes: min(max(capacity/40, minStateMemTable), maxStateMemTable),
	}
	if cacheBytes > 0 {
		s.CacheBytes = cacheBytes
	}
	return s
}

// OffHeap reports whether the engine's memory is outside the Go heap
// (this build uses cgo): the heap's share of the capacity is then the
// capacity less Reserved.
func (StateMemory) OffHeap() bool { return cgoBuild }
