package ledger

import (
	"context"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// namespaceWide is the key a namespace-wide long-poll registers under:
// intent keys are never empty, so it names no intent.
const namespaceWide = ""

// WaitAudit reads a page of the namespace's audit log like Audit, but when
// the log holds no event at seq since or later yet it waits up to wait for
// one before answering with what it then finds: a long-poll for whatever
// happens next in the namespace (a new pending_approval intent, an
// approval, an intent gone in_doubt), which the web console's queues
// follow without polling.
//
// Every audit event of a namespace comes from a command that changes one
// of its intents, so the poll wakes when any intent of the namespace
// changes (or the state is restored from a snapshot) and reads again. It
// holds one of Limits.MaxWaiters slots on the node, one of
// Limits.MaxWaitersPerKey on the namespace and, when ctx names its caller
// (WithWaitCaller), one of the caller's Limits.MaxWaitersPerCaller, shared
// with its Wait long-polls, while it waits; past any of them it is refused
// with ErrTooManyWaiters, after one read, as Wait is. After Close it
// answers at once.
func (s *Service) WaitAudit(ctx context.Context, namespace string, since uint64, limit int, wait time.Duration, c Consistency) (*AuditPage, error) {
	if wait < 0 || wait > MaxWait {
		return nil, badField(ErrUnprocessable, "wait", "must be between 0 and %v", MaxWait)
	}
	ns := namespace
	if ns != fsm.SystemNamespace {
		var err error
		if ns, err = s.namespace(namespace); err != nil {
			return nil, err
		}
	}
	var w *waiter
	var changed <-chan struct{}
	var full error
	if wait > 0 {
		w, changed, full = s.waiters.add(ns, namespaceWide, waitCaller(ctx))
		if w != nil {
			defer s.waiters.remove(w)
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		page, err := s.Audit(ctx, ns, since, limit, c)
		switch {
		case err != nil:
			return nil, err
		case page.Head.LastSeq >= since:
			return page, nil
		case full != nil:
			return nil, full
		}
		select {
		case <-changed:
			changed = s.waiters.arm(w)
		case <-s.waiters.done:
			return page, nil
		case <-timer.C:
			return page, nil
		case <-ctx.Done():
			return page, nil
		}
	}
}
