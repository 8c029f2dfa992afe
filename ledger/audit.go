package ledger

import (
	"context"

	"github.com/intentledger/intentd/fsm"
)

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
	err := s.r.Read(ctx, c, func(l *fsm.Machine) {
		page.Head = l.AuditHead(ns)
		page.Events, page.Next = l.AuditEvents(ns, since, limit)
	})
	return page, err
}
