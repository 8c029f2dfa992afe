package fsm

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"unique"
)

// record is how the ledger stores an intent: the same information as an
// Intent, laid out for a ledger of millions (see DESIGN.md, "Records are
// stored compactly"). Records are immutable like the Intents they stand
// for: every change stores a new record.
//
// What makes it small:
//   - the namespace and the grant's terms (tool, policy, signing key,
//     principal, lease, dedupe window, token lifetime) are canonical handles
//     (package unique), shared by every record with the same values;
//   - the fingerprint is its 32 raw bytes (the hex form is rebuilt on
//     read);
//   - the audit trail is one compact byte string (trailcodec.go) instead
//     of a slice of 152-byte structs;
//   - rarely set fields (approvals, counters, a spent token) live behind
//     one pointer that is nil for most records.
type record struct {
	key     string
	owner   string
	payload []byte // canonical JSON, shared with every materialized Intent
	result  string
	trail   string // the audit trail, encoded by encodeTrail
	ns      unique.Handle[string]
	terms   unique.Handle[grantTerms]
	fp      [32]byte
	x       *recordExtra

	fence, version                                 uint64
	generation                                     uint64
	leaseDeadline, grantedAt, createdAt, updatedAt int64
	state                                          stateCode
	flags                                          uint8
}

// record flags.
const (
	// flagRawFingerprint: the fingerprint is not 64 lowercase hex digits,
	// so it is kept as written in x.fingerprint (fp is zero).
	flagRawFingerprint uint8 = 1 << iota
)

// grantTerms are the fields an intent takes from its policy, the node's
// defaults and the API key that claims it when it is claimed; most
// records share one value (a fleet of agents claims under a few keys).
type grantTerms struct {
	tool, policy, tokenKey              string
	principal                           string
	policyVersion                       uint64
	leaseMS, dedupeWindowMS, tokenTTLMS int64
}

// recordExtra holds the fields most records never set.
type recordExtra struct {
	fingerprint       string // when flagRawFingerprint
	requireApproval   bool
	approvalsRequired int
	approvers         []string
	approvals         []Approval
	tokenUsed         uint64
	duplicates        uint64
	divergent         uint64
	auditDropped      uint64
}

func (x *recordExtra) empty() bool {
	return x.fingerprint == "" && !x.requireApproval && x.approvalsRequired == 0 && len(x.approvers) == 0 &&
		len(x.approvals) == 0 && x.tokenUsed == 0 && x.duplicates == 0 && x.divergent == 0 && x.auditDropped == 0
}

// stateCode is a State as one byte. Values are part of the snapshot
// format: never renumber.
type stateCode uint8

var stateCodes = []State{
	"", StatePendingApproval, StateApproved, StateRejected, StateDeclared,
	StateExecuted, StateFailed, StateCommitted, StateInDoubt,
}

func codeOfState(s State) (stateCode, bool) {
	c := codeOf(stateNames, string(s))
	return stateCode(c), c != codeWritten
}

func (c stateCode) State() State {
	if int(c) < len(stateCodes) {
		return stateCodes[c]
	}
	return ""
}

// namespace returns the record's namespace.
func (r *record) namespace() string { return r.ns.Value() }

// fingerprint returns the record's fingerprint in its hex form.
func (r *record) fingerprint() string {
	if r.flags&flagRawFingerprint != 0 {
		return r.x.fingerprint
	}
	return hex.EncodeToString(r.fp[:])
}

// noExtra is what a record without extras reads as; never written.
var noExtra recordExtra

// extra returns the record's extras, read only.
func (r *record) extra() *recordExtra {
	if r.x == nil {
		return &noExtra
	}
	return r.x
}

// purgeAt is when a finished record may be purged.
func (r *record) purgeAt() int64 {
	return r.updatedAt + r.terms.Value().dedupeWindowMS*1e6
}

// lessRecord orders records by (namespace, key).
func lessRecord(a, b *record) bool {
	if a.ns != b.ns {
		return a.ns.Value() < b.ns.Value()
	}
	return a.key < b.key
}

// probe is a record that only names (ns, key), for B-tree lookups.
func probe(ns, key string) *record {
	return &record{ns: unique.Make(ns), key: key}
}

// parseFingerprint returns the 32 bytes of a 64-digit lowercase hex
// fingerprint, the only form Fingerprint produces (so the hex form read
// back is the string given).
func parseFingerprint(s string) (fp [32]byte, ok bool) {
	if len(s) != 64 || strings.ToLower(s) != s {
		return fp, false
	}
	_, err := hex.Decode(fp[:], stringBytes(s))
	return fp, err == nil
}

// normalize puts w in the one form a record reads back as: empty slices
// and raw values are nil. The ledger stores nothing else, so an Intent
// in a Result is field for field what Get returns afterwards.
func normalize(w *Intent) {
	if len(w.Payload) == 0 {
		w.Payload = nil
	}
	if len(w.Result) == 0 {
		w.Result = nil
	}
	if len(w.Approvers) == 0 {
		w.Approvers = nil
	}
	if len(w.Approvals) == 0 {
		w.Approvals = nil
	}
	if len(w.Audit) == 0 {
		w.Audit = nil
	}
}

// compact returns the record of w, which it normalizes first. It fails
// only for a state it does not know, which the transitions never make.
func compact(w *Intent) (*record, error) {
	normalize(w)
	st, ok := codeOfState(w.State)
	if !ok || w.State == "" {
		return nil, fmt.Errorf("intent %q has state %q", w.Key, w.State)
	}
	r := &record{
		key: w.Key, owner: w.Owner, payload: w.Payload, result: string(w.Result),
		ns: unique.Make(w.Namespace),
		terms: unique.Make(grantTerms{tool: w.Tool, policy: w.Policy, tokenKey: w.TokenKey, principal: w.Principal,
			policyVersion: w.PolicyVersion, leaseMS: w.LeaseMS, dedupeWindowMS: w.DedupeWindowMS, tokenTTLMS: w.TokenTTLMS}),
		fence: w.FencingToken, version: w.Version, generation: w.Generation,
		leaseDeadline: w.LeaseDeadline, grantedAt: w.GrantedAt, createdAt: w.CreatedAt, updatedAt: w.UpdatedAt,
		state: st,
	}
	x := recordExtra{
		requireApproval: w.RequireApproval, approvalsRequired: w.ApprovalsRequired,
		approvers: w.Approvers, approvals: w.Approvals,
		tokenUsed: w.TokenUsed, duplicates: w.Duplicates, divergent: w.Divergent, auditDropped: w.AuditDropped,
	}
	if fp, ok := parseFingerprint(w.Fingerprint); ok {
		r.fp = fp
	} else {
		r.flags |= flagRawFingerprint
		x.fingerprint = w.Fingerprint
	}
	if r.flags&flagRawFingerprint != 0 || !x.empty() {
		stored := x // only records that need extras allocate them
		r.x = &stored
	}
	r.trail = encodeTrail(w.Audit, trailContext{owner: w.Owner, fingerprint: w.Fingerprint, version: w.Version, createdAt: w.CreatedAt})
	return r, nil
}

// intent materializes the record as a new Intent the caller may change
// (its slices are shared and must be copied before they are changed, as
// the transitions do).
func (r *record) intent() *Intent {
	t := r.terms.Value()
	x := r.extra()
	in := &Intent{
		Namespace: r.namespace(), Key: r.key, Tool: t.tool, Fingerprint: r.fingerprint(), Payload: r.payload,
		Owner: r.owner, Principal: t.principal, State: r.state.State(), FencingToken: r.fence, Generation: r.generation,
		LeaseMS: t.leaseMS, LeaseDeadline: r.leaseDeadline, Policy: t.policy, PolicyVersion: t.policyVersion,
		DedupeWindowMS: t.dedupeWindowMS, RequireApproval: x.requireApproval, ApprovalsRequired: x.approvalsRequired,
		Approvers: x.approvers, Approvals: x.approvals, TokenTTLMS: t.tokenTTLMS, TokenUsed: x.tokenUsed,
		GrantedAt: r.grantedAt, TokenKey: t.tokenKey, CreatedAt: r.createdAt, UpdatedAt: r.updatedAt,
		Duplicates: x.duplicates, Divergent: x.divergent, Version: r.version, AuditDropped: x.auditDropped,
	}
	if r.result != "" {
		in.Result = []byte(r.result)
	}
	in.Audit = r.auditTrail(in.Fingerprint)
	return in
}

// auditTrail decodes the record's audit trail. fp is the record's hex
// fingerprint.
func (r *record) auditTrail(fp string) []AuditEvent {
	if r.trail == "" {
		return nil
	}
	evs, err := decodeTrail(r.trail, trailContext{owner: r.owner, fingerprint: fp, version: r.version, createdAt: r.createdAt})
	if err != nil {
		// The trail was encoded by encodeTrail from this record, or
		// checked by decodeTrail when a snapshot was restored.
		panic(fmt.Sprintf("fsm: audit trail of %q: %v", r.key, err))
	}
	return evs
}

// appendUvarint and friends write the compact encodings (trail, snapshot).
func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes the compact encodings; the first error sticks and every
// later read returns zero values.
type reader struct {
	b   []byte
	err error
	// trusted skips the checks of what only this ledger wrote (the UTF-8
	// of texts, the JSON of stored payloads, a record's trail): a record
	// read back from the state store was checked when it was applied or
	// restored.
	trusted bool
}

func (d *reader) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *reader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *reader) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *reader) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// count reads a length or collection size whose elements take at least
// minBytes each, bounded by the bytes left, so a corrupt one fails here.
// A caller preallocates at most maxPrealloc elements and appends the
// rest, so what it allocates grows with the elements actually decoded,
// not with the count claimed.
func (d *reader) count(minBytes int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/minBytes) {
		d.fail("count %d past the end", n)
		return 0
	}
	return int(n)
}

// maxPrealloc bounds the elements a decoder allocates before it has
// decoded them.
const maxPrealloc = 64

// bytes returns the next length-prefixed bytes, aliasing the input.
func (d *reader) bytes() []byte {
	n := d.count(1)
	return d.fixed(n)
}

func (d *reader) string() string { return string(d.bytes()) }

func (d *reader) fixed(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
