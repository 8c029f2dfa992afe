package fsm

import (
	"encoding/binary"
	"errors"
)

// The key layout of a Store (DESIGN.md, "What is stored, and in which
// order"). Every key starts with its table's byte; every order the ledger
// iterates in is the byte order of these keys.
const (
	tableRecord = 'r' // r ns key → the record's frame (appendRecord)
	tableLease  = 'l' // l deadline ns key → nothing: declared intents by lease deadline
	tablePurge  = 'p' // p purgeAt ns key → nothing: finished intents by purge time
	tableChain  = 'c' // c ns seq → a namespace's audit event (hash, body)
	tableHead   = 'h' // h ns → the namespace's ChainHead (JSON)
	tableUsage  = 'u' // u ns → the namespace's usage (storeUsage)
	tableConfig = 'P' // P → policies, signing keys and settings (JSON)
	tableMeta   = 'm' // m → applied index, command index, ledger time (storeMeta)
)

// appendNS appends a namespace so that byte order is string order and a
// namespace never runs into what follows it: 0x00 is escaped as 0x00
// 0xFF and the namespace ends with 0x00 0x01.
func appendNS(b []byte, ns string) []byte {
	for i := 0; i < len(ns); i++ {
		if ns[i] == 0 {
			b = append(b, 0, 0xFF)
			continue
		}
		b = append(b, ns[i])
	}
	return append(b, 0, 1)
}

// parseNS splits b into the namespace appendNS wrote at its start and the
// rest.
func parseNS(b []byte) (ns string, rest []byte, err error) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 == len(b) {
			break
		}
		switch b[i+1] {
		case 0xFF:
			out = append(out, 0)
			i++
		case 1:
			return string(out), b[i+2:], nil
		default:
			return "", nil, errBadStoreKey
		}
	}
	return "", nil, errBadStoreKey
}

var errBadStoreKey = errors.New("fsm: malformed store key")

func recordKey(b []byte, ns, key string) []byte {
	b = appendNS(append(b, tableRecord), ns)
	return append(b, key...)
}

// recordPrefix is the start of every record key of namespace ns.
func recordPrefix(b []byte, ns string) []byte { return appendNS(append(b, tableRecord), ns) }

func deadlineKey(b []byte, table byte, at int64, ns, key string) []byte {
	b = binary.BigEndian.AppendUint64(append(b, table), uint64(at))
	b = appendNS(b, ns)
	return append(b, key...)
}

// deadlineBound is the first key of table at time at.
func deadlineBound(table byte, at int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{table}, uint64(max(at, 0)))
}

// parseDeadlineKey returns the namespace and key of a lease or purge key.
func parseDeadlineKey(k []byte) (Ref, error) {
	if len(k) < 9 {
		return Ref{}, errBadStoreKey
	}
	ns, rest, err := parseNS(k[9:])
	if err != nil {
		return Ref{}, err
	}
	return Ref{Namespace: ns, Key: string(rest)}, nil
}

func chainKey(b []byte, ns string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(appendNS(append(b, tableChain), ns), seq)
}

func nsKey(table byte, ns string) []byte { return appendNS([]byte{table}, ns) }

// prefixEnd returns the first key after every key with prefix p (nil: none).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

var (
	metaKey   = []byte{tableMeta}
	configKey = []byte{tableConfig}
)
