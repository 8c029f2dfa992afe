package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unique"
)

// The checks Restore makes on the values of a snapshot, beyond its format.
//
// The SHA-256 trailer only detects accidents: anyone can compute it, so a
// snapshot uploaded by an operator (or by someone holding an admin key)
// may carry any value a well-formed snapshot can spell. Restore refuses
// every value that no sequence of commands could have produced, judged by
// the rules the live commands apply (Policy.Validate, Settings.Validate,
// SigningKey.Validate) and by the invariants the transitions keep: every
// index is the log index of a command applied before the snapshot, every
// time is one the ledger's clock already passed, a record's fields are
// those its state is reached with, and an audit log is one unbroken hash
// chain. A restored ledger therefore behaves as a replica that applied a
// log does: no index wraps in Raft, no lease or window overflows when it
// is added to a time, and every token it signs verifies.

// ErrInvalidSnapshot is a snapshot whose format and checksum are sound but
// which holds a value no ledger can hold. Restore's errors that wrap it
// wrap ErrBadSnapshot as well.
var ErrInvalidSnapshot = errors.New("invalid value")

// MaxSnapshotIndex is the largest log index a snapshot may carry as its
// applied index, and so as any fencing token, version or policy version
// in it: 2^53−1, the largest integer every JSON client reads exactly. A
// cluster at a million commands a second takes 285 years to reach it, and
// Raft, which installs a restored snapshot one index past it, is far from
// wrapping.
const MaxSnapshotIndex = 1<<53 - 1

// MaxSnapshotTime is the latest time (Unix nanoseconds) a snapshot may
// carry: 2200-01-01T00:00:00Z, far past any clock a leader stamps
// commands with; the 62 years left before Unix nanoseconds overflow an
// int64 (in 2262) leave room for every lease, dedupe window and token
// lifetime added to a time.
const MaxSnapshotTime int64 = 7_258_118_400 * 1e9

// MaxWindowMS is the longest lease or dedupe window, in milliseconds, a
// snapshot may carry: the most that can be added to MaxSnapshotTime before
// Unix nanoseconds overflow an int64 (about 62 years).
const MaxWindowMS = (math.MaxInt64 - MaxSnapshotTime) / 1_000_000

// restoreBounds are what every value of a snapshot is checked against:
// its applied index and its clock, both checked first.
type restoreBounds struct {
	index uint64
	now   int64
	terms *termsCache
}

// invalidf is a failed value check.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSnapshot, fmt.Sprintf(format, args...))
}

// msToNS is ms milliseconds in nanoseconds; false if that overflows.
func msToNS(ms int64) (int64, bool) {
	if ms > math.MaxInt64/1_000_000 || ms < math.MinInt64/1_000_000 {
		return 0, false
	}
	return ms * 1e6, true
}

// windowFits reports whether a lease or dedupe window of ms milliseconds
// can be added to any time from 0 to MaxSnapshotTime without overflowing,
// as the transitions add them.
func windowFits(ms int64) bool {
	_, ok := msToNS(ms)
	return ok && ms <= MaxWindowMS
}

// checkHeader checks the values of a snapshot's header and returns the
// bounds its records and audit events are checked against. Errors wrap
// ErrInvalidSnapshot.
func checkHeader(hdr *snapshotHeader) (restoreBounds, error) {
	b := restoreBounds{index: hdr.Index, now: hdr.Now, terms: new(termsCache)}
	if hdr.Index > MaxSnapshotIndex {
		return b, invalidf("applied index %d is over the limit of %d", hdr.Index, uint64(MaxSnapshotIndex))
	}
	if hdr.Now < 0 || hdr.Now > MaxSnapshotTime {
		return b, invalidf("clock %d is outside 0..%d (the year 2200)", hdr.Now, MaxSnapshotTime)
	}
	if hdr.Index == 0 && (hdr.Now != 0 || hdr.Count != 0 || len(hdr.Policies) > 0 || len(hdr.Keys) > 0 ||
		len(hdr.Chains) > 0 || hdr.Events != 0 || hdr.Settings != (Settings{})) {
		return b, invalidf("applied index 0 (nothing applied), yet the clock, intents, policies, keys, settings or audit logs are set")
	}
	if uint64(hdr.Count) > hdr.Index {
		// A claim creates at most one intent.
		return b, invalidf("%d intents, more than the %d commands applied can have created", hdr.Count, hdr.Index)
	}
	if err := hdr.Settings.Validate(); err != nil {
		return b, invalidf("settings: %v", err)
	}
	if err := b.checkKeys(hdr.Keys); err != nil {
		return b, err
	}
	if err := b.checkPolicies(hdr.Policies); err != nil {
		return b, err
	}
	return b, checkChainHeads(hdr.Chains, hdr.Events)
}

// checkKeys checks the signing keys: each as AddSigningKey accepts it,
// ids unique, at most MaxSigningKeys, oldest first, added at times the
// clock passed.
func (b restoreBounds) checkKeys(keys []SigningKey) error {
	if len(keys) > MaxSigningKeys {
		return invalidf("%d signing keys, at most %d", len(keys), MaxSigningKeys)
	}
	ids := make(map[string]bool, len(keys))
	prev := int64(0)
	for i, k := range keys {
		if err := k.Validate(); err != nil {
			return invalidf("signing key %d: %v", i, err)
		}
		if ids[k.ID] {
			return invalidf("signing key %s twice", k.ID)
		}
		ids[k.ID] = true
		if k.CreatedAt < prev || k.CreatedAt > b.now {
			return invalidf("signing key %s created at %d, outside %d..%d (the previous key's time and the clock)",
				k.ID, k.CreatedAt, prev, b.now)
		}
		prev = k.CreatedAt
	}
	return nil
}

// checkPolicies checks the policies as PutPolicy validates them, names
// unique, at most MaxPolicies besides the default, each versioned by a
// command the snapshot holds.
func (b restoreBounds) checkPolicies(policies []*Policy) error {
	names := make(map[string]bool, len(policies))
	others := 0
	for i, p := range policies {
		if p == nil {
			return invalidf("policy %d is null", i)
		}
		if err := p.Validate(); err != nil {
			return invalidf("policy %d: %v", i, err)
		}
		if names[p.Name] {
			return invalidf("policy %s twice", p.Name)
		}
		names[p.Name] = true
		if p.Name != DefaultPolicyName {
			others++
		}
		if p.Version == 0 || p.Version > b.index {
			return invalidf("policy %s has version %d, outside 1..%d (the applied index)", p.Name, p.Version, b.index)
		}
	}
	if others > MaxPolicies {
		return invalidf("%d policies besides the default, at most %d", others, MaxPolicies)
	}
	return nil
}

// checkChainHeads checks the heads of the audit logs: each log holds at
// least one event, numbered without gaps from FirstSeq to LastSeq, the
// ones before FirstSeq dropped (a log that dropped none is anchored at
// the zero hash), and together they hold the events the header counts.
func checkChainHeads(heads []ChainHead, events int) error {
	seen := make(map[string]bool, len(heads))
	var total uint64
	for _, h := range heads {
		if seen[h.Namespace] {
			return invalidf("audit log %q twice", h.Namespace)
		}
		seen[h.Namespace] = true
		switch {
		case h.FirstSeq == 0 || h.LastSeq < h.FirstSeq:
			return invalidf("audit log %q runs from seq %d to %d; a log holds at least one event from seq 1",
				h.Namespace, h.FirstSeq, h.LastSeq)
		case h.Dropped != h.FirstSeq-1:
			return invalidf("audit log %q starts at seq %d but counts %d dropped events", h.Namespace, h.FirstSeq, h.Dropped)
		case !isChainHash(h.Anchor) || !isChainHash(h.LastHash):
			return invalidf("audit log %q: anchor %q or last hash %q is not a hex SHA-256", h.Namespace, h.Anchor, h.LastHash)
		case h.Dropped == 0 && h.Anchor != zeroHash:
			return invalidf("audit log %q dropped no event but is anchored at %s", h.Namespace, h.Anchor)
		}
		n := h.LastSeq - h.FirstSeq + 1
		if n > uint64(events) || total > uint64(events)-n {
			return invalidf("audit logs hold more events than the %d the header counts", events)
		}
		total += n
	}
	if total != uint64(events) {
		return invalidf("audit logs hold %d events; the header counts %d", total, events)
	}
	return nil
}

// isChainHash reports whether s is a hash as ChainEventHash writes it.
func isChainHash(s string) bool {
	_, ok := parseFingerprint(s) // 64 lowercase hex digits, as Fingerprint writes
	return ok
}

// chainCursor is how far one audit log has been checked.
type chainCursor struct {
	head  ChainHead
	next  uint64 // seq the next event must have
	prev  string // hash the next event must chain from
	index uint64 // index and time of the last event checked
	at    int64
}

// chainChecker checks the audit log events of a snapshot as they are read.
type chainChecker struct {
	b       restoreBounds
	cursors map[string]*chainCursor
}

func newChainChecker(b restoreBounds, heads []ChainHead) *chainChecker {
	cc := &chainChecker{b: b, cursors: make(map[string]*chainCursor, len(heads))}
	for _, h := range heads {
		cc.cursors[h.Namespace] = &chainCursor{head: h, next: h.FirstSeq, prev: h.Anchor}
	}
	return cc
}

// decodeChainBody decodes the body of an audit log event of namespace ns.
func decodeChainBody(ns string, ev *ChainEvent) (*ChainBody, error) {
	body := new(ChainBody)
	if err := json.Unmarshal(ev.Body, body); err != nil {
		return nil, invalidf("audit log %q: event %d: %v", ns, ev.Seq, err)
	}
	return body, nil
}

// event checks the next event of the namespace's log, whose hash Restore
// verified and whose body it decoded: it follows the previous one (or the
// anchor) in seq and hash, and names the log, an index the snapshot holds
// and a time the clock passed, neither before the previous event's.
func (cc *chainChecker) event(ns string, ev *ChainEvent, body *ChainBody) error {
	c := cc.cursors[ns]
	if c == nil {
		return invalidf("audit event of %q, which has no log", ns)
	}
	if ev.Seq != c.next || ev.Seq > c.head.LastSeq {
		return invalidf("audit log %q: event seq %d where seq %d (of %d..%d) is due", ns, ev.Seq, c.next,
			c.head.FirstSeq, c.head.LastSeq)
	}
	switch {
	case body.Seq != ev.Seq || body.Namespace != ns:
		return invalidf("audit log %q: event %d names seq %d of %q", ns, ev.Seq, body.Seq, body.Namespace)
	case body.Prev != c.prev:
		return invalidf("audit log %q: event %d chains from %s, not from %s", ns, ev.Seq, body.Prev, c.prev)
	case body.Index == 0 || body.Index < c.index || body.Index > cc.b.index:
		return invalidf("audit log %q: event %d has index %d, outside %d..%d (the previous event's and the applied index)",
			ns, ev.Seq, body.Index, max(c.index, 1), cc.b.index)
	case body.At < c.at || body.At > cc.b.now:
		return invalidf("audit log %q: event %d at %d, outside %d..%d (the previous event's time and the clock)",
			ns, ev.Seq, body.At, c.at, cc.b.now)
	}
	c.next, c.prev, c.index, c.at = ev.Seq+1, ev.Hash, body.Index, body.At
	return nil
}

// done checks that every log got all its events and ends at its head's
// last hash.
func (cc *chainChecker) done() error {
	for ns, c := range cc.cursors {
		if c.next != c.head.LastSeq+1 || c.prev != c.head.LastHash {
			return invalidf("audit log %q ends before seq %d, or not at its last hash %s", ns, c.head.LastSeq, c.head.LastHash)
		}
	}
	return nil
}

// checkRecord checks one restored record; it runs on the goroutine that
// decoded it. Errors wrap ErrInvalidSnapshot and name the record.
func (b restoreBounds) checkRecord(r *record) error {
	if err := b.recordValues(r); err != nil {
		return fmt.Errorf("%w: %q/%q: %w", ErrInvalidSnapshot, r.namespace(), r.key, err)
	}
	return nil
}

// within checks lo <= t <= hi for a named time.
func within(name string, t, lo, hi int64) error {
	if t < lo || t > hi {
		return fmt.Errorf("%s %d is outside %d..%d", name, t, lo, hi)
	}
	return nil
}

// termsCache remembers the checks of the grant terms it has seen: nearly
// every record shares its terms with many others (they are one handle),
// and a check costs two regular expressions. It holds at most
// maxCachedTerms of them, so a snapshot of distinct terms costs no more.
type termsCache struct {
	checked sync.Map // unique.Handle[grantTerms] → error (nil: valid)
	n       atomic.Int64
}

const maxCachedTerms = 1024

// check checks grant terms (through the cache).
func (c *termsCache) check(h unique.Handle[grantTerms]) error {
	if err, ok := c.checked.Load(h); ok {
		if err == nil {
			return nil
		}
		return err.(error)
	}
	err := checkTerms(h.Value())
	if c.n.Add(1) <= maxCachedTerms {
		c.checked.Store(h, err)
	}
	return err
}

// checkTerms checks the terms a grant or an approval gate took: named as
// policies and keys are named, a token lifetime a policy could set (or
// DefaultTokenTTLMS), no window that overflows when added to a time, a
// principal apply could have recorded.
func checkTerms(t grantTerms) error {
	if t.policy != "" && !policyNameRE.MatchString(t.policy) {
		return fmt.Errorf("policy name %q is not one a policy can have", t.policy)
	}
	if t.tokenKey != "" && !keyIDRE.MatchString(t.tokenKey) {
		return fmt.Errorf("token key %q is not a signing key id", t.tokenKey)
	}
	if err := (&Policy{Name: DefaultPolicyName, TokenTTLMS: t.tokenTTLMS}).Validate(); err != nil {
		return fmt.Errorf("token lifetime: %w", err)
	}
	if !windowFits(t.leaseMS) || !windowFits(t.dedupeWindowMS) {
		return fmt.Errorf("lease_ms %d or dedupe_window_ms %d overflows when added to a time", t.leaseMS, t.dedupeWindowMS)
	}
	// Every record was made by a claim (a grant, or the pending intent an
	// approval gate holds), which records the principal that asked, as
	// apply takes it (principalOK).
	if !principalOK(t.principal) {
		return fmt.Errorf("principal of %d bytes is not 0..%d bytes of UTF-8", len(t.principal), MaxPrincipalBytes)
	}
	return nil
}

// recordValues checks a record against the invariants of the transitions
// (transitions.go, token.go).
func (b restoreBounds) recordValues(r *record) error {
	t, x, st := r.terms.Value(), r.extra(), r.state.State()

	// Indexes. The version is the index of the last command that changed
	// the record; a grant takes its own index as fencing token (so each
	// generation takes a distinct index) and a policy decision names the
	// policy's version, both at or before it.
	switch {
	case r.version == 0 || r.version > b.index:
		return fmt.Errorf("version %d is outside 1..%d (the applied index)", r.version, b.index)
	case r.fence > r.version:
		return fmt.Errorf("fencing token %d is above the record's version %d", r.fence, r.version)
	case r.generation > r.fence || (r.generation == 0) != (r.fence == 0):
		return fmt.Errorf("generation %d does not go with fencing token %d: every grant counts one and takes its own index",
			r.generation, r.fence)
	case x.tokenUsed > r.fence:
		return fmt.Errorf("used token %d is above the fencing token %d", x.tokenUsed, r.fence)
	case t.policyVersion > r.version:
		return fmt.Errorf("policy version %d is above the record's version %d", t.policyVersion, r.version)
	case x.duplicates > r.version*MaxDuplicateNotes || x.divergent/MaxDivergentCount > r.version*MaxDivergentNotes ||
		x.auditDropped > r.version*(MaxDuplicateNotes+1):
		// A command counts at most one divergent claim except a
		// NoteDivergent batch (up to MaxDivergentNotes notes of up to
		// MaxDivergentCount each for one key), and at most one duplicate
		// except a NoteDuplicates batch (up to MaxDuplicateNotes for one
		// key); it appends at most that many audit events plus a lazy
		// expiry's.
		return fmt.Errorf("counters (%d duplicates, %d divergent, %d audit events dropped) are more than %d commands make",
			x.duplicates, x.divergent, x.auditDropped, r.version)
	}

	// Times: all stamped by commands, so none after the clock, and none
	// before the record was created.
	if err := within("created_at", r.createdAt, 0, b.now); err != nil {
		return err
	}
	if err := within("updated_at", r.updatedAt, r.createdAt, b.now); err != nil {
		return err
	}

	if err := b.terms.check(r.terms); err != nil {
		return err
	}

	// State. Only a new intent waits for approval, so pending_approval,
	// approved and rejected were never granted; every other state was
	// reached through a grant, which set an owner and a lease.
	switch st {
	case StatePendingApproval, StateApproved, StateRejected:
		switch {
		case r.generation != 0:
			return fmt.Errorf("%s, yet granted %d times", st, r.generation)
		case !x.requireApproval:
			return fmt.Errorf("%s without require_approval", st)
		case r.owner != "" || t.leaseMS != 0 || r.leaseDeadline != 0 || r.grantedAt != 0 || t.tokenKey != "" || r.result != "":
			return fmt.Errorf("%s (never granted), yet it has an owner, a lease, a grant time, a token key or a result", st)
		}
	default:
		if err := b.grantValues(r, st, t.leaseMS); err != nil {
			return err
		}
	}

	// Approvals: the approvers and the number required are a policy's, as
	// PutPolicy validates them; each approval by a distinct approver.
	if !x.requireApproval {
		if x.approvalsRequired != 0 || len(x.approvers) > 0 || len(x.approvals) > 0 {
			return errors.New("approvers or approvals without require_approval")
		}
	} else {
		gate := Policy{Name: DefaultPolicyName, RequireApproval: true, ApprovalsRequired: x.approvalsRequired, Approvers: x.approvers}
		if err := gate.Validate(); err != nil {
			return fmt.Errorf("approval gate: %w", err)
		}
		if len(x.approvals) > max(x.approvalsRequired, 1) {
			return fmt.Errorf("%d approvals, when %d were required", len(x.approvals), max(x.approvalsRequired, 1))
		}
		for i, ap := range x.approvals {
			if ap.Actor == "" || (len(x.approvers) > 0 && !slices.Contains(x.approvers, ap.Actor)) {
				return fmt.Errorf("approval %d by %q, who is not an approver", i, ap.Actor)
			}
			for _, other := range x.approvals[:i] {
				if other.Actor == ap.Actor {
					return fmt.Errorf("two approvals by %q", ap.Actor)
				}
			}
			if ap.At < r.createdAt || ap.At > b.now {
				return fmt.Errorf("approval %d at %d is outside %d..%d (the intent's creation and the clock)", i, ap.At, r.createdAt, b.now)
			}
		}
	}
	return b.trailValues(r, x.auditDropped)
}

// grantValues checks a record in a state reached through a grant.
func (b restoreBounds) grantValues(r *record, st State, leaseMS int64) error {
	if r.generation == 0 {
		return fmt.Errorf("%s, yet never granted", st)
	}
	if r.owner == "" || leaseMS <= 0 {
		return fmt.Errorf("granted with owner %q and lease_ms %d; a grant needs an owner and a lease", r.owner, leaseMS)
	}
	// The grant stamped its time, at or after the intent's creation.
	if err := within("granted_at", r.grantedAt, r.createdAt, r.updatedAt); err != nil {
		return err
	}
	// The lease was set at the grant or a later renewal: its deadline is
	// lease_ms after a time between the grant and the clock.
	lease, _ := msToNS(leaseMS) // windowFits checked it
	start := r.leaseDeadline - lease
	if r.leaseDeadline < math.MinInt64+lease || start < r.grantedAt || start > b.now {
		return fmt.Errorf("lease deadline %d is not lease_ms %d after a time within %d..%d (the grant and the clock)",
			r.leaseDeadline, leaseMS, r.grantedAt, b.now)
	}
	switch st {
	case StateDeclared, StateInDoubt:
		if r.result != "" {
			return fmt.Errorf("%s with a result", st)
		}
	}
	if st == StateInDoubt && r.leaseDeadline >= r.updatedAt {
		return fmt.Errorf("in_doubt at %d, yet its lease runs until %d", r.updatedAt, r.leaseDeadline)
	}
	return nil
}

// trailValues checks the record's audit trail, which decodeRecord found
// well formed: at most MaxAuditEvents events (at least
// MaxAuditEvents-noteTrailRoom once some were dropped), in index and time order, none after the record's version
// or the clock, none before the record was created.
func (b restoreBounds) trailValues(r *record, dropped uint64) error {
	// Only indexes and times are checked: an owner or fingerprint written
	// "as the record's" need not be rebuilt.
	d := reader{b: stringBytes(r.trail)}
	ctx := trailContext{version: r.version, createdAt: r.createdAt}
	n := 0
	var index uint64
	at := r.createdAt
	for ; len(d.b) > 0; n++ {
		ev, err := d.event(ctx)
		if err != nil {
			return fmt.Errorf("audit event %d: %w", n, err)
		}
		if n == MaxAuditEvents {
			return fmt.Errorf("more than %d audit events", MaxAuditEvents)
		}
		if ev.Index < index || ev.Index > r.version {
			return fmt.Errorf("audit event %d has index %d, outside %d..%d (the previous event's and the record's version)",
				n, ev.Index, index, r.version)
		}
		if ev.At < at || ev.At > b.now {
			return fmt.Errorf("audit event %d at %d is outside %d..%d (the previous event's time and the clock)", n, ev.At, at, b.now)
		}
		index, at = ev.Index, ev.At
	}
	if dropped > 0 && n < MaxAuditEvents-noteTrailRoom {
		// A note's event (eventSparing) leaves MaxAuditEvents-noteTrailRoom
		// events after dropping; the other commands drop only at
		// MaxAuditEvents.
		return fmt.Errorf("%d audit events dropped, yet only %d kept", dropped, n)
	}
	return nil
}
