package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/raft"
)

// raft keeps its current term and vote in the stable store (raft-wal's
// wal-meta.db, raft-boltdb's raft.db), whose bolt pages carry no data
// checksum: a flipped byte there would give the node another term or
// another vote, and a node that forgets its vote can vote twice in a term.
// checkedStable stores each value with a CRC-32C over its key and bytes,
// in an envelope (stableMagic, the CRC, the value), and refuses a value
// whose checksum fails.
//
// Values written before this layer (legacy) are read once, when the node
// opens its stores, and rewritten in the envelope; stableMarker then
// records that the store is checksummed, and from then on a value without
// the envelope is corrupt too.

// stableMagic opens the checksum envelope of a stable store value.
var stableMagic = []byte{0xC5, 'I', 'S', '1'}

// stableMarker is the key whose (enveloped) presence says every value of
// the store is enveloped.
var stableMarker = []byte("intentd.StableChecksums")

// raftStableKeys are the keys hashicorp/raft keeps (its own names): the
// current term, the term of the last vote and the candidate voted for.
var raftStableKeys = []struct {
	key    []byte
	uint64 bool
}{{[]byte("CurrentTerm"), true}, {[]byte("LastVoteTerm"), true}, {[]byte("LastVoteCand"), false}}

// ErrCorruptStable is a stable store value (raft's term or vote) whose
// checksum fails. At start it stops the node (wrapped in ErrUnrestorable).
var ErrCorruptStable = errors.New("cluster: corrupt raft term or vote")

// checkedStable is the stable store that checksums its values (see above).
type checkedStable struct {
	raft.StableStore
	where string // the store's path, for errors
}

// openCheckedStable wraps inner, rewriting legacy values in the envelope,
// and verifies raft's values: a corrupt one is ErrCorruptStable wrapped in
// ErrUnrestorable, with what to do.
func openCheckedStable(inner raft.StableStore, where string) (*checkedStable, error) {
	s := &checkedStable{StableStore: inner, where: where}
	marked, err := s.raw(stableMarker)
	if err != nil {
		return nil, fmt.Errorf("cluster: stable store %s: %w", where, err)
	}
	if marked == nil {
		for _, k := range raftStableKeys {
			if err := s.migrate(k.key, k.uint64); err != nil {
				return nil, fmt.Errorf("cluster: stable store %s: rewriting %s with a checksum: %w", where, k.key, err)
			}
		}
		if err := s.Set(stableMarker, []byte("1")); err != nil {
			return nil, fmt.Errorf("cluster: stable store %s: %w", where, err)
		}
	}
	keys := [][]byte{stableMarker}
	for _, k := range raftStableKeys {
		keys = append(keys, k.key)
	}
	for _, k := range keys {
		if _, err := s.Get(k); errors.Is(err, ErrCorruptStable) {
			return nil, fmt.Errorf("%w: %w; %s", ErrUnrestorable, err, rejoinAdvice)
		}
	}
	return s, nil
}

// raw is key's stored bytes, nil when it is not set.
func (s *checkedStable) raw(key []byte) ([]byte, error) {
	v, err := s.StableStore.Get(key)
	if err != nil {
		if err.Error() == "not found" { // raft-boltdb's ErrKeyNotFound
			return nil, nil
		}
		return nil, err
	}
	if len(v) == 0 {
		return nil, nil
	}
	return v, nil
}

// migrate rewrites a legacy value of key in the envelope.
func (s *checkedStable) migrate(key []byte, isUint64 bool) error {
	v, err := s.raw(key)
	if err != nil || v == nil || bytes.HasPrefix(v, stableMagic) {
		return err
	}
	if isUint64 { // in the inner store's own encoding
		u, err := s.StableStore.GetUint64(key)
		if err != nil {
			return err
		}
		return s.SetUint64(key, u)
	}
	return s.Set(key, v)
}

// Set implements raft.StableStore.
func (s *checkedStable) Set(key, val []byte) error {
	return s.StableStore.Set(key, sealStable(key, val))
}

// Get implements raft.StableStore: a value whose checksum fails, or one
// without the envelope, is ErrCorruptStable.
func (s *checkedStable) Get(key []byte) ([]byte, error) {
	v, err := s.StableStore.Get(key)
	if err != nil || len(v) == 0 {
		return v, err
	}
	if !bytes.HasPrefix(v, stableMagic) || len(v) < len(stableMagic)+4 {
		return nil, fmt.Errorf("%w: %s in %s has no checksum envelope", ErrCorruptStable, key, s.where)
	}
	want := binary.BigEndian.Uint32(v[len(stableMagic):])
	val := v[len(stableMagic)+4:]
	if got := stableChecksum(key, val); got != want {
		return nil, fmt.Errorf("%w: %s in %s: CRC-32C %08x, stored %08x", ErrCorruptStable, key, s.where, got, want)
	}
	return val, nil
}

// SetUint64 implements raft.StableStore (8 bytes, big-endian, enveloped).
func (s *checkedStable) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore: 0 when the key is not set, as
// both stores answer.
func (s *checkedStable) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil && err.Error() == "not found" {
		return s.StableStore.GetUint64(key) // an unset key, as the inner store answers it
	}
	if err != nil {
		return 0, err
	}
	if len(v) == 0 {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s in %s holds %d bytes, not 8", ErrCorruptStable, key, s.where, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// sealStable is val in its checksum envelope.
func sealStable(key, val []byte) []byte {
	out := make([]byte, 0, len(stableMagic)+4+len(val))
	out = append(out, stableMagic...)
	out = binary.BigEndian.AppendUint32(out, stableChecksum(key, val))
	return append(out, val...)
}

// stableChecksum is the CRC-32C of key's length and bytes and val's: a
// value moved under another key fails it too.
func stableChecksum(key, val []byte) uint32 {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(key)))
	c := crc32.Update(0, castagnoli, n[:])
	c = crc32.Update(c, castagnoli, key)
	return crc32.Update(c, castagnoli, val)
}

// checkedStore is the log and stable store with their checksums, for the
// steps before raft starts that take both (recovery, state inspection).
type checkedStore struct {
	*checkedLog
	*checkedStable
}
