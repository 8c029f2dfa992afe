package client

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrChainBroken is a hash chain that does not verify.
var ErrChainBroken = errors.New("audit chain broken")

// ChainVerifier checks an audit log event by event, in order, the way
// intentctl audit verify does: contiguous seqs from the head's first
// retained event, each event's "prev" equal to the previous hash (the
// head's anchor first), each hash the SHA-256 of the event's raw bytes.
type ChainVerifier struct {
	prev    string
	nextSeq uint64
	n       int
}

// NewChainVerifier starts a verification at the head's first retained
// event.
func NewChainVerifier(head AuditHead) *ChainVerifier {
	return &ChainVerifier{prev: head.Anchor, nextSeq: head.FirstSeq}
}

// Add checks the next event; the error wraps ErrChainBroken and names the
// first break.
func (v *ChainVerifier) Add(r AuditRecord) error {
	var body struct {
		Seq  uint64 `json:"seq"`
		Prev string `json:"prev"`
	}
	if err := json.Unmarshal(r.Event, &body); err != nil {
		return fmt.Errorf("%w at seq %d: the event is not JSON: %w", ErrChainBroken, r.Seq, err)
	}
	sum := sha256.Sum256(r.Event)
	switch {
	case r.Seq != v.nextSeq || body.Seq != r.Seq:
		return fmt.Errorf("%w at seq %d: expected seq %d (event says %d): an event is missing or reordered", ErrChainBroken, r.Seq, v.nextSeq, body.Seq)
	case body.Prev != v.prev:
		return fmt.Errorf("%w at seq %d: prev is %s, the previous event hashes to %s", ErrChainBroken, r.Seq, body.Prev, v.prev)
	case hex.EncodeToString(sum[:]) != r.Hash:
		return fmt.Errorf("%w at seq %d: the event's bytes hash to %x, not the recorded %s: it was altered", ErrChainBroken, r.Seq, sum, r.Hash)
	}
	v.prev, v.nextSeq = r.Hash, r.Seq+1
	v.n++
	return nil
}

// Finish checks the verified chain agrees with head (read at or after the
// last page: events appended since are not an error) and returns how many
// events were verified.
func (v *ChainVerifier) Finish(head AuditHead) (int, error) {
	last := v.nextSeq - 1
	switch {
	case v.n == 0:
		return 0, nil
	case last > head.LastSeq:
		return v.n, fmt.Errorf("%w: the chain goes to seq %d beyond the head's last seq %d", ErrChainBroken, last, head.LastSeq)
	case last == head.LastSeq && v.prev != head.LastHash:
		return v.n, fmt.Errorf("%w: the chain ends at seq %d with hash %s, the head says %s", ErrChainBroken, last, v.prev, head.LastHash)
	}
	return v.n, nil
}
