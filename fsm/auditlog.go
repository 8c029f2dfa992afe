package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// DefaultAuditRetention is how many events of each namespace's audit log
// are kept until an operator sets another retention.
const DefaultAuditRetention = 100_000

// SystemNamespace holds the audit events of cluster-wide changes
// (policies, settings, signing keys). API namespaces cannot start with "_".
const SystemNamespace = "_system"

// ChainEvent is one event of a namespace's hash-chained audit log.
//
// Event holds the event's JSON exactly as it was hashed: Hash is the hex
// SHA-256 of those bytes, and the event names the hash of its predecessor
// in "prev". A verifier checks, for each event in order, that seq is one
// more than the previous, that prev equals the previous event's hash (or
// the log's anchor for the first retained event), and that the SHA-256 of
// the raw event bytes equals hash. No re-encoding is involved, so any
// language can verify the chain.
type ChainEvent struct {
	Seq  uint64          `json:"seq"`
	Hash string          `json:"hash"`
	Body json.RawMessage `json:"event"`
}

// ChainBody is what an event's JSON holds.
type ChainBody struct {
	Seq       uint64 `json:"seq"`
	Namespace string `json:"ns"`
	Key       string `json:"key,omitempty"`
	Prev      string `json:"prev"`
	AuditEvent
}

// ChainHead describes a namespace's audit log: the first retained event,
// the hash it chains from (its anchor) and the last event.
type ChainHead struct {
	Namespace string `json:"namespace"`
	// FirstSeq is the first retained event (0 when there is none yet).
	FirstSeq uint64 `json:"first_seq"`
	// Anchor is the prev hash of the first retained event: all zeros for a
	// log that never dropped an event.
	Anchor   string `json:"anchor"`
	LastSeq  uint64 `json:"last_seq"`
	LastHash string `json:"last_hash"`
	// Dropped counts events removed by retention.
	Dropped uint64 `json:"dropped"`
}

// zeroHash anchors a fresh chain.
var zeroHash = hex.EncodeToString(make([]byte, sha256.Size))

// chain is one namespace's audit log: its head here, its events in the
// store (tableChain).
type chain struct {
	head ChainHead
}

func newChain(ns string) *chain {
	return &chain{head: ChainHead{Namespace: ns, Anchor: zeroHash, LastHash: zeroHash}}
}

// events is how many events the log retains.
func (c *chain) events() int {
	if c.head.FirstSeq == 0 {
		return 0
	}
	return int(c.head.LastSeq - c.head.FirstSeq + 1)
}

// ChainEventHash is the hash of an event's raw JSON.
func ChainEventHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// appendChain adds ev about key to the namespace's audit log and trims it
// to the retention.
func (l *Machine) appendChain(ns, key string, ev AuditEvent) {
	c, ok := l.chains[ns]
	if !ok {
		c = newChain(ns)
		l.chains[ns] = c
	}
	l.dirty[ns] = struct{}{}
	b := ChainBody{Seq: c.head.LastSeq + 1, Namespace: ns, Key: key, Prev: c.head.LastHash, AuditEvent: ev}
	l.scratch = appendChainBody(l.scratch[:0], &b)
	hash := ChainEventHash(l.scratch)
	l.st.Set(chainKey(nil, ns, b.Seq), append([]byte(hash), l.scratch...))
	if c.head.FirstSeq == 0 {
		c.head.FirstSeq = b.Seq
	}
	c.head.LastSeq, c.head.LastHash = b.Seq, hash
	retention := l.settings.auditRetention()
	if c.events() <= retention {
		return
	}
	// Drop the oldest events; the last one dropped anchors the log.
	first := c.head.LastSeq - uint64(retention) + 1
	last, ok := l.chainEvent(ns, first-1)
	if !ok {
		panic(fmt.Errorf("%w: audit event %d of %q is missing", ErrStoreIO, first-1, ns))
	}
	for seq := c.head.FirstSeq; seq < first; seq++ {
		l.st.Delete(chainKey(l.scratch[:0], ns, seq))
		c.head.Dropped++
	}
	c.head.FirstSeq, c.head.Anchor = first, last.Hash
}

// chainEvent reads one stored event.
func (l *Machine) chainEvent(ns string, seq uint64) (*ChainEvent, bool) {
	v, ok := l.r().Get(chainKey(nil, ns, seq))
	if !ok {
		return nil, false
	}
	return decodeChainValue(seq, v), true
}

// decodeChainValue decodes a stored event: its hex hash, then its body.
func decodeChainValue(seq uint64, v []byte) *ChainEvent {
	const n = 2 * sha256.Size
	if len(v) < n {
		panic(fmt.Errorf("%w: audit event %d is %d bytes", ErrStoreIO, seq, len(v)))
	}
	return &ChainEvent{Seq: seq, Hash: string(v[:n]), Body: bytes.Clone(v[n:])}
}

// scanChain calls fn with the namespace's events from seq since on, in
// order, until fn returns false.
func (l *Machine) scanChain(ns string, since uint64, fn func(*ChainEvent) bool) {
	p := appendNS([]byte{tableChain}, ns)
	l.r().Scan(chainKey(nil, ns, since), prefixEnd(p), func(k, v []byte) bool {
		return fn(decodeChainValue(binary.BigEndian.Uint64(k[len(k)-8:]), v))
	})
}

// AuditHead returns the head of a namespace's audit log.
func (l *Machine) AuditHead(ns string) ChainHead {
	if c, ok := l.chains[ns]; ok {
		return c.head
	}
	return newChain(ns).head
}

// AuditEvents returns up to limit events of the namespace's audit log with
// seq ≥ since, in order, and the seq to ask for next (0 when none follow).
func (l *Machine) AuditEvents(ns string, since uint64, limit int) (page []*ChainEvent, next uint64) {
	if _, ok := l.chains[ns]; !ok {
		return nil, 0
	}
	if limit <= 0 {
		limit = 100
	}
	l.scanChain(ns, since, func(e *ChainEvent) bool {
		if len(page) == limit {
			next = e.Seq
			return false
		}
		page = append(page, e)
		return true
	})
	return page, next
}
