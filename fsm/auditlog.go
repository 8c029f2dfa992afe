package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/google/btree"
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

// chain is one namespace's audit log.
type chain struct {
	head   ChainHead
	events *btree.BTreeG[*ChainEvent]
}

func lessChain(a, b *ChainEvent) bool { return a.Seq < b.Seq }

func newChain(ns string) *chain {
	return &chain{
		head:   ChainHead{Namespace: ns, Anchor: zeroHash, LastHash: zeroHash},
		events: btree.NewG(btreeDegree, lessChain),
	}
}

func (c *chain) clone() *chain {
	return &chain{head: c.head, events: c.events.Clone()}
}

// ChainEventHash is the hash of an event's raw JSON.
func ChainEventHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// appendChain adds ev about key to the namespace's audit log and trims it
// to the retention. The chain is changed in place: a Clone of the ledger
// has chain structs of its own over copy-on-write trees, so nothing a
// snapshot holds is touched.
func (l *Machine) appendChain(ns, key string, ev AuditEvent) {
	c, ok := l.chains[ns]
	if !ok {
		c = newChain(ns)
		l.chains[ns] = c
	}
	b := ChainBody{Seq: c.head.LastSeq + 1, Namespace: ns, Key: key, Prev: c.head.LastHash, AuditEvent: ev}
	l.scratch = appendChainBody(l.scratch[:0], &b)
	raw := bytes.Clone(l.scratch) // exactly its size: the log keeps up to the retention of them
	ce := &ChainEvent{Seq: b.Seq, Hash: ChainEventHash(raw), Body: raw}
	c.events.ReplaceOrInsert(ce)
	if c.head.FirstSeq == 0 {
		c.head.FirstSeq = ce.Seq
	}
	c.head.LastSeq, c.head.LastHash = ce.Seq, ce.Hash
	retention := l.settings.auditRetention()
	for c.events.Len() > retention {
		first, _ := c.events.DeleteMin()
		c.head.Dropped++
		if next, ok := c.events.Min(); ok {
			c.head.FirstSeq, c.head.Anchor = next.Seq, first.Hash
		}
	}
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
	c, ok := l.chains[ns]
	if !ok {
		return nil, 0
	}
	if limit <= 0 {
		limit = 100
	}
	c.events.AscendGreaterOrEqual(&ChainEvent{Seq: since}, func(e *ChainEvent) bool {
		if len(page) == limit {
			next = e.Seq
			return false
		}
		page = append(page, e)
		return true
	})
	return page, next
}
