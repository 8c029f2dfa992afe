package fsm

import (
	"errors"
	"fmt"
	"strings"
)

// MaxAuditEvents bounds the audit trail kept per key; older events are
// dropped (and counted in Intent.AuditDropped).
const MaxAuditEvents = 64

// Machine is the replicated state: every intent, indexed by (namespace,
// key), plus secondary indexes the leader's sweeper reads. What grows with
// the ledger (records, the lease and purge indexes, the audit logs) lives
// in a Store; what is bounded by namespaces and policies (counts, usage,
// chain heads, policies, keys, settings) is held here too and written to
// the store at Commit. Reads (Clone among them) may run concurrently with
// each other, not with Apply or Commit; the cluster layer serialises them.
type Machine struct {
	st   Store     // nil in a Clone
	view StoreView // a Clone's view of the store; nil otherwise

	counts map[State]int
	total  int // intents held
	// usage is counts and stored bytes per namespace, kept by put like
	// counts: an index of the records, never snapshotted, rebuilt by
	// Restore (usage.go).
	usage   map[string]*nsUsage
	now     int64  // latest command time applied (never decreases)
	index   uint64 // latest log index applied
	applied uint64 // the log index the store holds the state of (Commit)

	// Policies, signing keys, settings and the heads of the audit logs.
	// policies, ordered and keys are replaced, never changed in place, so
	// a Clone shares them; chains is copied by Clone.
	policies map[string]*Policy // by name; the default only once set
	ordered  []*Policy          // non-default policies in matching order
	keys     []SigningKey       // oldest first
	settings Settings
	chains   map[string]*chain // audit log heads by namespace

	// What changed since the last Commit, to be written with it.
	dirty       map[string]struct{} // namespaces whose usage or chain head changed
	configDirty bool

	scratch []byte // reused to encode audit events and records; never shared by a Clone
}

// deadline tables: the lease index holds declared intents by lease
// deadline, the purge index finished ones by purge time.

const btreeDegree = 32

// New returns an empty ledger in memory.
func New() *Machine {
	l, err := Open(NewMemoryStore())
	if err != nil {
		panic(err) // an empty store always opens
	}
	return l
}

// Open returns the ledger a store holds (an empty store: an empty
// ledger). The store must hold what a Machine committed to it, or
// nothing.
func Open(st Store) (*Machine, error) {
	l := &Machine{
		st:     st,
		counts: make(map[State]int),
		usage:  map[string]*nsUsage{},
		chains: map[string]*chain{},
		dirty:  map[string]struct{}{},
	}
	if err := l.load(); err != nil {
		return nil, err
	}
	return l, nil
}

// reader is what reads see: the store, or a Clone's view of it.
type storeReader interface {
	Get(key []byte) ([]byte, bool)
	Scan(lo, hi []byte, fn func(key, value []byte) bool)
}

func (l *Machine) r() storeReader {
	if l.view != nil {
		return l.view
	}
	return l.st
}

// Clone returns a copy of the ledger as of the last Commit, O(1) in the
// size of the ledger and readable (e.g. encoded into a snapshot) while
// the original keeps applying. A ledger in a MemoryStore forks it, so its
// Clone can apply too; any other Clone is read-only (a view of the
// store). Release it when done. Clones may run concurrently with each
// other and with readers, not with an apply.
func (l *Machine) Clone() *Machine {
	if l.st == nil {
		panic("fsm: Clone of a read-only Clone")
	}
	c := &Machine{
		counts:  make(map[State]int, len(l.counts)),
		total:   l.total,
		usage:   make(map[string]*nsUsage, len(l.usage)),
		now:     l.now,
		index:   l.index,
		applied: l.applied,

		policies: l.policies,
		ordered:  l.ordered,
		keys:     l.keys,
		settings: l.settings,
		chains:   make(map[string]*chain, len(l.chains)),
		dirty:    map[string]struct{}{},
	}
	if m, ok := l.st.(*MemoryStore); ok {
		c.st = m.Fork()
	} else {
		c.view = l.st.View()
	}
	for ns, ch := range l.chains {
		cc := *ch
		c.chains[ns] = &cc
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

// Release frees what a Clone holds; a no-op on the ledger itself.
func (l *Machine) Release() {
	if l.view != nil {
		l.view.Release()
	}
}

// AppliedIndex is the log index of the last applied command.
func (l *Machine) AppliedIndex() uint64 { return l.index }

// StoredIndex is the log index the store held the state of when it was
// opened or last committed (Commit's index): entries up to it are in the
// store and must not be applied again.
func (l *Machine) StoredIndex() uint64 { return l.applied }

// Now is the latest command time applied, in Unix nanoseconds.
func (l *Machine) Now() int64 { return l.now }

// Len is the number of intents.
func (l *Machine) Len() int { return l.total }

// Counts returns the number of intents in each state.
func (l *Machine) Counts() map[State]int {
	out := make(map[State]int, len(States))
	for _, s := range States {
		out[s] = l.counts[s]
	}
	return out
}

// Get returns the intent or nil. The Intent is the caller's: a new
// value built from the stored record.
func (l *Machine) Get(ns, key string) *Intent {
	if r := l.get(ns, key); r != nil {
		return r.intent()
	}
	return nil
}

// get returns the stored record or nil.
func (l *Machine) get(ns, key string) *record {
	v, ok := l.r().Get(recordKey(nil, ns, key))
	if !ok {
		return nil
	}
	return decodeStored(v)
}

// ascend calls fn with the records from (ns, from) on, in key order,
// until fn returns false or the namespace ends.
func (l *Machine) ascend(ns, from string, fn func(*record) bool) {
	p := recordPrefix(nil, ns)
	lo := append(append([]byte(nil), p...), from...)
	l.r().Scan(lo, prefixEnd(p), func(_, v []byte) bool { return fn(decodeStored(v)) })
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
	l.ascend(opts.Namespace, start, func(r *record) bool {
		if !strings.HasPrefix(r.key, opts.Prefix) {
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
	return l.due(tableLease, now, max)
}

// DuePurges returns up to max finished intents whose dedupe window has
// passed at now.
func (l *Machine) DuePurges(now int64, max int) []Ref {
	return l.due(tablePurge, now+1, max)
}

func (l *Machine) due(table byte, before int64, max int) []Ref {
	var out []Ref
	if before <= 0 || max <= 0 {
		return nil
	}
	l.r().Scan([]byte{table}, deadlineBound(table, before), func(k, _ []byte) bool {
		ref, err := parseDeadlineKey(k)
		if err != nil {
			panic(fmt.Errorf("%w: %w", ErrStoreIO, err))
		}
		out = append(out, ref)
		return len(out) < max
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
		l.total--
		l.account(prev, -1)
		if st == StateDeclared {
			l.st.Delete(deadlineKey(l.scratch[:0], tableLease, prev.leaseDeadline, prev.namespace(), prev.key))
		}
		if st.Finished() {
			l.st.Delete(deadlineKey(l.scratch[:0], tablePurge, prev.purgeAt(), prev.namespace(), prev.key))
		}
	}
	if next == nil {
		if prev != nil {
			l.st.Delete(recordKey(l.scratch[:0], prev.namespace(), prev.key))
		}
		return
	}
	st := next.state.State()
	l.counts[st]++
	l.total++
	l.account(next, +1)
	ns := next.namespace()
	if st == StateDeclared {
		l.st.Set(deadlineKey(l.scratch[:0], tableLease, next.leaseDeadline, ns, next.key), nil)
	}
	if st.Finished() {
		l.st.Set(deadlineKey(l.scratch[:0], tablePurge, next.purgeAt(), ns, next.key), nil)
	}
	k := recordKey(l.scratch[:0], ns, next.key)
	n := len(k)
	b := appendRecord(k, next)
	l.st.Set(b[:n], b[n:])
	l.scratch = b[:0]
}
