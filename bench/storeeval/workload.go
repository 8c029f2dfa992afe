// Package storeeval models the state machine's apply workload on embedded
// storage engines (issue 32): the writes and reads a claim, a complete and a
// purge make, in the batches raft delivers them, with no fsync of their own.
// It measures each engine beside today's in-memory fsm.Machine fed the same
// commands, and reports what docs/performance.md ("Choosing the storage
// engine for the state machine") tabulates.
//
// The records are the fsm's own: the record frames of a snapshot
// (fsm.WriteSnapshot) taken after a real claim and a real complete, with
// the key, owner, payload, result and fingerprint of each intent written
// over the template's, so every value has the size and entropy of a real
// record. The namespace audit chain events are taken the same way.
package storeeval

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// Workload sizes, as in issue 32's measurement: a 200-byte payload and a
// 100-byte result, a 32-byte key, one namespace, owners from 1,000 agents
// under one API key.
const (
	Namespace    = "default"
	Tool         = "bench.tool"
	Principal    = "team-a"
	KeyBytes     = 32
	PayloadBytes = 200
	ResultBytes  = 100
	LeaseMS      = 30_000
	agents       = 1000

	// ChainRetention is fsm.DefaultAuditRetention: the namespace audit
	// chain keeps its last 100,000 events, dropping the oldest.
	ChainRetention = fsm.DefaultAuditRetention
)

// Base is the command time of the first entry.
var Base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// hexOf returns n hex digits derived from (tag, i): unique per intent and
// in no order, as agents' idempotency keys and payloads are.
func hexOf(tag string, i int, n int) string {
	var out []byte
	for c := 0; len(out) < n; c++ {
		s := sha256.Sum256(fmt.Appendf(nil, "%s/%d/%d", tag, i, c))
		out = hex.AppendEncode(out, s[:])
	}
	return string(out[:n])
}

// Key is intent i's key: "call/" and 27 hex digits, in no order.
func Key(i int) string { return "call/" + hexOf("key", i, KeyBytes-5) }

// Payload is intent i's canonical payload (PayloadBytes).
func Payload(i int) []byte {
	return []byte(`{"d":"` + hexOf("payload", i, PayloadBytes-8) + `"}`)
}

// Result is intent i's result (ResultBytes).
func Result(i int) []byte {
	return []byte(`{"d":"` + hexOf("result", i, ResultBytes-18) + `","ok":true}`)
}

// Owner is intent i's owner.
func Owner(i int) string { return fmt.Sprintf("agent/host/%08d", i%agents) }

// ClaimEntry is the log entry of intent i's claim at time at.
func ClaimEntry(i int, at, windowMS int64) ([]byte, error) {
	canonical, fp, err := fsm.Fingerprint(Tool, Payload(i))
	if err != nil {
		return nil, fmt.Errorf("fingerprint: %w", err)
	}
	return fsm.Encode(at, &fsm.Claim{Namespace: Namespace, Key: Key(i), Tool: Tool, Owner: Owner(i),
		Payload: canonical, Fingerprint: fp, LeaseMS: LeaseMS, DedupeWindowMS: windowMS, Principal: Principal})
}

// CompleteEntry is the log entry completing intent i, granted at index fence.
func CompleteEntry(i int, fence uint64, at int64) ([]byte, error) {
	return fsm.Encode(at, &fsm.Complete{Namespace: Namespace, Key: Key(i), Owner: Owner(i), FencingToken: fence,
		Outcome: fsm.OutcomeExecuted, Result: Result(i), Principal: Principal})
}

// Templates are real encodings taken from fsm, with the offsets where one
// intent's fields are written over them.
type Templates struct {
	Declared, Executed []byte // record frames after the claim, after the complete
	ClaimEvent         []byte // chain event (hash and body) of the claim
	CompleteEvent      []byte
	PurgeEvent         []byte

	declared, executed       fieldOffsets
	claimEv, completeEv, pEv fieldOffsets
}

// fieldOffsets are where a template holds intent 0's key, owner, payload
// and result digits and fingerprint (-1: absent).
type fieldOffsets struct{ key, owner, payload, result, fp, fpHex int }

// NewTemplates applies intent 0's claim, complete and purge to an fsm.Machine
// and keeps the record frames of its snapshots and the chain events.
func NewTemplates() (*Templates, error) {
	const window = 1000
	m := fsm.New()
	claim, err := ClaimEntry(0, Base, window)
	if err != nil {
		return nil, err
	}
	if r := m.Apply(1, claim); r.Status != fsm.StatusGranted {
		return nil, fmt.Errorf("template claim: %s %s", r.Status, r.Detail)
	}
	t := &Templates{}
	if t.Declared, err = onlyFrame(m); err != nil {
		return nil, err
	}
	complete, err := CompleteEntry(0, 1, Base+1e6)
	if err != nil {
		return nil, err
	}
	if r := m.Apply(2, complete); r.Status != fsm.StatusOK {
		return nil, fmt.Errorf("template complete: %s %s", r.Status, r.Detail)
	}
	if t.Executed, err = onlyFrame(m); err != nil {
		return nil, err
	}
	purge, err := fsm.Encode(Base+1e6+window*1e6+1, &fsm.Purge{Keys: []fsm.Ref{{Namespace: Namespace, Key: Key(0)}}})
	if err != nil {
		return nil, err
	}
	if r := m.Apply(3, purge); r.Status != fsm.StatusOK {
		return nil, fmt.Errorf("template purge: %s %s", r.Status, r.Detail)
	}
	evs, _ := m.AuditEvents(Namespace, 0, 10)
	if len(evs) != 3 {
		return nil, fmt.Errorf("template chain has %d events, want 3", len(evs))
	}
	chainValue := func(e *fsm.ChainEvent) []byte { return append([]byte(e.Hash), e.Body...) }
	t.ClaimEvent, t.CompleteEvent, t.PurgeEvent = chainValue(evs[0]), chainValue(evs[1]), chainValue(evs[2])
	t.declared, t.executed = offsets(t.Declared), offsets(t.Executed)
	t.claimEv, t.completeEv, t.pEv = offsets(t.ClaimEvent), offsets(t.CompleteEvent), offsets(t.PurgeEvent)
	if t.declared.key < 0 || t.declared.payload < 0 || t.declared.fp < 0 || t.executed.result < 0 {
		return nil, fmt.Errorf("template fields not found in the record frames")
	}
	return t, nil
}

func offsets(b []byte) fieldOffsets {
	_, fp, _ := fsm.Fingerprint(Tool, Payload(0))
	raw, _ := hex.DecodeString(fp)
	return fieldOffsets{
		key:     bytes.Index(b, []byte(Key(0))),
		owner:   bytes.Index(b, []byte(Owner(0))),
		payload: bytes.Index(b, Payload(0)),
		result:  bytes.Index(b, Result(0)),
		fp:      bytes.Index(b, raw),
		fpHex:   bytes.Index(b, []byte(fp)),
	}
}

// fill writes intent i's fields over dst (a copy of a template).
func (o fieldOffsets) fill(dst []byte, i int) []byte {
	if o.key >= 0 {
		copy(dst[o.key:], Key(i))
	}
	if o.owner >= 0 {
		copy(dst[o.owner:], Owner(i))
	}
	if o.payload >= 0 {
		copy(dst[o.payload:], Payload(i))
	}
	if o.result >= 0 {
		copy(dst[o.result:], Result(i))
	}
	if o.fp >= 0 || o.fpHex >= 0 {
		_, fp, _ := fsm.Fingerprint(Tool, Payload(i))
		if o.fpHex >= 0 {
			copy(dst[o.fpHex:], fp)
		}
		if o.fp >= 0 {
			raw, _ := hex.DecodeString(fp)
			copy(dst[o.fp:], raw)
		}
	}
	return dst
}

// DeclaredRecord is intent i's record after its claim.
func (t *Templates) DeclaredRecord(i int) []byte {
	return t.declared.fill(bytes.Clone(t.Declared), i)
}

// ExecutedRecord is intent i's record after its complete.
func (t *Templates) ExecutedRecord(i int) []byte {
	return t.executed.fill(bytes.Clone(t.Executed), i)
}

// Event is the chain event of op ("claim", "complete", "purge") on intent i.
func (t *Templates) Event(op string, i int) []byte {
	switch op {
	case "claim":
		return t.claimEv.fill(bytes.Clone(t.ClaimEvent), i)
	case "complete":
		return t.completeEv.fill(bytes.Clone(t.CompleteEvent), i)
	default:
		return t.pEv.fill(bytes.Clone(t.PurgeEvent), i)
	}
}

// onlyFrame returns the one record frame of m's snapshot: the header line
// is JSON with the count, then 4-byte big-endian length and the record.
func onlyFrame(m *fsm.Machine) ([]byte, error) {
	var buf bytes.Buffer
	if err := m.WriteSnapshot(&buf); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	br := bufio.NewReader(&buf)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("snapshot header: %w", err)
	}
	var hdr struct{ Count int }
	if err := json.Unmarshal(line, &hdr); err != nil || hdr.Count != 1 {
		return nil, fmt.Errorf("snapshot header %q: %v", line, err)
	}
	var n [4]byte
	if _, err := io.ReadFull(br, n[:]); err != nil {
		return nil, fmt.Errorf("frame length: %w", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(br, frame); err != nil {
		return nil, fmt.Errorf("frame: %w", err)
	}
	return frame, nil
}
