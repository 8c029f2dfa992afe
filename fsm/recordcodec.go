package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"unique"
)

// The binary encoding of one record in a snapshot. Fields in order (strings and byte strings are a uvarint length and the bytes;
// signed numbers zigzag varints; unsigned uvarints):
//
//	namespace, key, owner, payload, result, trail
//	tool, policy, token key, policy version, lease ms, dedupe window ms,
//	token ttl ms
//	state (byte), flags (byte), fingerprint (32 bytes, or a string with
//	flagRawFingerprint), principal (a string, only with framePrincipal)
//	fencing token, version, generation, lease deadline, granted at,
//	created at, updated at
//	extra (byte 0 or 1); with 1: require approval (byte), approvals
//	required, approvers (count, strings), approvals (count, then actor,
//	at, reason each), token used, duplicates, divergent, audit dropped
//
// The encoding is deterministic: equal records give equal bytes.
//
// The principal (the API key a grant is bound to) is framed only when it
// is set: a record bound to no key (development mode) spends no byte on
// it. framePrincipal in the flags byte says one follows the fingerprint;
// a decoder refuses any flag it does not know, so a record that needs a
// new field is refused by a version that cannot read it, never restored
// without it.

// framePrincipal is a flag of the frame only (records never hold it): a
// principal follows the fingerprint. It is set exactly when the
// principal is not empty, so a record has one encoding.
const framePrincipal uint8 = 1 << 1

func appendRecord(b []byte, r *record) []byte {
	t := r.terms.Value()
	b = appendString(b, r.namespace())
	b = appendString(b, r.key)
	b = appendString(b, r.owner)
	b = appendBytes(b, r.payload)
	b = appendString(b, r.result)
	b = appendString(b, r.trail)
	b = appendString(b, t.tool)
	b = appendString(b, t.policy)
	b = appendString(b, t.tokenKey)
	b = appendUvarint(b, t.policyVersion)
	b = appendVarint(b, t.leaseMS)
	b = appendVarint(b, t.dedupeWindowMS)
	b = appendVarint(b, t.tokenTTLMS)
	flags := r.flags
	if t.principal != "" {
		flags |= framePrincipal
	}
	b = append(b, byte(r.state), flags)
	if r.flags&flagRawFingerprint != 0 {
		b = appendString(b, r.x.fingerprint)
	} else {
		b = append(b, r.fp[:]...)
	}
	if t.principal != "" {
		b = appendString(b, t.principal)
	}
	b = appendUvarint(b, r.fence)
	b = appendUvarint(b, r.version)
	b = appendUvarint(b, r.generation)
	b = appendVarint(b, r.leaseDeadline)
	b = appendVarint(b, r.grantedAt)
	b = appendVarint(b, r.createdAt)
	b = appendVarint(b, r.updatedAt)
	if r.x == nil {
		return append(b, 0)
	}
	x := r.x
	b = append(b, 1)
	b = appendBool(b, x.requireApproval)
	b = appendVarint(b, int64(x.approvalsRequired))
	b = appendUvarint(b, uint64(len(x.approvers)))
	for _, s := range x.approvers {
		b = appendString(b, s)
	}
	b = appendUvarint(b, uint64(len(x.approvals)))
	for _, ap := range x.approvals {
		b = appendString(b, ap.Actor)
		b = appendVarint(b, ap.At)
		b = appendString(b, ap.Reason)
	}
	b = appendUvarint(b, x.tokenUsed)
	b = appendUvarint(b, x.duplicates)
	b = appendUvarint(b, x.divergent)
	return appendUvarint(b, x.auditDropped)
}

// errTrailing is a record encoding with bytes left over.
var errTrailing = errors.New("bytes after the record")

// decodeRecord decodes one record and checks it: a known state, a
// well-formed audit trail, nothing left over. Everything it returns is
// copied out of data.
func decodeRecord(data []byte) (*record, error) {
	return decodeRecordFrom(reader{b: data})
}

// decodeStored decodes a record the state store holds: one this ledger
// encoded after checking it, so only its framing is checked again.
func decodeStored(data []byte) *record {
	r, err := decodeRecordFrom(reader{b: data, trusted: true})
	if err != nil {
		panic(fmt.Errorf("%w: a stored record does not decode: %w", ErrStoreIO, err))
	}
	return r
}

func decodeRecordFrom(d reader) (*record, error) {
	// Text is checked as UTF-8 and the payload and result as JSON, as the
	// command decoders check them, and the JSON is compacted as apply
	// compacts it: a restored record must be one that apply could have
	// made, or the JSON views of it would fail later.
	ns := d.text()
	r := &record{key: d.text(), owner: d.text()}
	r.payload = bytes.Clone(d.storedJSON())
	r.result = string(d.storedJSON())
	r.trail = d.string()
	var t grantTerms
	t.tool, t.policy, t.tokenKey = d.text(), d.text(), d.text()
	t.policyVersion = d.uvarint()
	t.leaseMS, t.dedupeWindowMS, t.tokenTTLMS = d.varint(), d.varint(), d.varint()
	r.state, r.flags = stateCode(d.byte()), d.byte()
	var x *recordExtra
	if r.flags&flagRawFingerprint != 0 {
		x = &recordExtra{fingerprint: d.text()}
	} else {
		copy(r.fp[:], d.fixed(32))
	}
	if r.flags&framePrincipal != 0 {
		if t.principal = d.text(); t.principal == "" && d.err == nil {
			d.fail("principal flag without a principal")
		}
		r.flags &^= framePrincipal
	}
	r.fence, r.version, r.generation = d.uvarint(), d.uvarint(), d.uvarint()
	r.leaseDeadline, r.grantedAt, r.createdAt, r.updatedAt = d.varint(), d.varint(), d.varint(), d.varint()
	switch d.byte() {
	case 0:
	case 1:
		if x == nil {
			x = &recordExtra{}
		}
		x.requireApproval = d.bool()
		x.approvalsRequired = int(d.varint())
		if n := d.count(1); n > 0 {
			x.approvers = make([]string, 0, min(n, maxPrealloc))
			for range n {
				x.approvers = append(x.approvers, d.text())
			}
		}
		if n := d.count(3); n > 0 {
			x.approvals = make([]Approval, 0, min(n, maxPrealloc))
			for range n {
				x.approvals = append(x.approvals, Approval{Actor: d.text(), At: d.varint(), Reason: d.text()})
			}
		}
		x.tokenUsed, x.duplicates, x.divergent, x.auditDropped = d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
	default:
		d.fail("bad extra marker")
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, errTrailing
	}
	if r.flags&^flagRawFingerprint != 0 {
		return nil, fmt.Errorf("unknown flags %#x", r.flags)
	}
	if st := r.state.State(); st == "" {
		return nil, fmt.Errorf("unknown state code %d", r.state)
	}
	if x != nil && x.empty() && r.flags&flagRawFingerprint == 0 {
		x = nil // the form compact gives
	}
	r.x = x
	r.ns = unique.Make(ns)
	r.terms = unique.Make(t)
	if d.trusted {
		return r, nil
	}
	if err := checkTrail(r.trail, trailContext{owner: r.owner, fingerprint: r.fingerprint(), version: r.version,
		createdAt: r.createdAt}); err != nil {
		return nil, err
	}
	return r, nil
}

// storedJSON reads a payload or result as the ledger stores one: compact
// JSON, as apply leaves it (compactJSON), nil if empty. It aliases the
// input.
func (d *reader) storedJSON() []byte {
	if d.trusted {
		if b := d.bytes(); len(b) > 0 {
			return b
		}
		return nil
	}
	b, err := compactJSON(d.bytes())
	if err != nil {
		d.fail("%w", errNotJSON)
		return nil
	}
	return b
}

// checkTrail decodes a trail without keeping it.
func checkTrail(trail string, ctx trailContext) error {
	d := reader{b: stringBytes(trail)}
	for i := 0; len(d.b) > 0; i++ {
		if _, err := d.event(ctx); err != nil {
			return fmt.Errorf("audit event %d: %w", i, err)
		}
	}
	return nil
}
