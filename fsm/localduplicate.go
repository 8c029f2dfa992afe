package fsm

import (
	"fmt"
	"strings"
)

// NoteDuplicates records duplicate claims that one node answered from its
// own copy of the ledger (see Machine.LocalDuplicate) without proposing
// them: the answers are given, the notes only keep the keys' audit trails
// complete. Re-sending the claims instead would be unsafe: had a record
// been purged meanwhile, its claim would become a fresh grant that nobody
// runs. A node sends its notes in batches, so a steady stream of local
// answers costs one log entry per replication round, not one per answer.
//
// Applying a note records the duplicate (Duplicates+1 and an audit event)
// only while the record is still executed or committed with the
// fingerprint the answer saw; otherwise the namespace's audit log alone
// gets the event, as for a claim with no record. It changes nothing else.
// A note's Note id names the answer uniquely: a retried proposal records
// it once while the event is among the key's last MaxAuditEvents.
type NoteDuplicates struct {
	Header
	// Node is the node that answered.
	Node  string
	Notes []DuplicateNote
}

// DuplicateNote is one duplicate answered locally.
type DuplicateNote struct {
	Namespace   string
	Key         string
	Owner       string
	Fingerprint string
	// FencingToken is the grant whose result the answer gave: a note
	// counts only for that grant, not for a later one of the same key
	// (purged, claimed and run again with the same payload).
	FencingToken uint64
	// Note is the answer's id at the node.
	Note string
	// AnsweredAt is when the node answered, by its own clock (Unix
	// nanoseconds): shown in the event's reason, never used to decide.
	AnsweredAt int64
}

// MaxDuplicateNotes bounds the notes of one NoteDuplicates.
const MaxDuplicateNotes = 1024

// Type implements Command.
func (*NoteDuplicates) Type() CommandType { return TypeNoteDuplicates }

func (a *applier) noteDuplicates(c *NoteDuplicates) *Result {
	if c.Node == "" || len(c.Notes) == 0 || len(c.Notes) > MaxDuplicateNotes {
		return &Result{Status: StatusMalformed, Detail: fmt.Sprintf("duplicate notes need a node and 1..%d notes", MaxDuplicateNotes)}
	}
	for _, n := range c.Notes {
		if n.Namespace == "" || n.Key == "" || n.Fingerprint == "" || n.Note == "" {
			return &Result{Status: StatusMalformed, Detail: "a duplicate note needs a namespace, key, fingerprint and note id"}
		}
	}
	r := &Result{Status: StatusOK}
	for _, n := range c.Notes {
		if a.noteDuplicate(c.Node, n) {
			r.Count++
		}
	}
	return r
}

// noteDuplicate applies one note and reports whether it was recorded on
// its intent.
func (a *applier) noteDuplicate(node string, n DuplicateNote) bool {
	ev := AuditEvent{Op: "claim", Status: StatusDuplicate, Owner: n.Owner, Fingerprint: n.Fingerprint,
		Reason: fmt.Sprintf("answered by node %s from its own state at %d (note %s)", node, n.AnsweredAt, n.Note)}
	orig, w := a.begin(n.Namespace, n.Key)
	if w == nil || w.Fingerprint != n.Fingerprint || w.FencingToken != n.FencingToken ||
		(w.State != StateExecuted && w.State != StateCommitted) {
		// The record the answer saw is gone (purged, and maybe claimed
		// again since): the namespace's audit log keeps the event.
		ev.Index, ev.At = a.index, a.now
		ev.Reason += "; the record has moved on since"
		a.l.appendChain(n.Namespace, n.Key, ev)
		if w != nil {
			a.unchanged(orig, w, StatusOK)
		}
		return false
	}
	for i := len(w.Audit) - 1; i >= 0; i-- {
		if e := w.Audit[i]; e.Op == ev.Op && e.Status == ev.Status && e.Reason == ev.Reason {
			a.unchanged(orig, w, StatusOK) // this note, again
			return false
		}
	}
	w.Duplicates++
	a.event(w, ev)
	a.save(orig, w)
	return true
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
// caller proposes a NoteDuplicates note for the audit trail.
func (l *Machine) LocalDuplicate(c *Claim, now, margin int64) (*Intent, bool) {
	r := l.get(c.Namespace, c.Key)
	if r == nil || c.Fingerprint == "" || r.fingerprint() != c.Fingerprint {
		return nil, false
	}
	if st := r.state.State(); st != StateExecuted && st != StateCommitted {
		return nil, false
	}
	now = max(now, l.now)
	if margin < 0 || now > MaxSnapshotTime || now >= r.purgeAt()-margin {
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
