package fsm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
)

// SnapshotFormat names the snapshot encoding in its header line.
const SnapshotFormat = "intentd-ledger"

// SnapshotVersion is the version of the snapshot encoding, the only one
// WriteSnapshot writes and Restore reads: a snapshot of another version
// is refused.
const SnapshotVersion = 1

// DumpFormat names the JSON dump WriteSnapshotJSON writes in its header
// line: a view of the ledger for people and jq, which Restore refuses.
const DumpFormat = "intentd-ledger-dump"

// MaxBlobBytes caps a payload or a result: a policy's max_payload_bytes,
// and the service's own limits, may not be larger.
const MaxBlobBytes = 16 << 20

// maxRecordFrame bounds one record's encoding in a snapshot: twice the
// room a record with the largest payload and result needs. WriteSnapshot
// refuses to write a larger frame, which Restore would refuse to read.
// Restore reads a large frame as its bytes arrive, so a corrupt length
// costs no more memory than the snapshot actually holds.
const maxRecordFrame = 4 * MaxBlobBytes

// ErrBadSnapshot is returned by Restore for a snapshot it cannot trust.
var ErrBadSnapshot = errors.New("bad snapshot")

// ErrUnsnapshottable is returned by WriteSnapshot for a record too large
// for a snapshot frame: writing it would give a snapshot no node restores.
var ErrUnsnapshottable = errors.New("record too large for a snapshot")

type snapshotHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Index   uint64 `json:"index"`
	Now     int64  `json:"now"`
	Count   int    `json:"count"`
	// Policies by name, signing keys oldest first (each with its "seed",
	// or its "sealed" seed and no "seed": the form the log carried, so a
	// snapshot holds no plaintext seed of a sealed key), settings, and the
	// heads of the audit logs whose Events event lines follow the intents,
	// namespace by namespace in order.
	Policies []*Policy    `json:"policies,omitempty"`
	Keys     []SigningKey `json:"keys,omitempty"`
	Settings Settings     `json:"settings"`
	Chains   []ChainHead  `json:"chains,omitempty"`
	Events   int          `json:"events"`
}

// snapshotEvent is one audit log event line.
type snapshotEvent struct {
	Namespace string `json:"ns"`
	*ChainEvent
}

func (l *Machine) chainNames() []string {
	names := make([]string, 0, len(l.chains))
	for ns := range l.chains {
		names = append(names, ns)
	}
	sort.Strings(names)
	return names
}

type snapshotTrailer struct {
	SHA256 string `json:"sha256"`
}

// WriteSnapshot writes the ledger in its deterministic encoding
// (SnapshotVersion): a JSON header line; one frame per intent in
// (namespace, key) order, each a 4-byte big-endian length and the
// record's binary encoding (recordcodec.go); one JSON line per audit log
// event; and a trailer line with the SHA-256 of everything before it.
// Equal ledgers give byte-identical snapshots. Call it on a Clone to keep
// applying meanwhile.
func (l *Machine) WriteSnapshot(w io.Writer) error {
	return l.writeSnapshot(w, SnapshotFormat, l.writeRecords)
}

// WriteSnapshotJSON writes a JSON dump of the ledger for people and jq
// (intentctl snapshot dump): the layout of a snapshot, with the header
// naming DumpFormat and one JSON line per intent (the Intent view, as the
// API shows it) instead of a binary frame. It is deterministic too, and
// costs several times the time and space of WriteSnapshot. It is a view,
// not a second snapshot format: Restore refuses it.
func (l *Machine) WriteSnapshotJSON(w io.Writer) error {
	return l.writeSnapshot(w, DumpFormat, l.writeIntentLines)
}

// writeSnapshot writes the header (naming format), the intents with
// writeIntents, the audit log events and the trailer.
func (l *Machine) writeSnapshot(w io.Writer, format string, writeIntents func(*bufio.Writer) error) error {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	hdr := snapshotHeader{Format: format, Version: SnapshotVersion, Index: l.index, Now: l.now,
		Count: l.total, Keys: l.keys, Settings: l.settings}
	pnames := make([]string, 0, len(l.policies))
	for name := range l.policies {
		pnames = append(pnames, name)
	}
	sort.Strings(pnames)
	for _, name := range pnames {
		hdr.Policies = append(hdr.Policies, l.policies[name])
	}
	for _, ns := range l.chainNames() {
		c := l.chains[ns]
		hdr.Chains = append(hdr.Chains, c.head)
		hdr.Events += c.events()
	}
	if err := enc.Encode(hdr); err != nil {
		return fmt.Errorf("snapshot header: %w", err)
	}
	if err := writeIntents(bw); err != nil { // concurrently, same bytes
		return fmt.Errorf("snapshot intent: %w", err)
	}
	var err error
	for _, ns := range l.chainNames() {
		l.scanChain(ns, 0, func(e *ChainEvent) bool {
			err = enc.Encode(snapshotEvent{Namespace: ns, ChainEvent: e})
			return err == nil
		})
		if err != nil {
			return fmt.Errorf("snapshot audit event: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("snapshot flush: %w", err)
	}
	trailer, _ := json.Marshal(snapshotTrailer{SHA256: hex.EncodeToString(h.Sum(nil))})
	if _, err := w.Write(append(trailer, '\n')); err != nil {
		return fmt.Errorf("snapshot trailer: %w", err)
	}
	return nil
}

// Digest is the hex SHA-256 of the ledger's snapshot encoding: replicas
// that applied the same log have equal digests.
func (l *Machine) Digest() string {
	h := sha256.New()
	if err := l.WriteSnapshot(h); err != nil {
		// Writing to a hash cannot fail; encoding our own types cannot either.
		panic(fmt.Sprintf("fsm: digest: %v", err))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Restore reads a snapshot written by WriteSnapshot and returns the
// ledger. It refuses any other format or version, a JSON dump among them.
// It verifies the header, the count and the
// checksum, and that keys arrive in strictly increasing order; and, since
// anyone can compute a checksum, every value as well: a snapshot holding
// a value no sequence of commands could have produced (an index past
// MaxSnapshotIndex, a time past MaxSnapshotTime or the clock, a malformed
// signing key or policy, a record inconsistent with its state, a broken
// audit chain) is refused with an error wrapping both ErrBadSnapshot and
// ErrInvalidSnapshot. Every error wraps ErrBadSnapshot.
func Restore(r io.Reader) (*Machine, error) {
	return RestoreInto(NewMemoryStore(), r)
}

// restoreCommitEvery is how many records RestoreInto writes to the store
// between commits, bounding what a store holds uncommitted.
const restoreCommitEvery = 1024

// RestoreInto is Restore into st, which must be empty. On an error st
// holds part of the snapshot and is to be discarded; on success the
// snapshot's state is committed to it (not synced).
func RestoreInto(st Store, r io.Reader) (*Machine, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	h := sha256.New()
	line, err := readLine(br, h)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	var hdr snapshotHeader
	if err := json.Unmarshal(line, &hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	switch {
	case hdr.Format == DumpFormat:
		return nil, fmt.Errorf("%w: a JSON dump (format %q) is a view for reading, not a snapshot to restore",
			ErrBadSnapshot, hdr.Format)
	case hdr.Format != SnapshotFormat || hdr.Version != SnapshotVersion:
		return nil, fmt.Errorf("%w: format %q version %d; this version reads format %q version %d",
			ErrBadSnapshot, hdr.Format, hdr.Version, SnapshotFormat, SnapshotVersion)
	}
	if hdr.Count < 0 || hdr.Events < 0 {
		return nil, fmt.Errorf("%w: count %d, events %d", ErrBadSnapshot, hdr.Count, hdr.Events)
	}
	// Every value is checked before it is used (restore_validate.go): the
	// trailer proves no more than that the bytes were not damaged.
	bounds, err := checkHeader(&hdr)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	l, err := Open(st)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	if l.applied != 0 || l.total != 0 {
		return nil, fmt.Errorf("%w: restore into a store that is not empty", ErrBadSnapshot)
	}
	l.index, l.now = hdr.Index, hdr.Now
	l.settings = hdr.Settings
	l.keys = hdr.Keys
	l.configDirty = true
	if len(hdr.Policies) > 0 {
		l.policies = make(map[string]*Policy, len(hdr.Policies))
		for _, p := range hdr.Policies {
			l.policies[p.Name] = p
		}
		l.reorder()
	}
	for _, h := range hdr.Chains {
		c := newChain(h.Namespace)
		c.head = h
		l.chains[h.Namespace] = c
		l.dirty[h.Namespace] = struct{}{}
	}
	var prev *record
	put := func(i int, r *record) error { // decoded and checked concurrently, put in order
		if prev != nil && !lessRecord(prev, r) {
			return fmt.Errorf("%w: intent %d out of order", ErrBadSnapshot, i)
		}
		l.put(nil, r)
		if i%restoreCommitEvery == restoreCommitEvery-1 {
			st.Commit()
		}
		prev = r
		return nil
	}
	if err := readRecords(br, h, hdr.Count, bounds.checkRecord, put); err != nil {
		return nil, err
	}
	chains := newChainChecker(bounds, hdr.Chains)
	var prevEv *snapshotEvent
	err = readEvents(br, h, hdr.Events, func(i int, e chainEventLine) error {
		if _, ok := l.chains[e.Namespace]; !ok {
			return fmt.Errorf("%w: audit event %d of %q does not belong", ErrBadSnapshot, i, e.Namespace)
		}
		// Strictly in (namespace, seq) order, as written: an event
		// repeated anywhere would replace its twin and lose an event.
		if prevEv != nil && (prevEv.Namespace > e.Namespace || (prevEv.Namespace == e.Namespace && prevEv.Seq >= e.Seq)) {
			return fmt.Errorf("%w: audit event %d out of order", ErrBadSnapshot, i)
		}
		if err := chains.event(e.Namespace, e.ChainEvent, e.body); err != nil {
			return fmt.Errorf("%w: audit event %d: %w", ErrBadSnapshot, i, err)
		}
		l.st.Set(chainKey(nil, e.Namespace, e.Seq), append([]byte(e.Hash), e.Body...))
		if i%restoreCommitEvery == restoreCommitEvery-1 {
			st.Commit()
		}
		prevEv = &e.snapshotEvent
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := chains.done(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	line, err = readLine(br, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: trailer: %w", ErrBadSnapshot, err)
	}
	var tr snapshotTrailer
	if err := json.Unmarshal(line, &tr); err != nil {
		return nil, fmt.Errorf("%w: trailer: %w", ErrBadSnapshot, err)
	}
	if tr.SHA256 != sum {
		return nil, fmt.Errorf("%w: checksum %s, computed %s", ErrBadSnapshot, tr.SHA256, sum)
	}
	l.Commit(l.index)
	return l, nil
}

// readLine reads one newline-terminated line (without the newline), feeding
// the raw bytes to h when h is not nil.
func readLine(br *bufio.Reader, h hash.Hash) ([]byte, error) {
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, unexpectedEOF(err)
	}
	if h != nil {
		h.Write(line)
	}
	return bytes.TrimSuffix(line, []byte{'\n'}), nil
}
