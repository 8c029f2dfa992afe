package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/hashicorp/raft"
)

// raft's file snapshot store checksums a snapshot's state.bin (CRC-64 in
// meta.json) but not meta.json itself: a changed index, term or
// configuration would be restored as written. Every snapshot this node
// makes therefore gets a sidecar, meta.sum, holding a copy of the meta
// fields and a CRC-32C of that copy. durableSink writes it into the
// snapshot's temporary directory before raft's Close writes meta.json and
// renames the directory into place, so the sidecar is there as soon as
// the snapshot is; the directory's fsync makes both durable. Open refuses
// a snapshot whose meta.json no longer matches its sidecar, or whose
// sidecar fails its checksum (ErrCorruptSnapshotMeta): raft then falls
// back to an older snapshot and checkRestorable sees it as unreadable. A
// snapshot without a sidecar was made before this check (legacy) and is
// opened as before.

// snapMetaFile is the sidecar's name in a snapshot's directory.
const snapMetaFile = "meta.sum"

// ErrCorruptSnapshotMeta is a snapshot whose meta.json does not match its
// checksummed copy (meta.sum), or whose copy fails its checksum.
var ErrCorruptSnapshotMeta = errors.New("cluster: corrupt snapshot metadata")

// snapMeta is the sidecar's copy of raft's snapshot metadata.
type snapMeta struct {
	Version            raft.SnapshotVersion `json:"version"`
	ID                 string               `json:"id"`
	Index              uint64               `json:"index"`
	Term               uint64               `json:"term"`
	Configuration      raft.Configuration   `json:"configuration"`
	ConfigurationIndex uint64               `json:"configuration_index"`
	Size               int64                `json:"size"`
	CRC                []byte               `json:"crc"`
}

// encodeSnapMeta is the sidecar: the JSON copy on one line, then its
// CRC-32C in decimal on the next.
func encodeSnapMeta(m snapMeta) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(b, "\n%d\n", crc32.Checksum(b, castagnoli)), nil
}

// decodeSnapMeta parses and verifies a sidecar.
func decodeSnapMeta(b []byte) (snapMeta, error) {
	var m snapMeta
	body, sum, ok := bytes.Cut(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if !ok {
		return m, errors.New("no checksum line")
	}
	want, err := strconv.ParseUint(string(sum), 10, 32)
	if err != nil {
		return m, fmt.Errorf("checksum line: %w", err)
	}
	if got := crc32.Checksum(body, castagnoli); got != uint32(want) {
		return m, fmt.Errorf("CRC-32C %08x, stored %08x", got, want)
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, err
	}
	return m, nil
}

// verifySnapMeta checks meta, as raft read it from snapshot dir's
// meta.json, against the sidecar there (none: legacy, unchecked).
func verifySnapMeta(dir string, meta *raft.SnapshotMeta) error {
	p := filepath.Join(dir, snapMetaFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorruptSnapshotMeta, p, err)
	}
	want, err := decodeSnapMeta(b)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorruptSnapshotMeta, p, err)
	}
	// raft's SnapshotMeta leaves out the CRC-64 its meta.json holds.
	mb, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptSnapshotMeta, err)
	}
	var file struct {
		CRC []byte
	}
	if err := json.Unmarshal(mb, &file); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorruptSnapshotMeta, filepath.Join(dir, "meta.json"), err)
	}
	got := snapMeta{Version: meta.Version, ID: meta.ID, Index: meta.Index, Term: meta.Term, Configuration: meta.Configuration,
		ConfigurationIndex: meta.ConfigurationIndex, Size: meta.Size, CRC: file.CRC}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		return fmt.Errorf("%w: %s does not match %s: meta.json says %s, its checksummed copy %s",
			ErrCorruptSnapshotMeta, filepath.Join(dir, "meta.json"), p, gb, wb)
	}
	return nil
}

// sinkMeta follows what raft's sink will write into meta.json: what
// Create was given, and the size and CRC-64 of what is written.
type sinkMeta struct {
	meta snapMeta
	crc  hash.Hash64
}

func newSinkMeta(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64) *sinkMeta {
	return &sinkMeta{meta: snapMeta{Version: version, Index: index, Term: term, Configuration: configuration,
		ConfigurationIndex: configurationIndex}, crc: crc64.New(crc64.MakeTable(crc64.ECMA))}
}

// wrote counts p, written to state.bin.
func (m *sinkMeta) wrote(p []byte) {
	m.meta.Size += int64(len(p))
	_, _ = m.crc.Write(p)
}

// writeSidecar writes and fsyncs the sidecar of snapshot id into its
// temporary directory, tmpDir.
func (m *sinkMeta) writeSidecar(tmpDir, id string) error {
	meta := m.meta
	meta.ID = id
	meta.CRC = m.crc.Sum(nil)
	b, err := encodeSnapMeta(meta)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(tmpDir, snapMetaFile), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("cluster: snapshot %s: %w", id, err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("cluster: snapshot %s: %w", id, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("cluster: snapshot %s: %w", id, err)
	}
	return f.Close()
}
