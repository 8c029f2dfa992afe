package fsm

import "sort"

// Usage is what one namespace holds in the ledger: its intents, by state,
// and the bytes they store. It is an index of the records kept by the one
// function every change of a record goes through (Machine.put), like the
// ledger's counts by state: it is never written to the log or to a
// snapshot, Restore rebuilds it from the records, and it decides nothing
// in an apply, so it cannot make replicas differ.
type Usage struct {
	// Intents is the number of intents the namespace holds.
	Intents int
	// Bytes is what they store: their keys, canonical payloads and
	// results (not the audit trails or the fixed size of a record).
	Bytes int64
	// ByState is the number of intents in each state.
	ByState map[State]int
}

// nsUsage is a namespace's entry in the index: Usage without the map.
type nsUsage struct {
	intents int
	bytes   int64
	states  [numStateCodes]int
}

// numStateCodes is len(stateCodes); a test checks they agree.
const numStateCodes = 9

// bytes is what a record counts in Usage.Bytes.
func (r *record) bytes() int64 {
	return int64(len(r.key) + len(r.payload) + len(r.result))
}

// account adds (sign +1) or removes (-1) r from its namespace's usage; a
// namespace left with no intents is dropped.
func (l *Machine) account(r *record, sign int) {
	ns := r.namespace()
	l.dirty[ns] = struct{}{}
	u := l.usage[ns]
	if u == nil {
		u = &nsUsage{}
		l.usage[ns] = u
	}
	u.intents += sign
	u.bytes += int64(sign) * r.bytes()
	if int(r.state) < len(u.states) {
		u.states[r.state] += sign
	}
	if u.intents == 0 {
		delete(l.usage, ns)
	}
}

// view returns u with ByState filled in for every state.
func (u *nsUsage) view() Usage {
	out := Usage{ByState: make(map[State]int, len(States))}
	if u == nil {
		for _, s := range States {
			out.ByState[s] = 0
		}
		return out
	}
	out.Intents, out.Bytes = u.intents, u.bytes
	for _, s := range States {
		c, _ := codeOfState(s)
		out.ByState[s] = u.states[c]
	}
	return out
}

// NamespaceUsage returns what namespace ns holds (zero when it holds
// nothing). It costs O(1), whatever the size of the ledger.
func (l *Machine) NamespaceUsage(ns string) Usage {
	return l.usage[ns].view()
}

// NamespaceIntents returns how many intents namespace ns holds, without
// building a Usage.
func (l *Machine) NamespaceIntents(ns string) int {
	if u := l.usage[ns]; u != nil {
		return u.intents
	}
	return 0
}

// Namespaces returns the namespaces that hold at least one intent, in
// order.
func (l *Machine) Namespaces() []string {
	out := make([]string, 0, len(l.usage))
	for ns := range l.usage {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}
