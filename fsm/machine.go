package fsm

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/btree"
)

// MaxAuditEvents bounds the audit trail kept per key; older events are
// dropped (and counted in Intent.AuditDropped).
const MaxAuditEvents = 64

// Machine is the replicated state: every intent, indexed by (namespace,
// key), plus secondary indexes the leader's sweeper reads. Reads (Clone
// among them) may run concurrently with each other, not with Apply; the
// cluster layer serialises Apply against reads.
type Machine struct {
	intents *btree.BTreeG[*record]
	leases  *btree.BTreeG[deadline] // declared intents by lease deadline
	purges  *btree.BTreeG[deadline] // finished intents by purge time
	counts  map[State]int
	// usage is counts and stored bytes per namespace, kept by put like
	// counts: an index of the records, never snapshotted, rebuilt by
	// Restore (usage.go).
	usage map[string]*nsUsage
	now   int64  // latest command time applied (never decreases)
	index uint64 // latest log index applied

	// Policies, signing keys, settings and audit logs. policies, ordered
	// and keys are replaced, never changed in place, so a Clone shares
	// them; chains is copied by Clone (each chain over a copy-on-write
	// tree) and changed in place.
	policies map[string]*Policy // by name; the default only once set
	ordered  []*Policy          // non-default policies in matching order
	keys     []SigningKey       // oldest first
	settings Settings
	chains   map[string]*chain // audit logs by namespace

	scratch []byte // reused to encode audit events; never shared by a Clone

	// cloneMu serialises Clone: a B-tree's Clone writes the copy-on-write
	// bookkeeping of the tree it copies, so two Clones under a shared read
	// lock (raft's snapshot and a backup, two backups) would race.
	cloneMu sync.Mutex
}

// deadline is an index entry: a time and the record it is due for,
// ordered by time, then (namespace, key). The record is the one stored
// when the entry was made; put replaces the entry with the record.
type deadline struct {
	at int64
	r  *record
}

func lessDeadline(a, b deadline) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.r == nil || b.r == nil {
		return a.r == nil && b.r != nil // a bare time sorts before its records
	}
	return lessRecord(a.r, b.r)
}

const btreeDegree = 32

// New returns an empty ledger.
func New() *Machine {
	return &Machine{
		intents: btree.NewG(btreeDegree, lessRecord),
		leases:  btree.NewG(btreeDegree, lessDeadline),
		purges:  btree.NewG(btreeDegree, lessDeadline),
		counts:  make(map[State]int),
		usage:   map[string]*nsUsage{},
		chains:  map[string]*chain{},
	}
}

// Clone returns a copy of the ledger that shares structure copy-on-write;
// it costs O(1) and the copy can be read (e.g. encoded into a snapshot)
// while the original keeps applying. Clones may run concurrently with each
// other and with readers, not with an apply.
func (l *Machine) Clone() *Machine {
	l.cloneMu.Lock()
	defer l.cloneMu.Unlock()
	c := &Machine{
		intents: l.intents.Clone(),
		leases:  l.leases.Clone(),
		purges:  l.purges.Clone(),
		counts:  make(map[State]int, len(l.counts)),
		usage:   make(map[string]*nsUsage, len(l.usage)),
		now:     l.now,
		index:   l.index,

		policies: l.policies,
		ordered:  l.ordered,
		keys:     l.keys,
		settings: l.settings,
		chains:   make(map[string]*chain, len(l.chains)),
	}
	for ns, ch := range l.chains {
		c.chains[ns] = ch.clone()
	}
	for k, v := range l.counts {
		c.counts[k] = v
	}
	for ns, u := range l.usage {
		cu := *u
		c.usage[ns] = &cu
	}
	return c
}

// AppliedIndex is the log index of the last applied command.
func (l *Machine) AppliedIndex() uint64 { return l.index }

// Now is the latest command time applied, in Unix nanoseconds.
func (l *Machine) Now() int64 { return l.now }

// Len is the number of intents.
func (l *Machine) Len() int { return l.intents.Len() }

// Counts returns the number of intents in each state.
func (l *Machine) Counts() map[State]int {
	out := make(map[State]int, len(States))
	for _, s := range States {
		out[s] = l.counts[s]
	}
	return out
}

// Get returns the intent or nil. The Intent is the caller's: a new
// value built from the stored record (it shares the payload and other
// slices with the ledger, which must not be modified).
func (l *Machine) Get(ns, key string) *Intent {
	if r := l.get(ns, key); r != nil {
		return r.intent()
	}
	return nil
}

// get returns the stored record or nil.
func (l *Machine) get(ns, key string) *record {
	r, _ := l.intents.Get(probe(ns, key))
	return r
}

// ListOptions filters a List.
type ListOptions struct {
	Namespace string
	Prefix    string
	State     State // empty: any
	After     string
	Limit     int
}

// List returns up to opts.Limit intents of the namespace in key order whose
// key has the prefix and is greater than After, and the last key returned
// when more may follow (a cursor for the next page), else "".
func (l *Machine) List(opts ListOptions) (page []*Intent, next string) {
	start := opts.Prefix
	if opts.After > start {
		start = opts.After
	}
	if opts.Limit <= 0 {
		opts.Limit = 100
	}
	from := probe(opts.Namespace, start)
	l.intents.AscendGreaterOrEqual(from, func(r *record) bool {
		if r.ns != from.ns || !strings.HasPrefix(r.key, opts.Prefix) {
			return false
		}
		if r.key == opts.After {
			return true
		}
		if opts.State != "" && r.state.State() != opts.State {
			return true
		}
		if len(page) == opts.Limit {
			next = page[len(page)-1].Key
			return false
		}
		page = append(page, r.intent())
		return true
	})
	return page, next
}

// DueLeases returns up to max declared intents whose lease deadline is
// before now.
func (l *Machine) DueLeases(now int64, max int) []Ref {
	return due(l.leases, now, max)
}

// DuePurges returns up to max finished intents whose dedupe window has
// passed at now.
func (l *Machine) DuePurges(now int64, max int) []Ref {
	return due(l.purges, now+1, max)
}

func due(t *btree.BTreeG[deadline], before int64, max int) []Ref {
	var out []Ref
	t.AscendLessThan(deadline{at: before}, func(d deadline) bool {
		if len(out) == max {
			return false
		}
		out = append(out, Ref{Namespace: d.r.namespace(), Key: d.r.key})
		return true
	})
	return out
}

// Apply applies one log entry at index. A malformed entry of a known type
// is refused deterministically (every replica refuses it); an unknown
// command type that is not marked ignorable, or an entry of an encoding
// version other than EncodingVersion, panics, because a replica that
// skipped it would silently diverge from the others. An unknown type marked
// ignorable is recorded as ignored.
func (l *Machine) Apply(index uint64, data []byte) *Result {
	cmd, err := Decode(data)
	switch {
	case errors.Is(err, ErrUnknownCommand), errors.Is(err, ErrBadVersion):
		panic(fmt.Sprintf("fsm: cannot apply log entry %d: %v (upgrade this node)", index, err))
	case errors.Is(err, ErrIgnorableCommand):
		l.index = index
		return &Result{Status: StatusIgnored, Index: index, Detail: err.Error()}
	case err != nil:
		l.index = index
		return &Result{Status: StatusMalformed, Index: index, Detail: err.Error()}
	}
	return l.ApplyCommand(index, cmd)
}

// ApplyCommand applies a decoded command at index.
func (l *Machine) ApplyCommand(index uint64, cmd Command) *Result {
	if at := cmd.header().At; at < 0 || at > MaxSnapshotTime {
		// A time no snapshot could hold: applied, the ledger would write
		// snapshots no replica can restore.
		l.index = index
		return &Result{Index: index, Status: StatusMalformed,
			Detail: fmt.Sprintf("command time %d is outside 0..%d (the year 2200)", at, MaxSnapshotTime)}
	} else if at > l.now {
		l.now = at
	}
	l.index = index
	a := applier{l: l, index: index, now: l.now}
	var r *Result
	switch c := cmd.(type) {
	case *Claim:
		r = a.claim(c)
	case *Complete:
		r = a.complete(c)
	case *Renew:
		r = a.renew(c)
	case *Commit:
		r = a.commit(c)
	case *Resolve:
		r = a.resolve(c)
	case *Approve:
		r = a.approve(c)
	case *Reject:
		r = a.reject(c)
	case *PutPolicy:
		r = a.putPolicy(c)
	case *DeletePolicy:
		r = a.deletePolicy(c)
	case *AddSigningKey:
		r = a.addSigningKey(c)
	case *UseToken:
		r = a.useToken(c)
	case *SetSettings:
		r = a.setSettings(c)
	case *NoteDuplicates:
		r = a.noteDuplicates(c)
	case *NoteRefusals:
		r = a.noteRefusals(c)
	case *NoteDivergent:
		r = a.noteDivergent(c)
	case *Expire:
		r = a.expire(c)
	case *Purge:
		r = a.purge(c)
	default:
		panic(fmt.Sprintf("fsm: no apply for %T", cmd))
	}
	r.Index = index
	return r
}

// put stores next in place of prev (either may be nil) and keeps the
// secondary indexes and counts in step.
func (l *Machine) put(prev, next *record) {
	if prev != nil {
		st := prev.state.State()
		l.counts[st]--
		l.account(prev, -1)
		if st == StateDeclared {
			l.leases.Delete(deadline{prev.leaseDeadline, prev})
		}
		if st.Finished() {
			l.purges.Delete(deadline{prev.purgeAt(), prev})
		}
	}
	if next == nil {
		if prev != nil {
			l.intents.Delete(prev)
		}
		return
	}
	st := next.state.State()
	l.counts[st]++
	l.account(next, +1)
	if st == StateDeclared {
		l.leases.ReplaceOrInsert(deadline{next.leaseDeadline, next})
	}
	if st.Finished() {
		l.purges.ReplaceOrInsert(deadline{next.purgeAt(), next})
	}
	l.intents.ReplaceOrInsert(next)
}
