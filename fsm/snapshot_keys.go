package fsm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// SnapshotSigningKeys reads only the header of a snapshot (the first line
// of what WriteSnapshot writes) and returns its signing keys, oldest
// first, each in the form the snapshot carries it (a plaintext Seed or a
// Sealed seed). It is the cheap look a node takes, before a restore, at
// what it may not accept whatever Restore would say of the rest: a
// plaintext seed on a node with a key-encryption key. It checks the
// header's format and version only; Restore checks everything, this
// header included. Errors wrap ErrBadSnapshot.
func SnapshotSigningKeys(r io.Reader) ([]SigningKey, error) {
	line, err := readLine(bufio.NewReaderSize(r, 64<<10), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	var hdr snapshotHeader
	if err := json.Unmarshal(line, &hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	if hdr.Format != SnapshotFormat || hdr.Version != SnapshotVersion {
		return nil, fmt.Errorf("%w: format %q version %d; this version reads format %q version %d",
			ErrBadSnapshot, hdr.Format, hdr.Version, SnapshotFormat, SnapshotVersion)
	}
	return hdr.Keys, nil
}
