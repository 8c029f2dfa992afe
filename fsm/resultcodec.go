package fsm

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The binary encoding of a Result, for a node that proposed a command
// through another (a follower forwards its commands to the leader, which
// answers with the Result its state machine gave): a version byte
// (resultVersion), then
//
//	status, detail, fingerprint (strings), index (uvarint), count (zigzag
//	varint), created (a byte 0 or 1), then a byte of what follows:
//	resultIntent (the intent as a snapshot record, length-prefixed) and
//	resultPolicy (the policy as JSON, length-prefixed), in that order.
//
// The intent travels as the record it is a view of (appendRecord), so the
// receiving node checks it as a restore does (decodeRecord) and reads back
// the Intent the leader's state machine answered with, field for field.
// Nothing of it is stored: it is not part of the log or snapshot formats,
// and a node refuses a version it does not know.

// resultVersion is the first byte of an encoded Result.
const resultVersion byte = 1

// What follows the fixed fields of an encoded Result.
const (
	resultIntent byte = 1 << iota
	resultPolicy
)

// errResultVersion is an encoded Result of a version this node does not
// read.
var errResultVersion = errors.New("unknown result encoding version")

// AppendResult appends the binary encoding of r to b. It fails only for an
// intent a state machine cannot hold (no state), which Apply never
// returns.
func AppendResult(b []byte, r *Result) ([]byte, error) {
	b = append(b, resultVersion)
	b = appendString(b, string(r.Status))
	b = appendString(b, r.Detail)
	b = appendString(b, r.Fingerprint)
	b = appendUvarint(b, r.Index)
	b = appendVarint(b, int64(r.Count))
	b = appendBool(b, r.Created)
	var what byte
	if r.Intent != nil {
		what |= resultIntent
	}
	if r.Policy != nil {
		what |= resultPolicy
	}
	b = append(b, what)
	if r.Intent != nil {
		w := *r.Intent // compact normalizes its argument: leave r alone
		rec, err := compact(&w)
		if err != nil {
			return nil, fmt.Errorf("encode result: %w", err)
		}
		b = appendBytes(b, appendRecord(nil, rec))
	}
	if r.Policy != nil {
		js, err := json.Marshal(r.Policy)
		if err != nil {
			return nil, fmt.Errorf("encode result: policy: %w", err)
		}
		b = appendBytes(b, js)
	}
	return b, nil
}

// DecodeResult decodes what AppendResult wrote. The intent is checked as a
// restored record is; nothing returned aliases data.
func DecodeResult(data []byte) (*Result, error) {
	if len(data) == 0 || data[0] != resultVersion {
		return nil, errResultVersion
	}
	d := reader{b: data[1:]}
	r := &Result{Status: Status(d.text()), Detail: d.text(), Fingerprint: d.text()}
	r.Index = d.uvarint()
	r.Count = int(d.varint())
	r.Created = d.bool()
	what := d.byte()
	if what&^(resultIntent|resultPolicy) != 0 {
		d.fail("unknown parts %#x", what)
	}
	var rec, policy []byte
	if what&resultIntent != 0 {
		rec = d.bytes()
	}
	if what&resultPolicy != 0 {
		policy = d.bytes()
	}
	if d.err != nil {
		return nil, fmt.Errorf("decode result: %w", d.err)
	}
	if len(d.b) != 0 {
		return nil, errors.New("decode result: bytes after the result")
	}
	if what&resultIntent != 0 {
		stored, err := decodeRecord(rec)
		if err != nil {
			return nil, fmt.Errorf("decode result: intent: %w", err)
		}
		r.Intent = stored.intent()
	}
	if what&resultPolicy != 0 {
		r.Policy = &Policy{}
		if err := json.Unmarshal(policy, r.Policy); err != nil {
			return nil, fmt.Errorf("decode result: policy: %w", err)
		}
	}
	return r, nil
}
