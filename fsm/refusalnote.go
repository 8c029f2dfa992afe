package fsm

import (
	"fmt"
	"strings"
)

// TypeNoteRefusals is the log type of NoteRefusals. A replica that does
// not know it stops on it (it is not ignorable: a replica that skipped it
// would hold another audit chain than its peers), so every node is
// upgraded before the leader proposes one.
const TypeNoteRefusals CommandType = 16

// NoteRefusals records, as one audit event per key, the claims the leader
// refused from its own state (Machine.LocalRefusal) without a log entry
// each: a retry storm on a held key costs one entry per interval, not one
// per attempt. The refusals were answered already; the notes only keep
// the keys' audit trails and the namespace's audit log complete.
//
// Applying a note records one event (op "claim", the note's status,
// reason "N in_flight refusals by owners ... between t1 and t2") on its
// intent while the intent still holds the grant the refusals were made
// against (its fencing token), whatever its state now; otherwise the
// namespace's audit log alone gets the event. A note changes no state and
// no counter: an in_flight or in_doubt refusal proposed as a claim counts
// nothing either. Its event joins the key's trail of MaxAuditEvents by
// pushing out the oldest event that changed nothing (AuditEvent.ChangesState),
// never a grant, report, decision or expiry, while there is one.
type NoteRefusals struct {
	Header
	// Node is the leader that answered.
	Node  string
	Notes []RefusalNote
}

// RefusalNote is the refusals of one key against one grant in one
// interval.
type RefusalNote struct {
	Namespace string
	Key       string
	// Status is StatusInFlight or StatusInDoubt.
	Status Status
	// FencingToken is the grant the refusals were answered against.
	FencingToken uint64
	// Count is how many claims were refused (at least 1).
	Count uint64
	// Owners are the distinct owners that were refused, in the order
	// they first came, at most MaxRefusalOwners; MoreOwners counts the
	// distinct owners past those.
	Owners     []string
	MoreOwners uint64
	// First and Last are when the first and the last refusal were
	// answered, by the leader's clock (Unix nanoseconds): shown in the
	// event's reason, never used to decide.
	First, Last int64
}

// MaxRefusalNotes bounds the notes of one NoteRefusals, and
// MaxRefusalOwners the owners one note names.
const (
	MaxRefusalNotes  = 1024
	MaxRefusalOwners = 8
)

// Type implements Command.
func (*NoteRefusals) Type() CommandType { return TypeNoteRefusals }

func (a *applier) noteRefusals(c *NoteRefusals) *Result {
	if c.Node == "" || len(c.Notes) == 0 || len(c.Notes) > MaxRefusalNotes {
		return &Result{Status: StatusMalformed, Detail: fmt.Sprintf("refusal notes need a node and 1..%d notes", MaxRefusalNotes)}
	}
	for _, n := range c.Notes {
		if n.Namespace == "" || n.Key == "" || n.Count == 0 || len(n.Owners) == 0 || len(n.Owners) > MaxRefusalOwners ||
			(n.Status != StatusInFlight && n.Status != StatusInDoubt) || slicesHasEmpty(n.Owners) {
			return &Result{Status: StatusMalformed, Detail: fmt.Sprintf(
				"a refusal note needs a namespace, key, a count, 1..%d owners and status in_flight or in_doubt", MaxRefusalOwners)}
		}
	}
	r := &Result{Status: StatusOK}
	for _, n := range c.Notes {
		if a.noteRefusal(c.Node, n) {
			r.Count++
		}
	}
	return r
}

func slicesHasEmpty(s []string) bool {
	for _, v := range s {
		if v == "" {
			return true
		}
	}
	return false
}

// refusalReason is the reason of a note's event.
func refusalReason(node string, n RefusalNote) string {
	owners := strings.Join(n.Owners, ", ")
	if n.MoreOwners > 0 {
		owners += fmt.Sprintf(" and %d more", n.MoreOwners)
	}
	return fmt.Sprintf("%d %s refusals of fencing token %d by owners %s between %d and %d, answered by leader %s from its state",
		n.Count, n.Status, n.FencingToken, owners, n.First, n.Last, node)
}

// noteRefusal applies one note and reports whether it was recorded on its
// intent.
func (a *applier) noteRefusal(node string, n RefusalNote) bool {
	ev := AuditEvent{Op: "claim", Status: n.Status, Owner: n.Owners[0], Reason: refusalReason(node, n)}
	orig, w := a.begin(n.Namespace, n.Key)
	if w == nil || w.FencingToken != n.FencingToken {
		ev.Index, ev.At = a.index, a.now
		ev.Reason += "; the record has moved on since"
		a.l.appendChain(n.Namespace, n.Key, ev)
		if w != nil {
			a.unchanged(orig, w, StatusOK)
		}
		return false
	}
	a.eventSparing(w, ev)
	a.save(orig, w)
	return true
}

// noteTrailRoom is how many events of a key's trail NoteRefusals leaves
// to the other commands: a note's event makes the trail at most
// MaxAuditEvents-noteTrailRoom events long.
const noteTrailRoom = 16

// eventSparing records ev on w like event, but once the trail holds
// MaxAuditEvents-noteTrailRoom events it first drops the oldest event that
// changed nothing (a refusal, a duplicate, a renewal; AuditEvent.ChangesState)
// rather than the oldest: a storm's notes never push out the grant they
// were refused against, and leave room for noteTrailRoom later events
// before the ring of the other commands (the oldest goes) reaches the
// grant. Only NoteRefusals uses it; every other command keeps the trail as
// it always has, so an old log replays to the same state.
func (a *applier) eventSparing(w *Intent, ev AuditEvent) {
	if len(w.Audit) < MaxAuditEvents-noteTrailRoom {
		a.event(w, ev)
		return
	}
	keep := w.Audit
	for len(keep) >= MaxAuditEvents-noteTrailRoom {
		keep = dropOldestUnchanging(keep)
	}
	w.AuditDropped += uint64(len(w.Audit) - len(keep))
	w.Audit = keep
	a.event(w, ev)
}

// dropOldestUnchanging returns trail without its oldest event that changed
// nothing, or without its oldest event when every one changed the state.
func dropOldestUnchanging(trail []AuditEvent) []AuditEvent {
	drop := 0
	for i, e := range trail {
		if !e.ChangesState() {
			drop = i
			break
		}
	}
	out := make([]AuditEvent, 0, len(trail)-1)
	out = append(out, trail[:drop]...)
	return append(out, trail[drop+1:]...)
}

// ChangesState reports whether an audit event recorded a change of its
// intent's state: a grant (not the owner's repeated claim), a report,
// commit, resolution, token use, approval or rejection (op ok), a lease
// expiry, or the claim that made an intent pending. Refusals, duplicates,
// repeated claims and lease renewals change nothing a waiter waits for.
// Service.Wait answers only on such changes, and a NoteRefusals event
// never pushes one out of the trail.
func (e AuditEvent) ChangesState() bool {
	switch e.Status {
	case StatusGranted:
		return e.Reason != "repeated by owner"
	case StatusOK:
		return e.Op != "renew"
	case StatusExpired:
		return true
	case StatusPendingApproval:
		return e.Reason != "" // the claim that made it pending; a repeat has none
	}
	return false
}

// LocalRefusal answers claim c from this copy of the ledger alone when the
// state machine's answer would be an in_flight or in_doubt refusal that
// changes nothing but the audit trail, and reports whether it could: the
// key holds c's fingerprint, declared by another owner with a lease that
// has not passed at now, or in_doubt; and c passes the checks claim makes
// first (a malformed claim, an unknown policy or a payload over the
// policy's limit is answered by the log, as before). now is the answering
// node's clock (Unix nanoseconds); the ledger's own time is used when it
// is later. The Result is what applying c at now would answer (status,
// detail, the intent as it stands) but for the audit event and version the
// apply would add: the caller records those later with NoteRefusals.
//
// Only the leader, after confirming its leadership (a linearizable read),
// may give this answer: a lagging copy could refuse a key that was
// completed. A divergent claim is never answered here: LocalDivergent
// answers it, and NoteDivergent counts it.
func (l *Machine) LocalRefusal(c *Claim, now int64) (*Result, bool) {
	r := l.get(c.Namespace, c.Key)
	if r == nil || c.Fingerprint == "" || r.fingerprint() != c.Fingerprint {
		return nil, false
	}
	st := r.state.State()
	now = max(now, l.now)
	if now > MaxSnapshotTime || (st != StateDeclared && st != StateInDoubt) || leasePassed(st, r.leaseDeadline, now) {
		return nil, false
	}
	if !l.claimChecksPass(c) {
		return nil, false
	}
	w := r.intent()
	switch st {
	case StateDeclared:
		if w.Owner == c.Owner {
			return nil, false // the owner's repeat: granted again, through the log
		}
		return &Result{Status: StatusInFlight, Intent: w, Detail: inFlightDetail(w), Index: l.index, Local: true}, true
	default:
		return &Result{Status: StatusInDoubt, Intent: w, Detail: inDoubtDetail(w), Index: l.index, Local: true}, true
	}
}

// claimChecksPass reports whether claim c passes the checks the state
// machine's claim makes before it looks at the key: a JSON payload, an
// owner, windows and a principal it records, a policy for its tool, a
// payload within the policy's limit and a lease from somewhere. A claim
// that fails one is answered by the log, never from the state.
func (l *Machine) claimChecksPass(c *Claim) bool {
	payload, err := compactJSON(c.Payload)
	if err != nil || c.Owner == "" || !windowOK(c.LeaseMS) || !windowOK(c.DefaultLeaseMS) || !windowOK(c.DedupeWindowMS) ||
		!principalOK(c.Principal) {
		return false
	}
	pol, err := l.policyFor(c.Policy, c.Tool)
	if err != nil {
		return false
	}
	if limit := l.effective(pol, func(p *Policy) int64 { return int64(p.MaxPayloadBytes) }, 0); limit > 0 && int64(len(payload)) > limit {
		return false
	}
	return c.LeaseMS != 0 || l.effective(pol, func(p *Policy) int64 { return p.LeaseMS }, c.DefaultLeaseMS) > 0
}

// inFlightDetail and inDoubtDetail explain a claim's refusal on w, the
// same words whether the log or LocalRefusal answers.
func inFlightDetail(w *Intent) string { return fmt.Sprintf("owner %q holds the lease", w.Owner) }

func inDoubtDetail(w *Intent) string {
	return fmt.Sprintf("the lease of owner %q passed without a report; resolve the intent after checking the tool", w.Owner)
}
