package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"

	"github.com/hashicorp/raft"
)

// raft-wal checksums only the batch it finds at a segment's tail when it
// opens the log; an entry read back later from a sealed segment is
// decoded as it lies on disk, so a flipped byte in a command would be
// replayed into the state machine on restart (raft-boltdb's pages carry no
// data checksum either). checkedLog adds one: every entry is stored with
// a CRC-32C (Castagnoli) over its index, term, type, data, extensions and
// append time, and every read verifies it, and that the entry read is the
// one asked for.
//
// The checksum travels in the entry's Extensions field, which this node
// never uses otherwise, wrapped in an envelope (logMagic, the CRC, then
// the entry's own extensions), and only in the local store: raft hands
// checkedLog its entries and gets them back with their Extensions as they
// were, so replicated entries go out exactly as raft made them. An entry
// with empty Extensions was written before this layer existed (or by the
// seeded bug's node): it is legacy and read unverified.

// logMagic opens the checksum envelope in a stored entry's Extensions.
var logMagic = []byte{0xC5, 'I', 'L', '1'}

// castagnoli is the CRC-32C table (hardware-accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptLog is a log entry whose checksum does not hold, or a read
// that returned another entry than the one asked for. At start it stops
// the node (wrapped in ErrUnrestorable); at run time raft gets it for the
// entry and neither applies nor replicates it.
var ErrCorruptLog = errors.New("cluster: corrupt log entry")

// checkedLog is the log store under raft's log cache that checksums every
// entry (see above); a log store wrapper (see innerMonotonic).
type checkedLog struct {
	raft.LogStore
	where string       // the store's path, for errors
	log   *slog.Logger // nil: no logging
	// noVerify is the seeded bug faults.LogNoChecksum: entries are still
	// stored with their checksum, but read back unverified.
	noVerify bool
}

// IsMonotonic implements raft.MonotonicLogStore as the inner store does.
func (s *checkedLog) IsMonotonic() bool { return innerMonotonic(s.LogStore) }

// StoreLog implements raft.LogStore through StoreLogs.
func (s *checkedLog) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: it stores copies of the entries with
// the checksum envelope in their Extensions; raft's own entries (in its
// cache, on their way to followers) are left as they are.
func (s *checkedLog) StoreLogs(logs []*raft.Log) error {
	sealed := make([]raft.Log, len(logs))
	ptrs := make([]*raft.Log, len(logs))
	for i, l := range logs {
		sealed[i] = *l
		sealed[i].Extensions = sealLog(l)
		ptrs[i] = &sealed[i]
	}
	return s.LogStore.StoreLogs(ptrs)
}

// GetLog implements raft.LogStore: the entry is verified and handed back
// with its own Extensions. A corrupt one is ErrCorruptLog, and logged.
func (s *checkedLog) GetLog(index uint64, out *raft.Log) error {
	if err := s.LogStore.GetLog(index, out); err != nil {
		return err
	}
	err := s.open(index, out)
	if err != nil && s.log != nil {
		s.log.Error("a log entry read back from disk is corrupt: this node will neither apply nor replicate it "+
			"(raft stops); see docs/operations.md, \"A node refuses to start\"", "index", index, "log_store", s.where, "err", err)
	}
	return err
}

// open verifies entry l read for index and restores its Extensions.
func (s *checkedLog) open(index uint64, l *raft.Log) error {
	if len(l.Extensions) == 0 {
		return nil // legacy: written before entries were checksummed
	}
	if !bytes.HasPrefix(l.Extensions, logMagic) || len(l.Extensions) < len(logMagic)+4 {
		if s.noVerify {
			return nil
		}
		return fmt.Errorf("%w %d in %s: its checksum envelope is damaged", ErrCorruptLog, index, s.where)
	}
	want := binary.BigEndian.Uint32(l.Extensions[len(logMagic):])
	ext := l.Extensions[len(logMagic)+4:]
	if len(ext) == 0 {
		ext = nil
	}
	l.Extensions = ext
	if s.noVerify {
		return nil
	}
	if l.Index != index {
		return fmt.Errorf("%w %d in %s: the store returned entry %d", ErrCorruptLog, index, s.where, l.Index)
	}
	if got := logChecksum(l); got != want {
		return fmt.Errorf("%w %d in %s: CRC-32C %08x, stored %08x", ErrCorruptLog, index, s.where, got, want)
	}
	return nil
}

// sealLog is the Extensions l is stored with: logMagic, the entry's
// checksum and its own extensions.
func sealLog(l *raft.Log) []byte {
	out := make([]byte, 0, len(logMagic)+4+len(l.Extensions))
	out = append(out, logMagic...)
	out = binary.BigEndian.AppendUint32(out, logChecksum(l))
	return append(out, l.Extensions...)
}

// logChecksum is the CRC-32C of an entry's index, term, type, data,
// extensions (its own, not the envelope) and append time (Unix
// nanoseconds, 0 when unset), each length-prefixed where it varies.
func logChecksum(l *raft.Log) uint32 {
	var hdr [8 + 8 + 1 + 8]byte
	binary.BigEndian.PutUint64(hdr[0:], l.Index)
	binary.BigEndian.PutUint64(hdr[8:], l.Term)
	hdr[16] = byte(l.Type)
	binary.BigEndian.PutUint64(hdr[17:], uint64(len(l.Data)))
	c := crc32.Update(0, castagnoli, hdr[:])
	c = crc32.Update(c, castagnoli, l.Data)
	var mid [8]byte
	binary.BigEndian.PutUint64(mid[:], uint64(len(l.Extensions)))
	c = crc32.Update(c, castagnoli, mid[:])
	c = crc32.Update(c, castagnoli, l.Extensions)
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	binary.BigEndian.PutUint64(mid[:], uint64(at))
	return crc32.Update(c, castagnoli, mid[:])
}

// verifyLog reads and verifies every entry of logs from index from (at
// least its first index) to its last, before raft starts: raft replays
// the entries past the snapshot it restores and panics on one it cannot
// read, and a corrupt one that read back cleanly would be applied. The
// cost is one pass over the log kept past the newest snapshot (bounded by
// the snapshot threshold and the trailing logs).
func verifyLog(logs raft.LogStore, from uint64) error {
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("cluster: log first index: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("cluster: log last index: %w", err)
	}
	from = max(from, first)
	var l raft.Log
	for i := from; last > 0 && i <= last; i++ {
		if err := logs.GetLog(i, &l); err != nil {
			if errors.Is(err, ErrCorruptLog) {
				return fmt.Errorf("%w: %w; the entries from %d to %d are replayed at start and this one cannot be "+
					"trusted; %s", ErrUnrestorable, err, from, last, rejoinAdvice)
			}
			return fmt.Errorf("cluster: reading log entry %d: %w", i, err)
		}
	}
	return nil
}
