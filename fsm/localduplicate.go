package fsm

import (
	"fmt"
	"strings"
)

// NoteDuplicate records a duplicate claim that a node answered from its own
// copy of the ledger (see Ledger.LocalDuplicate) without proposing the
// claim: the answer is given, the note only keeps the key's audit trail
// complete. Re-sending the claim instead would be unsafe: had the record
// been purged meanwhile, the claim would become a fresh grant that nobody
// runs.
//
// Applying it records the duplicate (Duplicates+1 and an audit event) only
// while the record is still executed or committed with the fingerprint the
// answer saw; otherwise the namespace's audit log alone gets the event, as
// for a claim with no record. It changes nothing else. Note names the
// answer uniquely: a retried proposal of the same note records it once
// while the event is in the key's trail.
type NoteDuplicate struct {
	Header
	Namespace   string
	Key         string
	Owner       string
	Fingerprint string
	// Node is the node that answered and Note the answer's id there.
	Node string
	Note string
	// AnsweredAt is when the node answered, by its own clock (Unix
	// nanoseconds): shown in the event's reason, never used to decide.
	AnsweredAt int64
}

// Type implements Command.
func (*NoteDuplicate) Type() CommandType { return TypeNoteDuplicate }

func (a *applier) noteDuplicate(c *NoteDuplicate) *Result {
	if c.Namespace == "" || c.Key == "" || c.Fingerprint == "" || c.Node == "" || c.Note == "" {
		return &Result{Status: StatusMalformed, Detail: "a duplicate note needs a namespace, key, fingerprint, node and note"}
	}
	ev := AuditEvent{Op: "claim", Status: StatusDuplicate, Owner: c.Owner, Fingerprint: c.Fingerprint,
		Reason: fmt.Sprintf("answered by node %s from its own state at %d (note %s)", c.Node, c.AnsweredAt, c.Note)}
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil || w.Fingerprint != c.Fingerprint || (w.State != StateExecuted && w.State != StateCommitted) {
		// The record the answer saw is gone (purged, and maybe claimed
		// again since): the namespace's audit log keeps the event.
		ev.Index, ev.At = a.index, a.now
		ev.Reason += "; the record has moved on since"
		a.l.appendChain(c.Namespace, c.Key, ev)
		if w != nil {
			return a.unchanged(orig, w, StatusOK)
		}
		return &Result{Status: StatusOK}
	}
	for i := len(w.Audit) - 1; i >= 0; i-- {
		if e := w.Audit[i]; e.Op == ev.Op && e.Status == ev.Status && e.Reason == ev.Reason {
			return a.unchanged(orig, w, StatusOK) // this note, again
		}
	}
	w.Duplicates++
	a.event(w, ev)
	a.save(orig, w)
	return &Result{Status: StatusOK, Intent: w}
}

// LocalDuplicate answers the claim c from this copy of the ledger alone
// when the answer cannot be wrong, and reports whether it could: the key
// is executed or committed with c's fingerprint, c's policy checks pass,
// and the record's dedupe window ends after now+margin. now is the
// answering node's clock (Unix nanoseconds); the ledger's own time (the
// last leader stamp applied) is used when it is later.
//
// Why that is safe: the leader purges a record only once its window has
// passed by the leader's clock, and never grants an executed or committed
// key again before that purge, so while the window runs the leader's
// answer to c is this duplicate too. A copy that lags only misses records
// (it cannot hold one the leader has not), and the margin covers how far
// the leader's clock may run ahead of now. The answer writes nothing: the
// caller proposes a NoteDuplicate for the audit trail.
func (l *Ledger) LocalDuplicate(c *Claim, now, margin int64) (*Intent, bool) {
	r := l.get(c.Namespace, c.Key)
	if r == nil || c.Fingerprint == "" || r.fingerprint() != c.Fingerprint {
		return nil, false
	}
	if st := r.state.State(); st != StateExecuted && st != StateCommitted {
		return nil, false
	}
	now = max(now, l.now)
	if margin < 0 || now > MaxSnapshotTime || now+margin >= r.purgeAt() {
		return nil, false
	}
	pol, err := l.policyFor(c.Policy, c.Tool)
	if err != nil {
		return nil, false
	}
	if limit := l.effective(pol, func(p *Policy) int64 { return int64(p.MaxPayloadBytes) }, 0); limit > 0 && int64(len(c.Payload)) > limit {
		return nil, false
	}
	if c.LeaseMS == 0 && l.effective(pol, func(p *Policy) int64 { return p.LeaseMS }, c.DefaultLeaseMS) <= 0 {
		return nil, false
	}
	if c.Owner == "" || !windowOK(c.LeaseMS) || !windowOK(c.DefaultLeaseMS) || !windowOK(c.DedupeWindowMS) || !principalOK(c.Principal) ||
		strings.TrimSpace(c.Tool) == "" {
		return nil, false
	}
	return r.intent(), true
}
