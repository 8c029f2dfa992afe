package cluster

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
)

// stateMachine adapts the pure fsm.Ledger to raft.BatchingFSM. Raft applies
// from one goroutine; readers share a read lock. It tracks the applied
// index itself because raft's AppliedIndex advances when a batch is handed
// to the FSM goroutine, before the FSM has applied it.
type stateMachine struct {
	mu      sync.RWMutex
	l       *fsm.Ledger
	applied uint64
	changed chan struct{} // closed and replaced whenever applied moves
}

func newStateMachine() *stateMachine {
	return &stateMachine{l: fsm.New(), changed: make(chan struct{})}
}

// Apply implements raft.FSM.
func (s *stateMachine) Apply(l *raft.Log) interface{} {
	return s.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch implements raft.BatchingFSM: one lock for a whole batch.
func (s *stateMachine) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range logs {
		if l.Type == raft.LogCommand {
			out[i] = s.l.Apply(l.Index, l.Data)
		}
		if l.Index > s.applied {
			s.applied = l.Index
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return out
}

// read runs fn under the read lock.
func (s *stateMachine) read(fn func(*fsm.Ledger)) {
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
	defer s.mu.Unlock()
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
	return nil
}

type snapshot struct{ l *fsm.Ledger }

// Persist implements raft.FSMSnapshot.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.l.WriteSnapshot(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}
