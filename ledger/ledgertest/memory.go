// Package ledgertest provides an in-memory Replicator for tests of code
// above the cluster: it applies commands straight to one fsm.Ledger.
package ledgertest

import (
	"context"
	"sync"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// Memory is a single-replica, in-process ledger.Replicator. Its clock can
// be moved by tests and its next proposals can be made to fail.
type Memory struct {
	mu       sync.Mutex
	l        *fsm.Ledger
	index    uint64
	now      time.Time
	failing  []error
	proposed int
	changed  chan struct{} // closed and replaced at every apply
}

// NewMemory returns an empty ledger whose clock starts at start.
func NewMemory(start time.Time) *Memory {
	return &Memory{l: fsm.New(), now: start, changed: make(chan struct{})}
}

// Advance moves the clock forward by d.
func (m *Memory) Advance(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
}

// Now returns the clock.
func (m *Memory) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// FailNext makes the next proposal or read return err instead of applying.
// Errors queue up, one per call.
func (m *Memory) FailNext(err error) {
	m.mu.Lock()
	m.failing = append(m.failing, err)
	m.mu.Unlock()
}

func (m *Memory) takeFailure() error {
	if len(m.failing) == 0 {
		return nil
	}
	err := m.failing[0]
	m.failing = m.failing[1:]
	return err
}

// Propose implements ledger.Replicator.
func (m *Memory) Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.takeFailure(); err != nil {
		return nil, err
	}
	data, err := fsm.Encode(m.now.UnixNano(), cmd)
	if err != nil {
		return nil, err
	}
	m.index++
	m.proposed++
	r := m.l.Apply(m.index, data)
	close(m.changed)
	m.changed = make(chan struct{})
	return r, nil
}

// Seed applies cmd like Propose but does not count it in Proposed: for
// fixtures a test does not want to see in its counts (e.g. the cluster's
// first signing key).
func (m *Memory) Seed(cmd fsm.Command) *fsm.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, err := fsm.Encode(m.now.UnixNano(), cmd)
	if err != nil {
		panic(err)
	}
	m.index++
	r := m.l.Apply(m.index, data)
	close(m.changed)
	m.changed = make(chan struct{})
	return r
}

// Changed implements ledger.ChangeNotifier.
func (m *Memory) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Read implements ledger.Replicator.
func (m *Memory) Read(ctx context.Context, _ ledger.Consistency, fn func(*fsm.Ledger)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.takeFailure(); err != nil {
		return err
	}
	fn(m.l)
	return nil
}

// Proposed counts proposals that reached the state machine.
func (m *Memory) Proposed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proposed
}

// Ledger returns a clone of the state for inspection.
func (m *Memory) Ledger() *fsm.Ledger {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l.Clone()
}
