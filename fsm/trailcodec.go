package fsm

import (
	"fmt"
	"unsafe"
)

// The audit trail of a record is stored as one compact byte string: a
// grant's event takes about 6 bytes instead of a 152-byte AuditEvent. The
// encoding is part of the snapshot format: never renumber a code. A code
// appended to a table is one an older version does not know (it refuses
// the trail), so it needs a new snapshot version.
//
// Each event is relative to its record (trailContext), which is fixed
// when the trail is encoded: the whole trail is encoded again whenever the
// record changes, so a relative field never outlives what it refers to.
//
//	flags    byte: bits 0-1 owner, 2-3 fingerprint, 4-5 fencing token
//	         (each 0 empty, 1 same as the record's or the event's index,
//	         2 written), bit 6 actor written, bit 7 reason written
//	index    zigzag varint: record version − event index
//	at       zigzag varint: event time − record creation time
//	op, status, state, outcome: one code byte each (0 empty, codeWritten:
//	         the string follows, in this order, after the codes)
//	then the written strings and numbers in the order of the flags.

// trailContext is what the events of one record are relative to.
type trailContext struct {
	owner, fingerprint string
	version            uint64
	createdAt          int64
}

// codeWritten marks a string with no code: it is written out.
const codeWritten = 0xff

var (
	opCodes = []string{"", "claim", "complete", "renew", "commit", "resolve", "approve", "reject", "expire",
		"token.use", "purge", "policy.put", "policy.delete", "key.add", "settings.set"}
	statusCodes = []string{"", string(StatusGranted), string(StatusDuplicate), string(StatusPendingApproval), string(StatusOK),
		string(StatusInFlight), string(StatusInDoubt), string(StatusDivergent), string(StatusFenced), string(StatusRejected),
		string(StatusNotFound), string(StatusInvalidState), string(StatusNotPending), string(StatusExpired), string(StatusPurged),
		string(StatusIgnored), string(StatusBlocked), string(StatusUnknownPolicy), string(StatusTooLarge),
		string(StatusVersionMismatch), string(StatusAlreadyApproved), string(StatusNotAnApprover), string(StatusTokenUsed),
		string(StatusTokenExpired), string(StatusTokenMismatch), string(StatusMalformed)}
	outcomeCodes = []string{"", string(OutcomeExecuted), string(OutcomeFailed)}
	stateNames   = func() []string {
		out := make([]string, len(stateCodes))
		for i, s := range stateCodes {
			out[i] = string(s)
		}
		return out
	}()
)

func codeOf(table []string, s string) byte {
	for i, k := range table {
		if k == s {
			return byte(i)
		}
	}
	return codeWritten
}

// relation is how an event field relates to its record.
const (
	relEmpty   = 0
	relSame    = 1
	relWritten = 2
)

func relate(v, same string) byte {
	switch v {
	case "":
		return relEmpty
	case same:
		return relSame
	}
	return relWritten
}

// stringBytes is a read-only view of s as bytes, for the reader: it
// never writes, and every string it returns is a copy.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// encodeTrail encodes evs relative to ctx.
func encodeTrail(evs []AuditEvent, ctx trailContext) string {
	if len(evs) == 0 {
		return ""
	}
	b := make([]byte, 0, 8*len(evs))
	for i := range evs {
		b = appendEvent(b, &evs[i], ctx)
	}
	return string(b)
}

func appendEvent(b []byte, ev *AuditEvent, ctx trailContext) []byte {
	owner, fp := relate(ev.Owner, ctx.owner), relate(ev.Fingerprint, ctx.fingerprint)
	var fence byte
	switch ev.FencingToken {
	case 0:
		fence = relEmpty
	case ev.Index:
		fence = relSame
	default:
		fence = relWritten
	}
	flags := owner | fp<<2 | fence<<4
	if ev.Actor != "" {
		flags |= 1 << 6
	}
	if ev.Reason != "" {
		flags |= 1 << 7
	}
	b = append(b, flags)
	b = appendVarint(b, int64(ctx.version-ev.Index))
	b = appendVarint(b, ev.At-ctx.createdAt)
	codes := [4]byte{codeOf(opCodes, ev.Op), codeOf(statusCodes, string(ev.Status)), codeOf(stateNames, string(ev.State)),
		codeOf(outcomeCodes, string(ev.Outcome))}
	b = append(b, codes[:]...)
	for i, s := range [4]string{ev.Op, string(ev.Status), string(ev.State), string(ev.Outcome)} {
		if codes[i] == codeWritten {
			b = appendString(b, s)
		}
	}
	if owner == relWritten {
		b = appendString(b, ev.Owner)
	}
	if fp == relWritten {
		b = appendString(b, ev.Fingerprint)
	}
	if fence == relWritten {
		b = appendUvarint(b, ev.FencingToken)
	}
	if ev.Actor != "" {
		b = appendString(b, ev.Actor)
	}
	if ev.Reason != "" {
		b = appendString(b, ev.Reason)
	}
	return b
}

// decodeTrail decodes a trail encoded relative to ctx. It checks
// everything, so it can vet a trail read from a snapshot.
func decodeTrail(trail string, ctx trailContext) ([]AuditEvent, error) {
	d := reader{b: stringBytes(trail)}
	evs := make([]AuditEvent, 0, min(len(trail)/6+1, MaxAuditEvents))
	for len(d.b) > 0 {
		ev, err := d.event(ctx)
		if err != nil {
			return nil, fmt.Errorf("audit event %d: %w", len(evs), err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func (d *reader) event(ctx trailContext) (AuditEvent, error) {
	var ev AuditEvent
	flags := d.byte()
	ev.Index = ctx.version - uint64(d.varint())
	ev.At = ctx.createdAt + d.varint()
	var codes [4]byte
	for i := range codes {
		codes[i] = d.byte()
	}
	var strs [4]string
	for i, table := range [4][]string{opCodes, statusCodes, stateNames, outcomeCodes} {
		switch c := codes[i]; {
		case c == codeWritten:
			strs[i] = d.string()
		case int(c) < len(table):
			strs[i] = table[c]
		default:
			d.fail("code %d out of range", c)
		}
	}
	ev.Op, ev.Status, ev.State, ev.Outcome = strs[0], Status(strs[1]), State(strs[2]), Outcome(strs[3])
	var err error
	if ev.Owner, err = d.related(flags&3, ctx.owner); err != nil {
		return ev, err
	}
	if ev.Fingerprint, err = d.related(flags>>2&3, ctx.fingerprint); err != nil {
		return ev, err
	}
	switch flags >> 4 & 3 {
	case relEmpty:
	case relSame:
		ev.FencingToken = ev.Index
	case relWritten:
		ev.FencingToken = d.uvarint()
	default:
		d.fail("bad fencing token relation")
	}
	if flags&(1<<6) != 0 {
		ev.Actor = d.string()
	}
	if flags&(1<<7) != 0 {
		ev.Reason = d.string()
	}
	return ev, d.err
}

func (d *reader) related(rel byte, same string) (string, error) {
	switch rel {
	case relEmpty:
		return "", d.err
	case relSame:
		return same, d.err
	case relWritten:
		return d.string(), d.err
	}
	d.fail("bad relation %d", rel)
	return "", d.err
}
