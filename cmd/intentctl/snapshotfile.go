package main

// The one file of intentctl that reads the snapshot encoding: with the
// state machine's own decoder (fsm.Restore), which checks every value as a
// node restoring the file would, and its own writer of the JSON lines
// encoding. The client package offers neither; until the encoding lives in
// a package of its own, this is intentctl's only import of the server's
// internals.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/fsm"
)

// decodedSnapshot is a snapshot decoded and checked completely: format,
// key order, count, every value, and the SHA-256 trailer.
type decodedSnapshot struct{ l *fsm.Machine }

// decodeSnapshot reads a snapshot up to its trailer.
func decodeSnapshot(r io.Reader) (decodedSnapshot, error) {
	l, err := fsm.Restore(r)
	if err != nil {
		return decodedSnapshot{}, err
	}
	return decodedSnapshot{l: l}, nil
}

// index is the log index of the last command the snapshot reflects.
func (d decodedSnapshot) index() uint64 { return d.l.AppliedIndex() }

// intents is the number of intents the snapshot holds.
func (d decodedSnapshot) intents() int { return d.l.Len() }

// writeJSONLines writes the snapshot in the JSON lines encoding (version
// 2): a header line, one JSON object per intent, one per audit log event
// and the SHA-256 trailer.
func (d decodedSnapshot) writeJSONLines(w io.Writer) error { return d.l.WriteSnapshotJSON(w) }

// verifySnapshot decodes a snapshot file completely (format, order, count
// and SHA-256 trailer) and returns what it holds.
func verifySnapshot(path string) (client.SnapshotInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return client.SnapshotInfo{}, err
	}
	defer f.Close()
	h := sha256.New()
	n := &countReader{r: io.TeeReader(f, h)}
	d, err := decodeSnapshot(n)
	if err != nil {
		return client.SnapshotInfo{}, err
	}
	if extra, _ := io.Copy(io.Discard, n); extra > 0 {
		return client.SnapshotInfo{}, fmt.Errorf("%d bytes after the trailer", extra)
	}
	return client.SnapshotInfo{Index: d.index(), Intents: d.intents(), Digest: hex.EncodeToString(h.Sum(nil)), Bytes: n.n}, nil
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
