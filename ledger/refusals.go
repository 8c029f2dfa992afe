package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// RefusalNotes configures how the leader answers a claim the state machine
// would refuse as in_flight or in_doubt without changing anything
// (fsm.Machine.LocalRefusal): from its own state after a linearizable read,
// without a log entry per attempt. A retry storm on a held key then costs
// one log entry per key per Interval (fsm.NoteRefusals), whatever the
// number of retriers, and its audit event says how many claims of which
// owners were refused between when and when.
//
// A duplicate claim on a settled key (executed or committed with the
// claim's fingerprint, inside its dedupe window: fsm.Machine.LocalDuplicate)
// is answered the same way once a duplicate on the key went through the
// log: from the leader's confirmed state, each answer queued as an
// fsm.DuplicateNote, and the notes of an Interval proposed together as
// fsm.NoteDuplicates entries (fsm.MaxDuplicateNotes notes each), so every
// duplicate is still counted and audited, later.
//
// A divergent claim (another payload than the key's:
// fsm.Machine.LocalDivergent) is answered the same way once a divergent
// claim on the key went through the log: from the leader's confirmed
// state, counted per key and record, and the counts of an Interval
// proposed together as fsm.NoteDivergent entries, which add them to the
// intents' Divergent counters and audit them (how many, which owners and
// fingerprints, first and last time).
type RefusalNotes struct {
	// Interval is how often the counted refusals are proposed (default
	// 1 s).
	Interval time.Duration
	// MaxKeys bounds the keys counted between two proposals (default
	// 10,000); past it refusals go through the log as before.
	MaxKeys int
	// Now is the node's clock, the one the leader stamps proposals with
	// (default: the replicator's Now method if it has one, as
	// ledgertest.Memory does, else time.Now).
	Now func() time.Time
	// Log gets a warning for each batch of notes not recorded (default
	// slog.Default()).
	Log *slog.Logger
}

// DefaultRefusalNotes is what a Service uses where Config.RefusalNotes
// leaves a field zero.
var DefaultRefusalNotes = RefusalNotes{Interval: time.Second, MaxKeys: 10_000}

// RefusalStats counts refusals answered from the leader's state.
type RefusalStats struct {
	// Answered is the refusals answered without a log entry; Noted those
	// the notes proposed since recorded, Lost those whose note was not
	// recorded; Entries the NoteRefusals entries proposed.
	Answered, Noted, Lost, Entries uint64
	// DuplicatesAnswered is the duplicate claims answered from the
	// leader's state; DuplicatesNoted those whose notes were recorded
	// since, DuplicatesLost those whose notes were not. Their
	// NoteDuplicates entries count in Entries.
	DuplicatesAnswered, DuplicatesNoted, DuplicatesLost uint64
	// DivergentAnswered is the divergent claims answered from the
	// leader's state; DivergentNoted those whose notes were recorded
	// since, DivergentLost those whose notes were not. Their
	// NoteDivergent entries count in Entries.
	DivergentAnswered, DivergentNoted, DivergentLost uint64
}

// maxPendingDuplicates bounds the duplicate notes that wait for the next
// proposal; past it duplicates go through the log as before.
const maxPendingDuplicates = 16 * fsm.MaxDuplicateNotes

// maxOwnerAttempts bounds the owners whose attempts one key's counter
// remembers for the Retry-After hint.
const maxOwnerAttempts = 1024

// refusalKey is what refusals are counted by: one key, one grant, one
// status.
type refusalKey struct {
	ns, key string
	fence   uint64
	status  fsm.Status
}

// refusalCount is the refusals of one refusalKey.
type refusalCount struct {
	// pending is counted since the last proposal.
	pending     uint64
	owners      []string
	seen        map[string]bool
	moreOwners  uint64
	first, last int64
	// attempts counts each owner's refusals on this grant (kept across
	// proposals, bounded by maxOwnerAttempts) for the Retry-After hint.
	attempts map[string]uint64
	used     int64
}

// divergentKey is what divergent claims are counted by: one key, one
// record (its fingerprint, grant and creation time, as the note names it).
type divergentKey struct {
	ns, key     string
	fingerprint string
	fence       uint64
	createdAt   int64
}

// divergentCount is the divergent claims of one divergentKey since the
// last proposal.
type divergentCount struct {
	pending               uint64
	owners, fingerprints  []string
	seen, seenFingerprint map[string]bool
	moreOwners, moreFps   uint64
	first, last, used     int64
}

// dupHold is a key in refusals.dupHeld.
type dupHold struct {
	fence uint64
	used  int64
	// notLeader is when this node last found it was not the leader while
	// answering a duplicate on the key: for notLeaderPause after it, the
	// key's duplicates go to the log without asking again.
	notLeader int64
}

// notLeaderPause is how long a follower proposes a held key's duplicates
// without a leadership confirmation (which fails, at a cost, on a
// follower).
const notLeaderPause = int64(time.Second)

// refusals is the running configuration: the counts and the loop that
// proposes them.
type refusals struct {
	cfg  RefusalNotes
	node string

	mu     sync.Mutex
	counts map[refusalKey]*refusalCount
	// held are the keys a claim was lately refused on (namespace, key),
	// with when: only their claims are checked against the state. Bounded
	// with counts (MaxKeys).
	held map[[2]string]int64
	// dupHeld are the keys whose duplicate claim the log lately answered,
	// with the grant (fencing token) it was a duplicate of and when: only
	// their claims are checked for a duplicate against the state, so every
	// grant's first duplicate is answered by the log. Bounded by MaxKeys.
	dupHeld map[[2]string]dupHold
	// divHeld are the keys whose divergent claim the log lately refused,
	// with when: only their claims are checked for a divergent answer
	// against the state, so every key's first divergent claim is answered
	// by the log. Bounded by MaxKeys.
	divHeld map[[2]string]int64
	// divCounts are the divergent claims answered from the state since
	// the last proposal. Bounded by MaxKeys.
	divCounts map[divergentKey]*divergentCount
	// loop is started by the first counted refusal.
	loop    sync.Once
	stop    chan struct{}
	done    chan struct{}
	stopped bool

	answered, noted, lost, entries atomic.Uint64

	// dups are the duplicates answered from the state since the last
	// proposal (at most maxPendingDuplicates); dupSeq numbers their notes,
	// from the clock at start so that ids are unique across restarts.
	dups                           []fsm.DuplicateNote
	dupSeq                         atomic.Uint64
	dupAnswered, dupNoted, dupLost atomic.Uint64

	divAnswered, divNoted, divLost atomic.Uint64

	// confirm shares the leadership confirmations of concurrent refusals.
	confirm confirmer
}

// confirmer shares linearizable confirmations (a Read with Linearizable
// consistency: the leader confirms its leadership with a quorum and waits
// until it has applied what was committed before) among concurrent
// refusals: one runs at a time, and a refusal waits for the first that
// starts after it arrived. A storm of a thousand retriers then costs a
// confirmation round per heartbeat round trip, not a thousand.
type confirmer struct {
	mu      sync.Mutex
	running bool
	next    *confirmRound
}

// confirmRound is one confirmation; done is closed when err is set.
type confirmRound struct {
	done chan struct{}
	err  error
	// waiters counts the calls waiting for it (under the confirmer's mu).
	waiters int
}

// confirm waits for a confirmation that starts after the call and returns
// its error (a *NotLeaderError on a follower), or ctx's.
func (c *confirmer) confirm(ctx context.Context, r Replicator) error {
	c.mu.Lock()
	if c.next == nil {
		c.next = &confirmRound{done: make(chan struct{})}
	}
	round := c.next
	round.waiters++
	if !c.running {
		c.running, c.next = true, nil
		go c.run(r, round)
	}
	c.mu.Unlock()
	select {
	case <-round.done:
		return round.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run runs round, then the round that gathered meanwhile, until none did.
func (c *confirmer) run(r Replicator, round *confirmRound) {
	for round != nil {
		ctx, cancel := context.WithTimeout(context.Background(), confirmBound)
		round.err = r.Read(ctx, Linearizable, func(*fsm.Machine) {})
		cancel()
		close(round.done)
		c.mu.Lock()
		round, c.next = c.next, nil
		if round == nil {
			c.running = false
		}
		c.mu.Unlock()
	}
}

// confirmBound bounds one confirmation.
const confirmBound = 5 * time.Second

// clockOf is r's clock if it has one, else time.Now.
func clockOf(r Replicator) func() time.Time {
	if c, ok := r.(interface{ Now() time.Time }); ok {
		return c.Now
	}
	return time.Now
}

func newRefusals(cfg RefusalNotes, clock func() time.Time) *refusals {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultRefusalNotes.Interval
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultRefusalNotes.MaxKeys
	}
	if cfg.Now == nil {
		cfg.Now = clock
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	rf := &refusals{cfg: cfg, node: "leader", counts: map[refusalKey]*refusalCount{}, held: map[[2]string]int64{},
		dupHeld: map[[2]string]dupHold{}, divHeld: map[[2]string]int64{}, divCounts: map[divergentKey]*divergentCount{},
		stop: make(chan struct{}), done: make(chan struct{})}
	rf.dupSeq.Store(uint64(cfg.Now().UnixNano()))
	return rf
}

// RefusalStats returns the counts of refusals answered from the leader's
// state.
func (s *Service) RefusalStats() RefusalStats {
	rf := s.refusals
	return RefusalStats{Answered: rf.answered.Load(), Noted: rf.noted.Load(), Lost: rf.lost.Load(), Entries: rf.entries.Load(),
		DuplicatesAnswered: rf.dupAnswered.Load(), DuplicatesNoted: rf.dupNoted.Load(), DuplicatesLost: rf.dupLost.Load(),
		DivergentAnswered: rf.divAnswered.Load(), DivergentNoted: rf.divNoted.Load(), DivergentLost: rf.divLost.Load()}
}

// mayForwardKey is the context key of WithForwardableClaim.
type mayForwardKey struct{}

// WithForwardableClaim returns ctx saying that a claim made with it may be
// answered with a *NotLeaderError naming the leader's HTTP address when
// this node is a follower and its copy says the leader would refuse the
// claim as in_flight or in_doubt: the caller sends the request to the
// leader, which answers it from its state (one hop, as a proposal through
// this node costs) without a log entry. The HTTP API sets it on claims
// that entered the cluster at this node.
func WithForwardableClaim(ctx context.Context) context.Context {
	return context.WithValue(ctx, mayForwardKey{}, true)
}

// refuseLocally answers claim c from the leader's state when the state
// machine would refuse it as in_flight or in_doubt and change nothing but
// the audit trail (fsm.Machine.LocalRefusal), and counts the refusal for
// the next NoteRefusals; or, when the state machine would answer it as a
// duplicate of a settled key (fsm.Machine.LocalDuplicate), answers it as a
// follower with local duplicates does and queues its note for the next
// NoteDuplicates; or, when the state machine would refuse it as divergent
// (fsm.Machine.LocalDivergent), counts it for the next NoteDivergent.
// nil, nil means "propose it". It looks only at
// keys a claim through this node was lately refused on (noteRefused), so
// other claims cost a map lookup: the first refusal of a storm goes
// through the log, the rest are answered from the state. On a follower it
// returns the NotLeaderError of its linearizable read when ctx allows
// forwarding (WithForwardableClaim), so the leader answers it.
func (s *Service) refuseLocally(ctx context.Context, c *fsm.Claim) (*fsm.Result, error) {
	rf := s.refusals
	now := rf.cfg.Now().UnixNano()
	held, dupFence, div := rf.isHeld(c.Namespace, c.Key, now)
	if !held && dupFence == 0 && !div {
		return nil, nil
	}
	var r *fsm.Result
	var keepDup, keepDiv bool
	err := rf.confirm.confirm(ctx, s.r)
	if err == nil {
		// Leadership was confirmed after this claim arrived, and this
		// copy has applied what was committed then: reading it now is
		// a linearizable read.
		err = s.r.Read(ctx, Stale, func(l *fsm.Machine) {
			if held || dupFence != 0 {
				// A key held only for its divergent claims leaves its
				// first in_flight or in_doubt refusal to the log, as
				// any other key does.
				if r, _ = l.LocalRefusal(c, now); r != nil {
					return
				}
			}
			if div {
				if r, _ = l.LocalDivergent(c, now); r != nil {
					return
				}
				// Not a divergent claim the state can answer (the same
				// payload, a lease that passed, a claim the log refuses
				// first): the key keeps its divergent claims while it
				// has a record.
				keepDiv = l.Get(c.Namespace, c.Key) != nil
			}
			if dupFence == 0 {
				return
			}
			// No margin: this is the leader's own clock, the one its
			// purge sweep goes by, and what it has not applied yet was
			// not committed when the claim arrived.
			if in, ok := l.LocalDuplicate(c, now, 0); ok && in.FencingToken == dupFence {
				r = &fsm.Result{Status: fsm.StatusDuplicate, Intent: in, Index: l.AppliedIndex(), Local: true}
				return
			}
			// Another payload (divergent, through the log) leaves the
			// key's duplicates to the state while it holds the grant.
			g := l.Get(c.Namespace, c.Key)
			keepDup = g != nil && g.FencingToken == dupFence && (g.State == fsm.StateExecuted || g.State == fsm.StateCommitted)
		})
	}
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl):
		if dupFence != 0 {
			rf.notLeader(c.Namespace, c.Key, now)
		}
		if nl.LeaderHTTP == "" || ctx.Value(mayForwardKey{}) == nil {
			return nil, nil
		}
		// A follower sends the claim to the leader only when its own
		// copy says the leader would likely refuse it.
		var likely bool
		if s.r.Read(ctx, Stale, func(l *fsm.Machine) {
			if held || dupFence != 0 {
				_, likely = l.LocalRefusal(c, now)
			}
			if !likely && div {
				_, likely = l.LocalDivergent(c, now)
			}
		}) != nil || !likely {
			return nil, nil
		}
		return nil, err
	case err != nil:
		return nil, nil
	case r == nil:
		rf.unhold(c.Namespace, c.Key, keepDup, keepDiv) // the key moved on
		return nil, nil
	case r.Status == fsm.StatusDivergent:
		before, ok := rf.countDivergent(r, c, now)
		if !ok {
			return nil, nil // too many keys or claims counted: the log answers
		}
		// The claims answered before this one and not proposed yet count
		// in the answer, as they will once noted.
		r.Intent.Divergent += before
		rf.divAnswered.Add(1)
		rf.loop.Do(func() { go rf.run(s) })
		return r, nil
	case r.Status == fsm.StatusDuplicate:
		if !rf.queueDuplicate(c, r.Intent.FencingToken, now) {
			return nil, nil // too many notes waiting: the log answers
		}
		rf.dupAnswered.Add(1)
		rf.loop.Do(func() { go rf.run(s) })
		return r, nil
	}
	attempt, ok := rf.count(r, c.Owner, now, true)
	if !ok {
		return nil, nil // too many keys counted: the log answers
	}
	rf.answered.Add(1)
	r.Attempt = attempt
	rf.loop.Do(func() { go rf.run(s) })
	return r, nil
}

// noteRefused remembers that the log refused owner's claim as r (in_flight
// or in_doubt) or answered it as a duplicate, so the next claims on the
// key are answered from the state, and sets r.Attempt of a refusal: the
// owner's first attempt on the grant.
func (s *Service) noteRefused(r *fsm.Result, owner string) {
	rf := s.refusals
	if r.Intent != nil && r.Status == fsm.StatusDuplicate {
		rf.holdDuplicates(r.Intent.Namespace, r.Intent.Key, r.Intent.FencingToken, rf.cfg.Now().UnixNano())
		return
	}
	if r.Intent != nil && r.Status == fsm.StatusDivergent {
		rf.holdDivergent(r.Intent.Namespace, r.Intent.Key, rf.cfg.Now().UnixNano())
		return
	}
	if r.Intent == nil || (r.Status != fsm.StatusInFlight && r.Status != fsm.StatusInDoubt) {
		return
	}
	if attempt, ok := rf.count(r, owner, rf.cfg.Now().UnixNano(), false); ok {
		r.Attempt = attempt
	}
}

// isHeld reports whether a claim on (ns, key) was lately refused here,
// the fencing token of the grant a duplicate claim on it was lately
// answered against by the log (0 if none), and whether a divergent claim
// on it was lately refused by the log.
func (rf *refusals) isHeld(ns, key string, now int64) (held bool, dupFence uint64, div bool) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	k := [2]string{ns, key}
	_, held = rf.held[k]
	_, div = rf.divHeld[k]
	h := rf.dupHeld[k]
	if h.notLeader != 0 && now-h.notLeader < notLeaderPause {
		return held, 0, div
	}
	return held, h.fence, div
}

// holdDivergent remembers (ns, key) as a key whose divergent claims are
// answered from the state, while fewer than MaxKeys keys are.
func (rf *refusals) holdDivergent(ns, key string, now int64) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	k := [2]string{ns, key}
	if _, ok := rf.divHeld[k]; rf.stopped || (!ok && len(rf.divHeld) >= rf.cfg.MaxKeys) {
		return
	}
	rf.divHeld[k] = now
}

// countDivergent counts c, a divergent claim answered from the state as
// r at now, for the next NoteDivergent, and returns how many claims on
// the record it counted before since the last proposal; false when the
// bound of keys or of one note's count is reached or the loop has
// stopped.
func (rf *refusals) countDivergent(r *fsm.Result, c *fsm.Claim, now int64) (uint64, bool) {
	in := r.Intent
	k := divergentKey{ns: in.Namespace, key: in.Key, fingerprint: in.Fingerprint, fence: in.FencingToken, createdAt: in.CreatedAt}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.stopped {
		return 0, false
	}
	dc := rf.divCounts[k]
	if dc == nil {
		if len(rf.divCounts) >= rf.cfg.MaxKeys {
			return 0, false
		}
		dc = &divergentCount{seen: map[string]bool{}, seenFingerprint: map[string]bool{}}
		rf.divCounts[k] = dc
	}
	if dc.pending >= fsm.MaxDivergentCount {
		return 0, false
	}
	rf.divHeld[[2]string{k.ns, k.key}] = now
	dc.used = now
	if dc.pending == 0 {
		dc.first = now
	}
	before := dc.pending
	dc.pending++
	dc.last = now
	dc.owners, dc.moreOwners = addDistinct(dc.owners, dc.seen, dc.moreOwners, c.Owner, fsm.MaxRefusalOwners)
	dc.fingerprints, dc.moreFps = addDistinct(dc.fingerprints, dc.seenFingerprint, dc.moreFps, c.Fingerprint, fsm.MaxDivergentFingerprints)
	return before, true
}

// addDistinct adds v to list (at most limit long) or to the count of
// more the first time seen has it.
func addDistinct(list []string, seen map[string]bool, more uint64, v string, limit int) ([]string, uint64) {
	if seen[v] {
		return list, more
	}
	seen[v] = true
	if len(list) < limit {
		return append(list, v), more
	}
	return list, more + 1
}

// takeDivergent returns the divergent notes counted since the last call
// and forgets the records counted then.
func (rf *refusals) takeDivergent() []fsm.DivergentNote {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	out := make([]fsm.DivergentNote, 0, len(rf.divCounts))
	for k, dc := range rf.divCounts {
		out = append(out, fsm.DivergentNote{Namespace: k.ns, Key: k.key, Fingerprint: k.fingerprint, FencingToken: k.fence,
			CreatedAt: k.createdAt, Count: dc.pending, Owners: dc.owners, MoreOwners: dc.moreOwners,
			Fingerprints: dc.fingerprints, MoreFingerprints: dc.moreFps, First: dc.first, Last: dc.last})
	}
	clear(rf.divCounts)
	return out
}

// notLeader remembers that this node was not the leader at now when it
// looked for a duplicate on (ns, key).
func (rf *refusals) notLeader(ns, key string, now int64) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	k := [2]string{ns, key}
	if h, ok := rf.dupHeld[k]; ok {
		h.notLeader = now
		rf.dupHeld[k] = h
	}
}

// holdDuplicates remembers (ns, key) as a key whose duplicate claims of
// the grant with fencing token fence are answered from the state, while
// fewer than MaxKeys keys are.
func (rf *refusals) holdDuplicates(ns, key string, fence uint64, now int64) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	k := [2]string{ns, key}
	h, ok := rf.dupHeld[k]
	if rf.stopped || (!ok && len(rf.dupHeld) >= rf.cfg.MaxKeys) {
		return
	}
	rf.dupHeld[k] = dupHold{fence: fence, used: now, notLeader: h.notLeader}
}

// queueDuplicate queues the note of duplicate claim c, answered at now
// against the grant with fencing token fence; false when
// maxPendingDuplicates notes wait or the loop has stopped.
func (rf *refusals) queueDuplicate(c *fsm.Claim, fence uint64, now int64) bool {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.stopped || len(rf.dups) >= maxPendingDuplicates {
		return false
	}
	rf.dups = append(rf.dups, fsm.DuplicateNote{Namespace: c.Namespace, Key: c.Key, Owner: c.Owner, Fingerprint: c.Fingerprint,
		FencingToken: fence, Note: fmt.Sprintf("%s/leader/%d", rf.node, rf.dupSeq.Add(1)), AnsweredAt: now})
	if h, ok := rf.dupHeld[[2]string{c.Namespace, c.Key}]; ok && h.fence == fence {
		h.used = now
		rf.dupHeld[[2]string{c.Namespace, c.Key}] = h
	}
	return true
}

// takeDuplicates returns the duplicate notes queued since the last call.
func (rf *refusals) takeDuplicates() []fsm.DuplicateNote {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	out := rf.dups
	rf.dups = nil
	return out
}

// unhold forgets (ns, key): its claims go to the log until one is refused
// again (or, unless keepDup, answered as a duplicate; unless keepDiv,
// refused as divergent).
func (rf *refusals) unhold(ns, key string, keepDup, keepDiv bool) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	delete(rf.held, [2]string{ns, key})
	if !keepDup {
		delete(rf.dupHeld, [2]string{ns, key})
	}
	if !keepDiv {
		delete(rf.divHeld, [2]string{ns, key})
	}
}

// count counts owner's refusal r at now and returns the owner's attempt
// number on that grant; false when the bound of keys is reached or the
// loop has stopped. pending says whether the refusal is to be noted (it
// was answered from the state) or is in the log already.
func (rf *refusals) count(r *fsm.Result, owner string, now int64, pending bool) (uint64, bool) {
	k := refusalKey{ns: r.Intent.Namespace, key: r.Intent.Key, fence: r.Intent.FencingToken, status: r.Status}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.stopped {
		return 0, false
	}
	rc := rf.counts[k]
	if rc == nil {
		if len(rf.counts) >= rf.cfg.MaxKeys {
			return 0, false
		}
		rc = &refusalCount{seen: map[string]bool{}, attempts: map[string]uint64{}}
		rf.counts[k] = rc
	}
	rf.held[[2]string{k.ns, k.key}] = now
	rc.used = now
	if !pending {
		n := rc.attempts[owner] + 1
		if len(rc.attempts) < maxOwnerAttempts || n > 1 {
			rc.attempts[owner] = n
		}
		return n, true
	}
	if rc.pending == 0 {
		rc.first, rc.owners, rc.moreOwners = now, nil, 0
		clear(rc.seen)
	}
	rc.pending++
	rc.last = now
	rc.owners, rc.moreOwners = addDistinct(rc.owners, rc.seen, rc.moreOwners, owner, fsm.MaxRefusalOwners)
	n, known := rc.attempts[owner]
	if known || len(rc.attempts) < maxOwnerAttempts {
		n++
		rc.attempts[owner] = n
	} else {
		n = rc.pending // an owner past the bound: the key's count stands in
	}
	return n, true
}

// take returns the notes counted since the last call and forgets counts
// idle for a minute.
func (rf *refusals) take(now int64) []fsm.RefusalNote {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	var out []fsm.RefusalNote
	for k, rc := range rf.counts {
		if rc.pending > 0 {
			out = append(out, fsm.RefusalNote{Namespace: k.ns, Key: k.key, Status: k.status, FencingToken: k.fence,
				Count: rc.pending, Owners: rc.owners, MoreOwners: rc.moreOwners, First: rc.first, Last: rc.last})
			rc.pending = 0
			rc.owners = nil
			continue
		}
		if now-rc.used > int64(time.Minute) {
			delete(rf.counts, k)
		}
	}
	forgetIdle(rf.held, now, func(used int64) int64 { return used })
	forgetIdle(rf.dupHeld, now, func(h dupHold) int64 { return h.used })
	forgetIdle(rf.divHeld, now, func(used int64) int64 { return used })
	return out
}

// forgetIdle deletes the keys of held whose entry was last used (as used
// reads it) more than a minute before now.
func forgetIdle[V any](held map[[2]string]V, now int64, used func(V) int64) {
	for k, v := range held {
		if now-used(v) > int64(time.Minute) {
			delete(held, k)
		}
	}
}

// run proposes the counted refusals every Interval until Close, then
// once more.
func (rf *refusals) run(s *Service) {
	defer close(rf.done)
	t := time.NewTicker(rf.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-rf.stop:
			rf.flush(s)
			return
		case <-t.C:
			rf.flush(s)
		}
	}
}

// flush proposes what was counted: refusal notes fsm.MaxRefusalNotes per
// entry, divergent notes fsm.MaxDivergentNotes per entry, then the
// duplicate notes.
func (rf *refusals) flush(s *Service) {
	proposeNotes(s, rf, rf.take(rf.cfg.Now().UnixNano()), fsm.MaxRefusalNotes,
		func(n fsm.RefusalNote) (uint64, string) { return n.Count, n.Key },
		func(batch []fsm.RefusalNote) fsm.Command { return &fsm.NoteRefusals{Node: rf.node, Notes: batch} },
		&rf.noted, &rf.lost, "ledger: refusals answered from the leader's state are missing from their keys' audit trails")
	proposeNotes(s, rf, rf.takeDivergent(), fsm.MaxDivergentNotes,
		func(n fsm.DivergentNote) (uint64, string) { return n.Count, n.Key },
		func(batch []fsm.DivergentNote) fsm.Command { return &fsm.NoteDivergent{Node: rf.node, Notes: batch} },
		&rf.divNoted, &rf.divLost, "ledger: divergent claims answered from the leader's state are missing from their intents' counters and audit trails")
	dups := rf.takeDuplicates()
	for len(dups) > 0 {
		n := min(len(dups), fsm.MaxDuplicateNotes)
		batch := dups[:n]
		dups = dups[n:]
		if rf.sendDuplicates(s, batch) {
			rf.dupNoted.Add(uint64(n))
			continue
		}
		rf.dupLost.Add(uint64(n))
		rf.cfg.Log.Warn("ledger: duplicates answered from the leader's state are missing from their keys' audit trails",
			"notes", n, "first_key", batch[0].Key, "first_namespace", batch[0].Namespace, "first_note", batch[0].Note)
	}
}

// proposeNotes proposes notes, at most perEntry per entry, each entry for at
// most 10 s, and adds the claims they count to noted, or to lost when an
// entry's outcome is not a clean apply. Not retried: a proposal whose
// outcome is unknown may have been applied, and a note has no id to make
// a second copy a no-op.
func proposeNotes[N any](s *Service, rf *refusals, notes []N, perEntry int, count func(N) (uint64, string),
	command func([]N) fsm.Command, noted, lost *atomic.Uint64, lostMsg string) {
	for len(notes) > 0 {
		n := min(len(notes), perEntry)
		batch := notes[:n]
		notes = notes[n:]
		var claims uint64
		for _, note := range batch {
			c, _ := count(note)
			claims += c
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := s.r.Propose(ctx, command(batch))
		cancel()
		rf.entries.Add(1)
		if err != nil || r.Status != fsm.StatusOK {
			lost.Add(claims)
			_, first := count(batch[0])
			rf.cfg.Log.Warn(lostMsg, "claims", claims, "keys", n, "first_key", first, "err", err)
			continue
		}
		noted.Add(claims)
	}
}

// sendDuplicates proposes the leader's duplicate notes (proposeDuplicateNotes),
// for at most 10 s.
func (rf *refusals) sendDuplicates(s *Service, notes []fsm.DuplicateNote) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.proposeDuplicateNotes(ctx, rf.node, notes, func() { rf.entries.Add(1) })
}

// close stops counting, proposes what was counted and stops the loop.
func (rf *refusals) close() {
	rf.mu.Lock()
	if rf.stopped {
		rf.mu.Unlock()
		return
	}
	rf.stopped = true
	rf.mu.Unlock()
	started := true
	rf.loop.Do(func() { started = false })
	if !started {
		return
	}
	close(rf.stop)
	<-rf.done
}
