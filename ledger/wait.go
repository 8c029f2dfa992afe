package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// MaxWait bounds a long-poll.
const MaxWait = 60 * time.Second

// Wait reads the intent like Get, but unless its state changed after
// afterVersion (or it does not exist yet) it waits up to wait for such a
// change before answering with what it then finds: a long-poll for an
// approval or a result. afterVersion is the intent's version the caller
// last saw (Intent.Version, the log index of its last write); the state
// changed after it when the intent appeared, or an audit event after it
// changed the state (fsm.AuditEvent.ChangesState: a grant, a report, a
// commit, a resolution, a decision, a lease expiry). A write that only
// adds to the audit trail (a refusal, a duplicate, a renewal, a note of
// refusals) raises the version but does not answer the poll: waiters on a
// held key are not woken by the storm of claims refused on it. The error
// is fsm.ErrNotFound when there is still no intent, at once when an
// intent the poll saw was purged.
//
// A long-poll that has to wait is woken only when its key changes (or the
// state is restored from a snapshot), and reads again then. It holds one of
// Limits.MaxWaiters slots on the node, of Limits.MaxWaitersPerKey on its
// key and, when ctx names its caller (WithWaitCaller), of
// Limits.MaxWaitersPerCaller for that caller while it waits; past any of
// them it is refused with ErrTooManyWaiters, but only after one read, so a poll already answered, or one this node must
// forward to the leader (a NotLeaderError), never is. After Close it answers
// at once with what it has.
func (s *Service) Wait(ctx context.Context, namespace, key string, afterVersion uint64, wait time.Duration, c Consistency) (*fsm.Intent, error) {
	if wait < 0 || wait > MaxWait {
		return nil, badField(ErrUnprocessable, "wait", "must be between 0 and %v", MaxWait)
	}
	ns, err := s.keyAndNamespace(namespace, key)
	if err != nil {
		return nil, err
	}
	// Register before the first read, and arm again before each later one:
	// a change applied after a read then always wakes this poll. A poll
	// that does not wait takes no slot.
	var w *waiter
	var changed <-chan struct{}
	var full error
	if wait > 0 {
		w, changed, full = s.waiters.add(ns, key, waitCaller(ctx))
		if w != nil {
			defer s.waiters.remove(w)
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	saw := false
	for {
		in, err := s.Get(ctx, ns, key, c)
		if err != nil && !errors.Is(err, fsm.ErrNotFound) {
			return nil, err
		}
		if in != nil && stateChangedAfter(in, afterVersion) {
			return in, nil
		}
		if in == nil && saw {
			return nil, err // purged while the poll waited
		}
		saw = saw || in != nil
		if full != nil {
			return nil, full
		}
		select {
		case <-changed:
			changed = s.waiters.arm(w)
		case <-s.waiters.done:
			return in, err
		case <-timer.C:
			return in, err
		case <-ctx.Done():
			return in, err
		}
	}
}

// Close makes every long-poll (Wait) answer at once with what it has read,
// and later ones answer without waiting, so that a node shutting down need
// not wait out a poll of up to MaxWait. It also stops following the
// replicator's changes. Call it when the node starts shutting down, before
// draining HTTP requests. It may be called more than once.
func (s *Service) Close() {
	s.waiters.close()
	if s.local != nil {
		s.local.close()
	}
	s.refusals.close()
	s.closeOnce.Do(func() {
		if s.unsubscribe != nil {
			s.unsubscribe()
		}
	})
}

// Waiting returns the number of long-polls waiting on this node.
func (s *Service) Waiting() int { return s.waiters.len() }

// stateChangedAfter reports whether in's state changed after version v:
// its version is above v and the latest state-changing event of its
// trail is too. A NoteRefusals event never pushes such an event out of the
// trail, and every other write drops the oldest events first, so the
// latest one kept is the latest one made; a trail that kept none (an old
// storm pushed them all out) counts as changed, so the poll answers as it
// did before state changes were told apart.
func stateChangedAfter(in *fsm.Intent, v uint64) bool {
	if in.Version <= v {
		return false
	}
	for i := len(in.Audit) - 1; i >= 0; i-- {
		if e := in.Audit[i]; e.ChangesState() {
			return e.Index > v
		}
	}
	return true
}
