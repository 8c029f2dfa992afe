package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/replication"
)

// stateMachine adapts the pure fsm.Machine to raft.BatchingFSM. Raft applies
// from one goroutine; readers share a read lock. It tracks the applied
// index itself because raft's AppliedIndex advances when a batch is handed
// to the FSM goroutine, before the FSM has applied it.
//
// After each batch, once the lock is released (the change is visible to
// reads), it tells its subscribers which intents the batch may have changed
// (fsm.Touched); after a Restore, that everything may have.
type stateMachine struct {
	mu sync.RWMutex
	l  *fsm.Machine
	// dir keeps the ledger on disk (nil: in memory). With it, raft starts
	// without restoring a snapshot and the entries up to applied at start
	// are already in the store (skipped).
	dir stateDir
	// marker is the file whose presence rebuilds the store at the next
	// start (statestore.go); "" in memory.
	marker string
	// checkpoints is where Snapshot writes a checkpoint of the store
	// (checkpoint.go); "" streams every snapshot (the memory engine).
	checkpoints   string
	checkpointSeq uint64
	log           *slog.Logger // nil: the memory engine, which logs nothing
	applied       uint64
	changed       chan struct{} // closed and replaced whenever applied moves

	// touched is the apply goroutine's buffer of the keys a batch may have
	// changed; raft never runs Apply, ApplyBatch or Restore concurrently.
	touched []fsm.Ref
	// sinks are the subscribers, replaced (never changed in place) under
	// sinkMu and read without a lock on the apply path.
	sinkMu sync.Mutex
	sinks  atomic.Pointer[[]*subscription]
}

// subscription is one subscriber; its address identifies it.
type subscription struct{ sink replication.ChangeSink }

// maxTouchedBuffer bounds the touched buffer kept between batches (a large
// sweep grows it once).
const maxTouchedBuffer = 4096

func newStateMachine() *stateMachine {
	return &stateMachine{l: fsm.New(), changed: make(chan struct{})}
}

// newStateMachineOn opens the ledger dir holds.
func newStateMachineOn(dir stateDir) (*stateMachine, error) {
	l, err := fsm.Open(dir.Current())
	if err != nil {
		return nil, fmt.Errorf("cluster: open the state store: %w", err)
	}
	return &stateMachine{l: l, dir: dir, applied: l.StoredIndex(), changed: make(chan struct{})}, nil
}

// storedIndex is the log index the state holds: entries up to it are
// never applied again.
func (s *stateMachine) storedIndex() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied
}

// reset replaces the stored state with an empty one.
func (s *stateMachine) reset() error {
	if s.dir == nil {
		return nil
	}
	staged, err := s.dir.Stage()
	if err != nil {
		return fmt.Errorf("cluster: new state store: %w", err)
	}
	l, err := fsm.Open(staged)
	if err != nil {
		_ = s.dir.Discard(staged)
		return fmt.Errorf("cluster: new state store: %w", err)
	}
	return s.install(l, staged, 0)
}

// install makes l, restored into staged, the state (staged nil: in
// memory), at log index applied.
func (s *stateMachine) install(l *fsm.Machine, staged fsm.Store, applied uint64) error {
	if staged != nil {
		l.Commit(applied)
		l.Sync() // the flush a promotion needs, outside the lock
	}
	s.mu.Lock()
	if staged != nil {
		if err := s.dir.Promote(staged); err != nil {
			if s.dir.Current() != staged {
				s.mu.Unlock()
				_ = s.dir.Discard(staged)
				return fmt.Errorf("cluster: install the restored state store: %w", err)
			}
			// Promoted, but CURRENT's rename may not be durable: this is
			// the store now (the old one is retired); a crash brings back
			// either, both consistent with the log.
			if s.log != nil {
				s.log.Warn("the restored state store is installed, but not durably", "err", err)
			}
		}
	}
	s.l = l
	s.applied = applied
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.notify(nil, true)
	return nil
}

// close closes the state store.
func (s *stateMachine) close() error {
	if s.dir == nil {
		return nil
	}
	return s.dir.Close()
}

// subscribe makes the state machine report its changes to sink until the
// returned func is called.
func (s *stateMachine) subscribe(sink replication.ChangeSink) (unsubscribe func()) {
	sub := &subscription{sink: sink}
	s.sinkMu.Lock()
	defer s.sinkMu.Unlock()
	var next []*subscription
	if cur := s.sinks.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, sub)
	s.sinks.Store(&next)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.sinkMu.Lock()
			defer s.sinkMu.Unlock()
			var next []*subscription
			for _, have := range *s.sinks.Load() {
				if have != sub {
					next = append(next, have)
				}
			}
			s.sinks.Store(&next)
		})
	}
}

// subscribers returns the current subscribers (nil when none).
func (s *stateMachine) subscribers() []*subscription {
	if p := s.sinks.Load(); p != nil {
		return *p
	}
	return nil
}

// notify tells the subscribers what a batch may have changed.
func (s *stateMachine) notify(keys []fsm.Ref, all bool) {
	for _, sub := range s.subscribers() {
		if all {
			sub.sink.AllChanged()
		} else if len(keys) > 0 {
			sub.sink.KeysChanged(keys)
		}
	}
}

// Apply implements raft.FSM.
func (s *stateMachine) Apply(l *raft.Log) interface{} {
	return s.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: one lock for a whole batch, then
// one notification of the intents it may have changed.
func (s *stateMachine) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	touched, all := s.touched[:0], false
	defer s.onStoreFailure()
	s.mu.Lock()
	// Looked at under the lock: a subscriber whose long-poll read the
	// state before this batch subscribed before that read, so before this.
	track := len(s.subscribers()) > 0
	for i, l := range logs {
		if l.Index <= s.applied {
			continue // in the store already: replayed after a restart
		}
		if l.Type == raft.LogCommand {
			if track {
				var a bool
				out[i], touched, a = s.l.ApplyTouched(l.Index, l.Data, touched)
				all = all || a
			} else {
				out[i] = s.l.Apply(l.Index, l.Data)
			}
		}
		if l.Index > s.applied {
			s.applied = l.Index
		}
	}
	s.l.Commit(s.applied)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	if track {
		s.notify(touched, all)
	}
	if cap(touched) <= maxTouchedBuffer {
		clear(touched) // drop the key strings of the batch
		s.touched = touched[:0]
	} else {
		s.touched = nil
	}
	return out
}

// read runs fn under the read lock.
func (s *stateMachine) read(fn func(*fsm.Machine)) {
	defer s.onStoreFailure()
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.l)
}

// onStoreFailure, deferred, lets a panic go on, after marking the store
// for a rebuild when the store failed (fsm.ErrStoreIO): the node stops
// and its next start rebuilds the store from the snapshots and the log.
func (s *stateMachine) onStoreFailure() {
	if p := recover(); p != nil {
		s.markRebuild(p)
		panic(p)
	}
}

// appliedIndex returns the applied index and a channel closed when it
// next changes.
func (s *stateMachine) appliedIndex() (uint64, <-chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied, s.changed
}

// Snapshot implements raft.FSM: an O(1) clone (copy-on-write in memory,
// a view of the store on disk), encoded later in Persist off the apply
// path. Raft calls it from the goroutine that applies, so nothing applies
// meanwhile. On disk the store is synced first: raft may drop the log
// behind the snapshot once it is taken, and a restart replays the log
// only after what the store holds.
func (s *stateMachine) Snapshot() (raft.FSMSnapshot, error) {
	defer s.onStoreFailure()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.dir == nil {
		return &snapshot{l: s.l.Clone()}, nil
	}
	s.l.Sync()
	if s.checkpoints == "" {
		return &snapshot{l: s.l.Clone()}, nil
	}
	s.checkpointSeq++
	path := filepath.Join(s.checkpoints, fmt.Sprintf("%d-%d", s.applied, s.checkpointSeq))
	if err := s.dir.Checkpoint(path); err != nil {
		_ = os.RemoveAll(path)
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &checkpointSnapshot{path: path, l: s.l.Clone(),
		ref: checkpointRef{Format: checkpointFormat, Version: 1, Index: s.applied, Intents: s.l.Len()}}, nil
}

// Restore implements raft.FSM.
//
// On disk the snapshot is restored into a fresh store, which replaces the
// current one only once the whole snapshot has been read and checked; on
// an error the current state is untouched.
func (s *stateMachine) Restore(rc io.ReadCloser) error {
	defer s.onStoreFailure()
	defer rc.Close()
	var staged fsm.Store
	var l *fsm.Machine
	var err error
	if s.dir != nil {
		if staged, err = s.dir.Stage(); err != nil {
			return fmt.Errorf("restore ledger: new state store: %w", err)
		}
		l, err = fsm.RestoreInto(staged, rc)
	} else {
		l, err = fsm.Restore(rc)
	}
	if err != nil {
		if staged != nil {
			_ = s.dir.Discard(staged)
		}
		return fmt.Errorf("restore ledger: %w", err)
	}
	applied := l.AppliedIndex()
	if ir, ok := rc.(*indexedReader); ok && ir.index > applied {
		// The state reflects the log up to the snapshot's Raft index, which
		// is past the last command in it when a restored backup or no-ops
		// follow that command (see snapshots.go).
		applied = ir.index
	}
	return s.install(l, staged, applied)
}

type snapshot struct{ l *fsm.Machine }

// Persist implements raft.FSMSnapshot.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.l.WriteSnapshot(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() { s.l.Release() }
