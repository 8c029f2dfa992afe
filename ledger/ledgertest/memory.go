// Package ledgertest provides an in-memory Replicator for tests of code
// above the cluster: it applies commands straight to one fsm.Machine and
// reports the intents each one may have changed, as the cluster does.
package ledgertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// Memory is a single-replica, in-process ledger.Replicator. Its clock can
// be moved by tests and its next proposals can be made to fail.
type Memory struct {
	mu       sync.Mutex
	l        *fsm.Machine
	index    uint64
	now      time.Time
	failing  []error
	proposed int
	// sinks are the subscribers (SubscribeChanges); a pointer identifies one.
	sinks []*ledger.ChangeSink
}

// NewMemory returns an empty ledger whose clock starts at start.
func NewMemory(start time.Time) *Memory {
	return &Memory{l: fsm.New(), now: start}
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
	r, err := m.apply(cmd)
	if err != nil {
		return nil, err
	}
	m.proposed++
	return r, nil
}

// Seed applies cmd like Propose but does not count it in Proposed: for
// fixtures a test does not want to see in its counts (e.g. the cluster's
// first signing key).
func (m *Memory) Seed(cmd fsm.Command) *fsm.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.apply(cmd)
	if err != nil {
		panic(err)
	}
	return r
}

// apply encodes cmd as the cluster logs it, applies it at the next index
// and tells the subscribers which intents it may have changed. The caller
// holds m.mu.
func (m *Memory) apply(cmd fsm.Command) (*fsm.Result, error) {
	data, err := fsm.Encode(m.now.UnixNano(), cmd)
	if err != nil {
		return nil, err
	}
	m.index++
	r := m.l.Apply(m.index, data)
	keys, all := fsm.Touched(nil, cmd)
	for _, s := range m.sinks {
		if all {
			(*s).AllChanged()
		} else {
			(*s).KeysChanged(keys)
		}
	}
	return r, nil
}

// SubscribeChanges implements ledger.Replicator: after every proposal (and
// Seed) sink learns the intents the command may have changed (fsm.Touched).
func (m *Memory) SubscribeChanges(sink ledger.ChangeSink) (unsubscribe func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sub := &sink
	m.sinks = append(m.sinks, sub)
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, have := range m.sinks {
			if have == sub {
				m.sinks = append(m.sinks[:i:i], m.sinks[i+1:]...)
				return
			}
		}
	}
}

// WaitApplied implements ledger.Replicator: Memory applies every proposal
// before Propose returns, so there is nothing to wait for.
func (m *Memory) WaitApplied(ctx context.Context, _ uint64) error { return ctx.Err() }

// Read implements ledger.Replicator.
func (m *Memory) Read(ctx context.Context, _ ledger.Consistency, fn func(*fsm.Machine)) error {
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
func (m *Memory) Ledger() *fsm.Machine {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.l.Clone()
}

// NewService returns ledger.New(r, cfg), failing tb if it returns an
// error.
func NewService(tb testing.TB, r ledger.Replicator, cfg ledger.Config) *ledger.Service {
	tb.Helper()
	s, err := ledger.New(r, cfg)
	if err != nil {
		tb.Fatalf("ledger.New: %v", err)
	}
	return s
}
