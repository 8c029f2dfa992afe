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
)

// SnapshotFormat names the snapshot encoding in its header line.
const SnapshotFormat = "intentd-ledger"

// SnapshotVersion is the version of the snapshot encoding.
const SnapshotVersion = 1

// ErrBadSnapshot is returned by Restore for a snapshot it cannot trust.
var ErrBadSnapshot = errors.New("bad snapshot")

type snapshotHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Index   uint64 `json:"index"`
	Now     int64  `json:"now"`
	Count   int    `json:"count"`
}

type snapshotTrailer struct {
	SHA256 string `json:"sha256"`
}

// WriteSnapshot writes the ledger in its deterministic encoding: a JSON
// header line, one JSON line per intent in (namespace, key) order, and a
// trailer line with the SHA-256 of everything before it. Equal ledgers give
// byte-identical snapshots. Call it on a Clone to keep applying meanwhile.
func (l *Ledger) WriteSnapshot(w io.Writer) error {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(snapshotHeader{SnapshotFormat, SnapshotVersion, l.index, l.now, l.intents.Len()}); err != nil {
		return fmt.Errorf("snapshot header: %w", err)
	}
	if err := l.writeIntents(bw); err != nil { // concurrently, same bytes
		return fmt.Errorf("snapshot intent: %w", err)
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
func (l *Ledger) Digest() string {
	h := sha256.New()
	if err := l.WriteSnapshot(h); err != nil {
		// Writing to a hash cannot fail; encoding our own types cannot either.
		panic(fmt.Sprintf("fsm: digest: %v", err))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Restore reads a snapshot written by WriteSnapshot and returns the
// ledger. It verifies the header, the count and the checksum, and that
// keys arrive in strictly increasing order.
func Restore(r io.Reader) (*Ledger, error) {
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
	if hdr.Format != SnapshotFormat || hdr.Version != SnapshotVersion {
		return nil, fmt.Errorf("%w: format %q version %d", ErrBadSnapshot, hdr.Format, hdr.Version)
	}
	if hdr.Count < 0 {
		return nil, fmt.Errorf("%w: count %d", ErrBadSnapshot, hdr.Count)
	}
	l := New()
	l.index, l.now = hdr.Index, hdr.Now
	var prev *Intent
	err = readIntents(br, h, hdr.Count, func(i int, in *Intent) error { // decoded concurrently, in order
		if prev != nil && !lessIntent(prev, in) {
			return fmt.Errorf("%w: intent %d out of order", ErrBadSnapshot, i)
		}
		if !in.State.Valid() {
			return fmt.Errorf("%w: intent %d has state %q", ErrBadSnapshot, i, in.State)
		}
		l.put(nil, in)
		prev = in
		return nil
	})
	if err != nil {
		return nil, err
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
	return l, nil
}

// readLine reads one newline-terminated line (without the newline), feeding
// the raw bytes to h when h is not nil.
func readLine(br *bufio.Reader, h hash.Hash) ([]byte, error) {
	line, err := br.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if h != nil {
		h.Write(line)
	}
	return bytes.TrimSuffix(line, []byte{'\n'}), nil
}
