package fsm

import (
	"fmt"
	"strings"
)

// TypeNoteDivergent is the log type of NoteDivergent. A replica that does
// not know it stops on it (it is not ignorable: a replica that skipped it
// would hold other counters and another audit chain than its peers), so
// every node is upgraded before the leader proposes one.
const TypeNoteDivergent CommandType = 17

// NoteDivergent records, as one audit event per key, the divergent claims
// (another payload than the one the key was claimed with) the leader
// answered from its own state (Machine.LocalDivergent) without a log entry
// each: a storm of agents retrying a key with a changed payload costs one
// entry per interval, not one per attempt. The claims were answered
// already; the notes keep the intents' Divergent counters, the keys'
// audit trails and the namespace's audit log complete.
//
// Applying a note, while its intent is still the record the claims were
// refused against (the same fingerprint and creation time, and a grant no
// earlier than the one they saw; whatever its state now: the counter
// belongs to the record, and a claim applied in the log would have
// counted on it across a re-grant too), adds Count to the intent's Divergent counter
// and records one event (op "claim", status divergent, the first owner
// and the first fingerprint, reason "N divergent claims with fingerprints
// ... by owners ... between t1 and t2"), which joins the key's trail as a
// NoteRefusals event does: by pushing out the oldest event that changed
// nothing, never a state change. Otherwise the namespace's audit log alone
// gets the event and no counter changes. A note changes nothing else: a
// divergent claim proposed as a claim changes nothing but the counter and
// the trail either.
type NoteDivergent struct {
	Header
	// Node is the leader that answered.
	Node  string
	Notes []DivergentNote
}

// DivergentNote is the divergent claims on one record in one interval.
type DivergentNote struct {
	Namespace string
	Key       string
	// Fingerprint and CreatedAt name the record the claims were refused
	// against: its fingerprint and when it was created; FencingToken is
	// its grant then (0 before any), which only grows on one record. A
	// record purged and claimed again is another one, and the note does
	// not count on it.
	Fingerprint  string
	FencingToken uint64
	CreatedAt    int64
	// Count is how many claims were refused (1..MaxDivergentCount).
	Count uint64
	// Owners are the distinct owners that were refused, in the order they
	// first came, at most MaxRefusalOwners; MoreOwners counts the distinct
	// owners past those.
	Owners     []string
	MoreOwners uint64
	// Fingerprints are the distinct fingerprints the claims carried (none
	// the record's), in the order they first came, at most
	// MaxDivergentFingerprints; MoreFingerprints counts those past them.
	Fingerprints     []string
	MoreFingerprints uint64
	// First and Last are when the first and the last claim were answered,
	// by the leader's clock (Unix nanoseconds): shown in the event's
	// reason, never used to decide.
	First, Last int64
}

// MaxDivergentNotes bounds the notes of one NoteDivergent,
// MaxDivergentFingerprints the fingerprints one note names and
// MaxDivergentCount the claims one note counts.
const (
	MaxDivergentNotes        = 1024
	MaxDivergentFingerprints = 8
	MaxDivergentCount        = 1 << 20
)

// Type implements Command.
func (*NoteDivergent) Type() CommandType { return TypeNoteDivergent }

func (a *applier) noteDivergent(c *NoteDivergent) *Result {
	if c.Node == "" || len(c.Notes) == 0 || len(c.Notes) > MaxDivergentNotes {
		return &Result{Status: StatusMalformed, Detail: fmt.Sprintf("divergent notes need a node and 1..%d notes", MaxDivergentNotes)}
	}
	for _, n := range c.Notes {
		if n.Namespace == "" || n.Key == "" || n.Fingerprint == "" || n.Count == 0 || n.Count > MaxDivergentCount ||
			len(n.Owners) == 0 || len(n.Owners) > MaxRefusalOwners || slicesHasEmpty(n.Owners) ||
			len(n.Fingerprints) == 0 || len(n.Fingerprints) > MaxDivergentFingerprints || slicesHasEmpty(n.Fingerprints) ||
			hasString(n.Fingerprints, n.Fingerprint) {
			return &Result{Status: StatusMalformed, Detail: fmt.Sprintf(
				"a divergent note needs a namespace, key, the record's fingerprint, a count of 1..%d, 1..%d owners and 1..%d fingerprints other than the record's",
				MaxDivergentCount, MaxRefusalOwners, MaxDivergentFingerprints)}
		}
	}
	r := &Result{Status: StatusOK}
	for _, n := range c.Notes {
		if a.noteDivergentOne(c.Node, n) {
			r.Count++
		}
	}
	return r
}

func hasString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// divergentReason is the reason of a divergent note's event.
func divergentReason(node string, n DivergentNote) string {
	owners := strings.Join(n.Owners, ", ")
	if n.MoreOwners > 0 {
		owners += fmt.Sprintf(" and %d more", n.MoreOwners)
	}
	fps := strings.Join(n.Fingerprints, ", ")
	if n.MoreFingerprints > 0 {
		fps += fmt.Sprintf(" and %d more", n.MoreFingerprints)
	}
	return fmt.Sprintf("%d divergent claims with fingerprints %s by owners %s between %d and %d, against fingerprint %s (fencing token %d), answered by leader %s from its state",
		n.Count, fps, owners, n.First, n.Last, n.Fingerprint, n.FencingToken, node)
}

// noteDivergentOne applies one note and reports whether it was recorded
// on its intent.
func (a *applier) noteDivergentOne(node string, n DivergentNote) bool {
	ev := AuditEvent{Op: "claim", Status: StatusDivergent, Owner: n.Owners[0], Fingerprint: n.Fingerprints[0],
		Reason: divergentReason(node, n)}
	orig, w := a.begin(n.Namespace, n.Key)
	if w == nil || w.Fingerprint != n.Fingerprint || w.CreatedAt != n.CreatedAt || w.FencingToken < n.FencingToken {
		ev.Index, ev.At = a.index, a.now
		ev.Reason += "; the record has moved on since"
		a.l.appendChain(n.Namespace, n.Key, ev)
		if w != nil {
			a.unchanged(orig, w, StatusOK)
		}
		return false
	}
	w.Divergent += n.Count
	a.eventSparing(w, ev)
	a.save(orig, w)
	return true
}

// LocalDivergent answers claim c from this copy of the ledger alone when
// the state machine would refuse it as divergent (the key holds another
// fingerprint) and change nothing but the intent's Divergent counter and
// audit trail, and reports whether it could: the key's lease, if it is
// declared, has not passed at now (the claim would expire it first), and
// c passes the checks claim makes first, as for LocalRefusal. now is the
// answering node's clock (Unix nanoseconds); the ledger's own time is used
// when it is later. The Result is what applying c at now would answer
// (status, detail, the claim's fingerprint, the intent with Divergent one
// higher) but for the audit event and version the apply would add: the
// caller records the claim later with NoteDivergent.
//
// Only the leader, after confirming its leadership (a linearizable read),
// may give this answer, for the reason LocalRefusal says.
func (l *Machine) LocalDivergent(c *Claim, now int64) (*Result, bool) {
	r := l.get(c.Namespace, c.Key)
	if r == nil || c.Fingerprint == "" || r.fingerprint() == c.Fingerprint {
		return nil, false
	}
	now = max(now, l.now)
	if now > MaxSnapshotTime || leasePassed(r.state.State(), r.leaseDeadline, now) || !l.claimChecksPass(c) {
		return nil, false
	}
	w := r.intent()
	w.Divergent++
	return &Result{Status: StatusDivergent, Intent: w, Detail: divergentDetail(c.Key, w.Fingerprint, c.Fingerprint),
		Fingerprint: c.Fingerprint, Index: l.index, Local: true}, true
}

// divergentDetail explains a divergent claim's refusal, the same words
// whether the log or LocalDivergent answers.
func divergentDetail(key, recorded, claimed string) string {
	return fmt.Sprintf("key %q was claimed with fingerprint %s; this claim has fingerprint %s", key, recorded, claimed)
}
