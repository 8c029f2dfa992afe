package fsm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The binary command encoding (EncodingBinary). Every replica decodes
// every entry, so the encoding of the commands that are proposed per
// request (claims and the reports and sweeps that follow them) is on the
// critical path of the whole cluster: JSON cost 5.5 µs to decode a claim
// on each replica; this encoding costs a fraction of it and is a third
// shorter in the log. Rare commands (policies, keys, settings) stay JSON.
//
// A body is the command's fields in declaration order: strings and byte
// strings as a uvarint length and the bytes, signed numbers as zigzag
// varints, unsigned ones as uvarints, booleans as one byte 0 or 1. A
// fingerprint is a byte 1 and its 32 bytes when it is 64 lowercase hex
// digits (what Fingerprint makes), else a byte 0 and the string. Nothing
// may follow the last field. The layouts are part of the log format:
// never change one; add a type or an encoding version instead.
//
// EncodingBinary2 is EncodingBinary with the caller appended: a claim's
// principal (a string) after its last field, and a complete's, renew's
// or commit's principal and override (a string and a boolean) after
// theirs. The other types have the same body in both. An EncodingBinary
// entry decodes with an empty principal and no override: a claim bound to
// no key, a report that names none.

// Command encodings: the second byte of every log entry.
const (
	// EncodingJSON is a JSON body: every command type has one.
	EncodingJSON byte = 1
	// EncodingBinary is the binary body of binaryCodec's types.
	EncodingBinary byte = 2
	// EncodingBinary2 is EncodingBinary with the caller of a claim,
	// complete, renew or commit (the API key's principal, and whether it
	// may settle other keys' grants).
	EncodingBinary2 byte = 3
	// MaxEncoding is the newest encoding this version decodes; a node
	// announces it so the leader writes nothing a voter cannot read.
	MaxEncoding = EncodingBinary2
)

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
		TypeExpire, TypePurge, TypeUseToken:
		return true
	}
	return false
}

// text is a string that must be UTF-8: a JSON body cannot carry anything
// else (invalid bytes decode as U+FFFD), so neither may a binary one, and
// the two encodings of a command stay interchangeable.
func (d *reader) text() string {
	b := d.bytes()
	if !utf8.Valid(b) {
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
// empty). Like a JSON body, a binary one carries only valid JSON there.
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

// appendBinary appends cmd's binary body in encoding enc (EncodingBinary
// or EncodingBinary2).
func appendBinary(b []byte, enc byte, cmd Command) []byte {
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
		if enc >= EncodingBinary2 {
			b = appendString(b, c.Principal)
		}
	case *Complete:
		b = appendString(b, c.Namespace)
		b = appendString(b, c.Key)
		b = appendString(b, c.Owner)
		b = appendUvarint(b, c.FencingToken)
		b = appendString(b, string(c.Outcome))
		b = appendBytes(b, c.Result)
		b = appendCaller(b, enc, c.Principal, c.Override)
	case *Renew:
		b = appendString(b, c.Namespace)
		b = appendString(b, c.Key)
		b = appendString(b, c.Owner)
		b = appendUvarint(b, c.FencingToken)
		b = appendVarint(b, c.LeaseMS)
		b = appendCaller(b, enc, c.Principal, c.Override)
	case *Commit:
		b = appendString(b, c.Namespace)
		b = appendString(b, c.Key)
		b = appendString(b, c.Owner)
		b = appendCaller(b, enc, c.Principal, c.Override)
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
	default:
		panic(fmt.Sprintf("fsm: no binary encoding for %T", cmd)) // hasBinary said there is
	}
	return b
}

// appendCaller appends a report's caller in EncodingBinary2 (nothing in
// EncodingBinary, which has no place for it).
func appendCaller(b []byte, enc byte, principal string, override bool) []byte {
	if enc < EncodingBinary2 {
		return b
	}
	return appendBool(appendString(b, principal), override)
}

// caller reads what appendCaller wrote.
func (d *reader) caller(enc byte) (principal string, override bool) {
	if enc < EncodingBinary2 {
		return "", false
	}
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

// decodeBinary fills cmd from a binary body in encoding enc
// (EncodingBinary or EncodingBinary2).
func decodeBinary(body []byte, enc byte, cmd Command) error {
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
		if enc >= EncodingBinary2 {
			c.Principal = d.text()
		}
	case *Complete:
		c.Namespace, c.Key, c.Owner = d.text(), d.text(), d.text()
		c.FencingToken = d.uvarint()
		c.Outcome = Outcome(d.text())
		c.Result = d.rawJSON()
		c.Principal, c.Override = d.caller(enc)
	case *Renew:
		c.Namespace, c.Key, c.Owner = d.text(), d.text(), d.text()
		c.FencingToken = d.uvarint()
		c.LeaseMS = d.varint()
		c.Principal, c.Override = d.caller(enc)
	case *Commit:
		c.Namespace, c.Key, c.Owner = d.text(), d.text(), d.text()
		c.Principal, c.Override = d.caller(enc)
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
