package fsm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The log entry encoding, version 1: a type byte, the version byte
// EncodingVersion, and the command's body.
//
// The commands proposed per request (claims and the reports, decisions
// and sweeps that follow them, token use) have a binary body: every
// replica decodes every entry, so their decoding is on the critical path
// of the whole cluster, and JSON cost 5.5 µs per claim on each replica
// where this costs under 1 µs and is a third shorter in the log. The rare
// commands (policies, signing keys, settings) have a JSON body, read by
// encoding/json into the command's struct: their json field names are
// part of the format, and since encoding/json skips a field it does not
// know, a field cannot be added to them either (a replica that skipped it
// would apply another command than its peers).
//
// A binary body is the command's fields in declaration order: strings and
// byte strings as a uvarint length and the bytes, signed numbers as zigzag
// varints, unsigned ones as uvarints, booleans as one byte 0 or 1. A
// fingerprint is a byte 1 and its 32 bytes when it is 64 lowercase hex
// digits (what Fingerprint makes), else a byte 0 and the string. Nothing
// may follow the last field: a decoder refuses trailing bytes, so a layout
// cannot grow a field. Never change one; a change is a new type or a new
// version.

// EncodingVersion is the second byte of every log entry: the version of
// the encoding of its body, the only one this version writes and reads.
// Decode refuses an entry of another version (ErrBadVersion) and Apply
// stops the replica on it, as on an unknown type: a replica that skipped
// it would diverge. Nodes announce it in gossip (cluster), so a future
// version can wait until every server reads its entries before it writes
// them.
const EncodingVersion byte = 1

var (
	// errTrailingCommand is a binary body with bytes after its last field.
	errTrailingCommand = errors.New("bytes after the command")
	// errNotJSON is a payload or result that is not a JSON value.
	errNotJSON = errors.New("raw value is not JSON")
)

// rawJSONOf is the raw JSON value a command carries, if any.
func rawJSONOf(cmd Command) []byte {
	switch c := cmd.(type) {
	case *Claim:
		return c.Payload
	case *Complete:
		return c.Result
	case *Resolve:
		return c.Result
	}
	return nil
}

// hasBinary reports whether t has a binary encoding.
func hasBinary(t CommandType) bool {
	switch t {
	case TypeClaim, TypeComplete, TypeRenew, TypeCommit, TypeResolve, TypeApprove, TypeReject,
		TypeExpire, TypePurge, TypeUseToken, TypeNoteDuplicates, TypeNoteRefusals, TypeNoteDivergent:
		return true
	}
	return false
}

// text is a string that must be UTF-8: what it becomes (an owner, a key,
// an actor) is shown as JSON (the API, the audit log), which cannot carry
// anything else, so an entry that holds other bytes is malformed.
func (d *reader) text() string {
	b := d.bytes()
	if !d.trusted && !utf8.Valid(b) {
		d.fail("string is not UTF-8")
		return ""
	}
	return string(b)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func (d *reader) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad boolean")
	return false
}

func appendFingerprint(b []byte, fp string) []byte {
	if raw, ok := parseFingerprint(fp); ok {
		return append(append(b, 1), raw[:]...)
	}
	return appendString(append(b, 0), fp)
}

func (d *reader) fingerprint() string {
	switch d.byte() {
	case 0:
		return d.text()
	case 1:
		return hex.EncodeToString(d.fixed(32))
	}
	d.fail("bad fingerprint marker")
	return ""
}

func appendRefs(b []byte, refs []Ref) []byte {
	b = appendUvarint(b, uint64(len(refs)))
	for _, r := range refs {
		b = appendString(appendString(b, r.Namespace), r.Key)
	}
	return b
}

func (d *reader) refs() []Ref {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	out := make([]Ref, 0, min(n, maxPrealloc))
	for range n {
		out = append(out, Ref{Namespace: d.text(), Key: d.text()})
	}
	return out
}

// rawJSON returns the next byte string as a raw JSON value (nil if
// empty): a payload or result is JSON or the entry is malformed.
func (d *reader) rawJSON() []byte {
	b := d.bytes()
	if len(b) == 0 {
		return nil
	}
	if !json.Valid(b) {
		d.fail("%w", errNotJSON)
		return nil
	}
	return bytes.Clone(b)
}

// appendBinary appends cmd's binary body.
func appendBinary(b []byte, cmd Command) []byte {
	b = appendVarint(b, cmd.header().At)
	switch c := cmd.(type) {
	case *Claim:
		b = appendString(b, c.Namespace)
		b = appendString(b, c.Key)
		b = appendString(b, c.Tool)
		b = appendString(b, c.Owner)
		b = appendBytes(b, c.Payload)
		b = appendFingerprint(b, c.Fingerprint)
		b = appendString(b, c.Policy)
		b = appendVarint(b, c.LeaseMS)
		b = appendVarint(b, c.DefaultLeaseMS)
		b = appendVarint(b, c.DedupeWindowMS)
		b = appendBool(b, c.RequireApproval)
		b = appendString(b, c.Principal)
	case *Complete:
		b = appendString(b, c.Namespace)
		b = appendString(b, c.Key)
		b = appendString(b, c.Owner)
		b = appendUvarint(b, c.FencingToken)
		b = appendString(b, string(c.Outcome))
		b = appendBytes(b, c.Result)
		b = appendCaller(b, c.Principal, c.Override)
	case *Renew:
		b = appendString(b, c.Namespace)
		b = appendString(b, c.Key)
		b = appendString(b, c.Owner)
		b = appendUvarint(b, c.FencingToken)
		b = appendVarint(b, c.LeaseMS)
		b = appendCaller(b, c.Principal, c.Override)
	case *Commit:
		b = appendString(b, c.Namespace)
		b = appendString(b, c.Key)
		b = appendString(b, c.Owner)
		b = appendCaller(b, c.Principal, c.Override)
	case *Resolve:
		b = appendString(b, c.Namespace)
		b = appendString(b, c.Key)
		b = appendString(b, string(c.Outcome))
		b = appendBytes(b, c.Result)
		b = appendString(b, c.Actor)
		b = appendString(b, c.Reason)
	case *Approve:
		b = appendDecision(b, c.Namespace, c.Key, c.Actor, c.Reason, c.Fingerprint)
	case *Reject:
		b = appendDecision(b, c.Namespace, c.Key, c.Actor, c.Reason, c.Fingerprint)
	case *Expire:
		b = appendRefs(b, c.Keys)
	case *Purge:
		b = appendRefs(b, c.Keys)
	case *UseToken:
		b = appendString(b, c.Namespace)
		b = appendString(b, c.Key)
		b = appendString(b, c.Owner)
		b = appendUvarint(b, c.FencingToken)
		b = appendFingerprint(b, c.Fingerprint)
		b = appendString(b, c.Presented)
		b = appendVarint(b, c.Expires)
		b = appendString(b, c.Actor)
	case *NoteDuplicates:
		b = appendString(b, c.Node)
		b = appendUvarint(b, uint64(len(c.Notes)))
		for _, n := range c.Notes {
			b = appendString(b, n.Namespace)
			b = appendString(b, n.Key)
			b = appendString(b, n.Owner)
			b = appendFingerprint(b, n.Fingerprint)
			b = appendUvarint(b, n.FencingToken)
			b = appendString(b, n.Note)
			b = appendVarint(b, n.AnsweredAt)
		}
	case *NoteRefusals:
		b = appendString(b, c.Node)
		b = appendUvarint(b, uint64(len(c.Notes)))
		for _, n := range c.Notes {
			b = appendString(b, n.Namespace)
			b = appendString(b, n.Key)
			b = appendString(b, string(n.Status))
			b = appendUvarint(b, n.FencingToken)
			b = appendUvarint(b, n.Count)
			b = appendUvarint(b, uint64(len(n.Owners)))
			for _, o := range n.Owners {
				b = appendString(b, o)
			}
			b = appendUvarint(b, n.MoreOwners)
			b = appendVarint(b, n.First)
			b = appendVarint(b, n.Last)
		}
	case *NoteDivergent:
		b = appendString(b, c.Node)
		b = appendUvarint(b, uint64(len(c.Notes)))
		for _, n := range c.Notes {
			b = appendString(b, n.Namespace)
			b = appendString(b, n.Key)
			b = appendFingerprint(b, n.Fingerprint)
			b = appendUvarint(b, n.FencingToken)
			b = appendVarint(b, n.CreatedAt)
			b = appendUvarint(b, n.Count)
			b = appendStrings(b, n.Owners)
			b = appendUvarint(b, n.MoreOwners)
			b = appendUvarint(b, uint64(len(n.Fingerprints)))
			for _, fp := range n.Fingerprints {
				b = appendFingerprint(b, fp)
			}
			b = appendUvarint(b, n.MoreFingerprints)
			b = appendVarint(b, n.First)
			b = appendVarint(b, n.Last)
		}
	default:
		panic(fmt.Sprintf("fsm: no binary encoding for %T", cmd)) // hasBinary said there is
	}
	return b
}

// appendStrings appends a count and the strings.
func appendStrings(b []byte, ss []string) []byte {
	b = appendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// strings reads what appendStrings wrote (nil for none).
func (d *reader) strings() []string {
	k := d.count(1)
	if k == 0 {
		return nil
	}
	out := make([]string, 0, min(k, maxPrealloc))
	for range k {
		out = append(out, d.text())
	}
	return out
}

// appendCaller appends a report's caller: its principal and override.
func appendCaller(b []byte, principal string, override bool) []byte {
	return appendBool(appendString(b, principal), override)
}

// caller reads what appendCaller wrote.
func (d *reader) caller() (principal string, override bool) {
	return d.text(), d.bool()
}

func appendDecision(b []byte, ns, key, actor, reason, fp string) []byte {
	b = appendString(b, ns)
	b = appendString(b, key)
	b = appendString(b, actor)
	b = appendString(b, reason)
	// An empty fingerprint (the decider did not bind one) stays empty.
	if fp == "" {
		return append(b, 2)
	}
	return appendFingerprint(b, fp)
}

// decision reads what appendDecision wrote.
func (d *reader) decision() (ns, key, actor, reason, fp string) {
	ns, key, actor, reason = d.text(), d.text(), d.text(), d.text()
	if len(d.b) > 0 && d.b[0] == 2 {
		d.b = d.b[1:]
		return ns, key, actor, reason, ""
	}
	return ns, key, actor, reason, d.fingerprint()
}

// decodeBinary fills cmd from its binary body.
func decodeBinary(body []byte, cmd Command) error {
	d := reader{b: body}
	cmd.header().At = d.varint()
	switch c := cmd.(type) {
	case *Claim:
		c.Namespace, c.Key, c.Tool, c.Owner = d.text(), d.text(), d.text(), d.text()
		c.Payload = d.rawJSON()
		c.Fingerprint = d.fingerprint()
		c.Policy = d.text()
		c.LeaseMS, c.DefaultLeaseMS, c.DedupeWindowMS = d.varint(), d.varint(), d.varint()
		c.RequireApproval = d.bool()
		c.Principal = d.text()
	case *Complete:
		c.Namespace, c.Key, c.Owner = d.text(), d.text(), d.text()
		c.FencingToken = d.uvarint()
		c.Outcome = Outcome(d.text())
		c.Result = d.rawJSON()
		c.Principal, c.Override = d.caller()
	case *Renew:
		c.Namespace, c.Key, c.Owner = d.text(), d.text(), d.text()
		c.FencingToken = d.uvarint()
		c.LeaseMS = d.varint()
		c.Principal, c.Override = d.caller()
	case *Commit:
		c.Namespace, c.Key, c.Owner = d.text(), d.text(), d.text()
		c.Principal, c.Override = d.caller()
	case *Resolve:
		c.Namespace, c.Key = d.text(), d.text()
		c.Outcome = Outcome(d.text())
		c.Result = d.rawJSON()
		c.Actor, c.Reason = d.text(), d.text()
	case *Approve:
		c.Namespace, c.Key, c.Actor, c.Reason, c.Fingerprint = d.decision()
	case *Reject:
		c.Namespace, c.Key, c.Actor, c.Reason, c.Fingerprint = d.decision()
	case *Expire:
		c.Keys = d.refs()
	case *Purge:
		c.Keys = d.refs()
	case *UseToken:
		c.Namespace, c.Key, c.Owner = d.text(), d.text(), d.text()
		c.FencingToken = d.uvarint()
		c.Fingerprint = d.fingerprint()
		c.Presented = d.text()
		c.Expires = d.varint()
		c.Actor = d.text()
	case *NoteDuplicates:
		c.Node = d.text()
		if n := d.count(7); n > 0 {
			c.Notes = make([]DuplicateNote, 0, min(n, maxPrealloc))
			for range n {
				c.Notes = append(c.Notes, DuplicateNote{Namespace: d.text(), Key: d.text(), Owner: d.text(),
					Fingerprint: d.fingerprint(), FencingToken: d.uvarint(), Note: d.text(), AnsweredAt: d.varint()})
			}
		}
	case *NoteRefusals:
		c.Node = d.text()
		if n := d.count(9); n > 0 {
			c.Notes = make([]RefusalNote, 0, min(n, maxPrealloc))
			for range n {
				note := RefusalNote{Namespace: d.text(), Key: d.text(), Status: Status(d.text()),
					FencingToken: d.uvarint(), Count: d.uvarint()}
				if k := d.count(1); k > 0 {
					note.Owners = make([]string, 0, min(k, maxPrealloc))
					for range k {
						note.Owners = append(note.Owners, d.text())
					}
				}
				note.MoreOwners, note.First, note.Last = d.uvarint(), d.varint(), d.varint()
				c.Notes = append(c.Notes, note)
			}
		}
	case *NoteDivergent:
		c.Node = d.text()
		if n := d.count(13); n > 0 {
			c.Notes = make([]DivergentNote, 0, min(n, maxPrealloc))
			for range n {
				note := DivergentNote{Namespace: d.text(), Key: d.text(), Fingerprint: d.fingerprint(),
					FencingToken: d.uvarint(), CreatedAt: d.varint(), Count: d.uvarint()}
				note.Owners = d.strings()
				note.MoreOwners = d.uvarint()
				if k := d.count(2); k > 0 {
					note.Fingerprints = make([]string, 0, min(k, maxPrealloc))
					for range k {
						note.Fingerprints = append(note.Fingerprints, d.fingerprint())
					}
				}
				note.MoreFingerprints, note.First, note.Last = d.uvarint(), d.varint(), d.varint()
				c.Notes = append(c.Notes, note)
			}
		}
	default:
		return fmt.Errorf("no binary encoding for type %d", cmd.Type())
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return errTrailingCommand
	}
	return nil
}
