package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// PutPolicy validates p and proposes it. expectVersion, when not zero,
// makes it a compare-and-set on the stored version.
func (s *Service) PutPolicy(ctx context.Context, p fsm.Policy, expectVersion uint64, actor string) (*fsm.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, badField(ErrUnprocessable, "policy", "%v", err)
	}
	if err := s.limits.name("actor", actor, false); err != nil {
		return nil, err
	}
	p.Version = 0
	return s.propose(ctx, &fsm.PutPolicy{Policy: p, ExpectVersion: expectVersion, Actor: actor})
}

// DeletePolicy proposes removing the named policy.
func (s *Service) DeletePolicy(ctx context.Context, name, actor string) (*fsm.Result, error) {
	if err := s.limits.name("policy", name, true); err != nil {
		return nil, err
	}
	if name == fsm.DefaultPolicyName {
		return nil, badField(ErrUnprocessable, "policy", "the default policy cannot be deleted")
	}
	return s.propose(ctx, &fsm.DeletePolicy{Name: name, Actor: actor})
}

// Policies reads every policy, the default first, then in matching order.
func (s *Service) Policies(ctx context.Context, c Consistency) ([]*fsm.Policy, error) {
	var out []*fsm.Policy
	err := s.r.Read(ctx, c, func(l *fsm.Ledger) { out = l.Policies() })
	return out, err
}

// Policy reads one policy; fsm.ErrUnknownPolicy when there is none.
func (s *Service) Policy(ctx context.Context, name string, c Consistency) (*fsm.Policy, error) {
	if err := s.limits.name("policy", name, true); err != nil {
		return nil, err
	}
	var p *fsm.Policy
	if err := s.r.Read(ctx, c, func(l *fsm.Ledger) { p = l.Policy(name) }); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w %q", fsm.ErrUnknownPolicy, name)
	}
	return p, nil
}

// SetSettings validates and proposes cluster-wide settings.
func (s *Service) SetSettings(ctx context.Context, st fsm.Settings, actor string) (*fsm.Result, error) {
	if err := st.Validate(); err != nil {
		return nil, badField(ErrUnprocessable, "settings", "%v", err)
	}
	return s.propose(ctx, &fsm.SetSettings{Settings: st, Actor: actor})
}

// Settings reads the cluster-wide settings.
func (s *Service) Settings(ctx context.Context, c Consistency) (fsm.Settings, error) {
	var st fsm.Settings
	err := s.r.Read(ctx, c, func(l *fsm.Ledger) { st = l.Settings() })
	return st, err
}

// AuditPage is a page of a namespace's hash-chained audit log.
type AuditPage struct {
	Head   fsm.ChainHead
	Events []*fsm.ChainEvent
	// Next is the seq to ask for next; 0 when no more events follow.
	Next uint64
}

// MaxAuditPage bounds one page of the audit log.
const MaxAuditPage = 10_000

// Audit reads up to limit events of the namespace's audit log from seq
// since on.
func (s *Service) Audit(ctx context.Context, namespace string, since uint64, limit int, c Consistency) (*AuditPage, error) {
	ns := namespace
	if ns != fsm.SystemNamespace {
		var err error
		if ns, err = s.namespace(namespace); err != nil {
			return nil, err
		}
	}
	switch {
	case limit < 0:
		return nil, badField(ErrUnprocessable, "limit", "must not be negative")
	case limit == 0:
		limit = 100
	case limit > MaxAuditPage:
		limit = MaxAuditPage
	}
	page := &AuditPage{}
	err := s.r.Read(ctx, c, func(l *fsm.Ledger) {
		page.Head = l.AuditHead(ns)
		page.Events, page.Next = l.AuditEvents(ns, since, limit)
	})
	return page, err
}

// MaxWait bounds a long-poll.
const MaxWait = 60 * time.Second

// Wait reads the intent like Get, but when its version is not above
// afterVersion (or it does not exist yet) it waits up to wait for a change
// before answering with what it then finds: a long-poll for an approval or
// a result. The error is fsm.ErrNotFound when there is still no intent.
//
// A long-poll that has to wait is woken only when its key changes (or the
// state is restored from a snapshot), and reads again then. It holds one of
// Limits.MaxWaiters slots on the node and of Limits.MaxWaitersPerKey on its
// key while it waits; past either it is refused with ErrTooManyWaiters, but
// only after one read, so a poll already answered, or one this node must
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
		w, changed, full = s.waiters.add(ns, key)
		if w != nil {
			defer s.waiters.remove(w)
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		in, err := s.Get(ctx, ns, key, c)
		if err != nil && !errors.Is(err, fsm.ErrNotFound) {
			return nil, err
		}
		if in != nil && in.Version > afterVersion {
			return in, nil
		}
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
