package cluster

import (
	"fmt"
	"io"
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
	mu      sync.RWMutex
	l       *fsm.Machine
	applied uint64
	changed chan struct{} // closed and replaced whenever applied moves

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
	s.mu.Lock()
	// Looked at under the lock: a subscriber whose long-poll read the
	// state before this batch subscribed before that read, so before this.
	track := len(s.subscribers()) > 0
	for i, l := range logs {
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
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.l)
}

// appliedIndex returns the applied index and a channel closed when it
// next changes.
func (s *stateMachine) appliedIndex() (uint64, <-chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied, s.changed
}

// Snapshot implements raft.FSM: an O(1) copy-on-write clone, encoded later
// in Persist off the apply path.
func (s *stateMachine) Snapshot() (raft.FSMSnapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return &snapshot{l: s.l.Clone()}, nil
}

// Restore implements raft.FSM.
func (s *stateMachine) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	l, err := fsm.Restore(rc)
	if err != nil {
		return fmt.Errorf("restore ledger: %w", err)
	}
	s.mu.Lock()
	s.l = l
	s.applied = l.AppliedIndex()
	if ir, ok := rc.(*indexedReader); ok && ir.index > s.applied {
		// The state reflects the log up to the snapshot's Raft index, which
		// is past the last command in it when a restored backup or no-ops
		// follow that command (see snapshots.go).
		s.applied = ir.index
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.notify(nil, true)
	return nil
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
