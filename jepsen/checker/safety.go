package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/intentledger/intentd/jepsen/history"
)

func isGrant(op history.Op) bool {
	return op.Type == history.OpClaim && op.Status == statusGranted
}

// byKey groups ops by key; each group keeps the input order.
func byKey(ops []history.Op, keep func(history.Op) bool) map[string][]history.Op {
	m := map[string][]history.Op{}
	for _, op := range ops {
		if keep(op) {
			m[op.Key] = append(m[op.Key], op)
		}
	}
	return m
}

// checkAtMostOnce checks I1 on the grants the clients saw and on the
// world log of side effects. ok holds well-formed ok ops only.
func checkAtMostOnce(ok []history.Op, effects []history.Effect) []Violation {
	var vs []Violation
	bad := func(key string, opIDs []int, format string, args ...any) {
		vs = append(vs, Violation{Checker: CheckAtMostOnce, Key: key, Detail: fmt.Sprintf(format, args...), OpIDs: opIDs})
	}
	grants := byKey(ok, isGrant)
	for _, key := range sortedKeys(grants) {
		gens := map[uint64][]history.Op{}
		for _, g := range grants[key] {
			gens[g.Generation] = append(gens[g.Generation], g)
		}
		genList := make([]uint64, 0, len(gens))
		for g := range gens {
			genList = append(genList, g)
		}
		sort.Slice(genList, func(i, j int) bool { return genList[i] < genList[j] })
		var prevFence uint64
		var prevOp history.Op
		for i, gen := range genList {
			gs := gens[gen]
			owners := distinct(gs, func(op history.Op) string { return op.Owner })
			fences := distinct(gs, func(op history.Op) string { return fmt.Sprint(op.IntentFence) })
			switch {
			case len(owners) > 1:
				bad(key, ids(gs), "generation %d granted to %d owners: %s", gen, len(owners), strings.Join(owners, ", "))
			case len(fences) > 1:
				bad(key, ids(gs), "generation %d granted with %d fencing tokens: %s", gen, len(fences), strings.Join(fences, ", "))
			}
			first := gs[0]
			for _, g := range gs {
				if g.IntentFence < first.IntentFence {
					first = g
				}
			}
			if i > 0 && first.IntentFence <= prevFence {
				bad(key, []int{prevOp.ID, first.ID}, "fencing token %d of generation %d is not above token %d of generation %d",
					first.IntentFence, gen, prevFence, genList[i-1])
			}
			prevFence, prevOp = first.IntentFence, first
		}
	}
	vs = append(vs, checkFenceOrder(ok)...)

	// The world log: one effect per key at most, each by a granted owner.
	effectsByKey := map[string][]history.Effect{}
	for _, e := range effects {
		effectsByKey[e.Key] = append(effectsByKey[e.Key], e)
	}
	for _, key := range sortedKeys(effectsByKey) {
		es := effectsByKey[key]
		if len(es) > 1 {
			var who []string
			var opIDs []int
			for _, e := range es {
				who = append(who, fmt.Sprintf("%s/token %d/process %d at %v", e.Owner, e.FencingToken, e.Process, e.At))
				for _, g := range grants[key] {
					if g.Owner == e.Owner && g.IntentFence == e.FencingToken && !slices.Contains(opIDs, g.ID) {
						opIDs = append(opIDs, g.ID)
						break
					}
				}
			}
			bad(key, opIDs, "%d side effects in the world log: %s", len(es), strings.Join(who, "; "))
		}
		for _, e := range es {
			var owned, fenced []int
			for _, g := range grants[key] {
				if g.Owner != e.Owner {
					continue
				}
				if g.IntentFence == e.FencingToken {
					owned = append(owned, g.ID)
				} else {
					fenced = append(fenced, g.ID)
				}
			}
			switch {
			case len(owned) > 0:
			case len(fenced) > 0:
				bad(key, fenced, "side effect by owner %s with fencing token %d, but that owner was granted another token",
					e.Owner, e.FencingToken)
			default:
				bad(key, nil, "side effect by owner %s (process %d, token %d) who was never granted the key",
					e.Owner, e.Process, e.FencingToken)
			}
		}
	}
	return vs
}

// checkFenceOrder checks what fencing tokens being Raft indexes implies
// across keys: no two keys share a token, and a claim that created a
// generation after another grant's answer returned got a larger token.
func checkFenceOrder(ok []history.Op) []Violation {
	var vs []Violation
	var grants, created []history.Op
	owner := map[uint64]history.Op{}
	for _, op := range ok {
		if !isGrant(op) {
			continue
		}
		grants = append(grants, op)
		if op.Created {
			created = append(created, op)
		}
		if prev, seen := owner[op.IntentFence]; !seen {
			owner[op.IntentFence] = op
		} else if prev.Key != op.Key {
			vs = append(vs, Violation{Checker: CheckAtMostOnce, Key: op.Key, OpIDs: []int{prev.ID, op.ID},
				Detail: fmt.Sprintf("fencing token %d granted for key %q and key %q", op.IntentFence, prev.Key, op.Key)})
		}
	}
	sort.SliceStable(grants, func(i, j int) bool { return grants[i].Return < grants[j].Return })
	sort.SliceStable(created, func(i, j int) bool { return created[i].Invoke < created[j].Invoke })
	var top history.Op // the largest-token grant returned so far
	n := 0
	for _, c := range created {
		for n < len(grants) && grants[n].Return < c.Invoke {
			if grants[n].IntentFence > top.IntentFence {
				top = grants[n]
			}
			n++
		}
		if top.IntentFence != 0 && c.IntentFence <= top.IntentFence {
			vs = append(vs, Violation{Checker: CheckAtMostOnce, Key: c.Key, OpIDs: []int{top.ID, c.ID},
				Detail: fmt.Sprintf("grant created with fencing token %d after a grant of token %d (key %q) had returned",
					c.IntentFence, top.IntentFence, top.Key)})
		}
	}
	return vs
}

func distinct(ops []history.Op, f func(history.Op) string) []string {
	seen := map[string]bool{}
	var out []string
	for _, op := range ops {
		if v := f(op); !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// checkNoDivergentGrant checks I5: a claim is granted (or answered
// duplicate, which tells the caller to proceed as if it had run) only for
// the payload variant that created the key.
func checkNoDivergentGrant(ok []history.Op) []Violation {
	var vs []Violation
	claims := byKey(ok, func(op history.Op) bool { return op.Type == history.OpClaim })
	tags := byKey(ok, func(op history.Op) bool { return op.IntentTag != "" })
	for _, key := range sortedKeys(claims) {
		cs := claims[key]
		variant, from := creatorVariant(cs, tags[key])
		for _, c := range cs {
			if c.Status != statusGranted && c.Status != statusDuplicate {
				continue
			}
			switch {
			case from != nil && c.Payload != variant:
				vs = append(vs, Violation{Checker: CheckNoDivergentGrant, Key: key, OpIDs: []int{from.ID, c.ID},
					Detail: fmt.Sprintf("claim with payload variant %q answered %s; the key was created with variant %q",
						c.Payload, c.Status, variant)})
			case c.Status == statusGranted && c.IntentTag != "" && c.IntentTag != c.Payload:
				vs = append(vs, Violation{Checker: CheckNoDivergentGrant, Key: key, OpIDs: []int{c.ID},
					Detail: fmt.Sprintf("claim with payload variant %q granted an intent recorded with variant %q",
						c.Payload, c.IntentTag)})
			}
		}
	}
	return vs
}

// creatorVariant is the payload variant that created the key: that of the
// earliest grant that created a generation, else the variant the ledger's
// answers recorded, else that of the earliest grant. from is the op it was
// learned from (nil when nothing shows it).
func creatorVariant(claims, tagged []history.Op) (variant string, from *history.Op) {
	earliest := func(ops []history.Op, keep func(history.Op) bool) *history.Op {
		var best *history.Op
		for i := range ops {
			if keep(ops[i]) && (best == nil || ops[i].Invoke < best.Invoke) {
				best = &ops[i]
			}
		}
		return best
	}
	if op := earliest(claims, func(op history.Op) bool { return isGrant(op) && op.Created }); op != nil {
		return op.Payload, op
	}
	if op := earliest(tagged, func(history.Op) bool { return true }); op != nil {
		return op.IntentTag, op
	}
	if op := earliest(claims, isGrant); op != nil {
		return op.Payload, op
	}
	return "", nil
}

// checkNoLostAck checks I2: the final read of a key shows every
// acknowledged write that returned before the read was invoked. The final
// read is the key's ok read with the latest invocation.
func checkNoLostAck(ok []history.Op) ([]Violation, AckStats) {
	var vs []Violation
	var st AckStats
	final := map[string]history.Op{}
	for _, op := range ok {
		if op.Type != history.OpRead {
			continue
		}
		if prev, seen := final[op.Key]; !seen || op.Invoke > prev.Invoke {
			final[op.Key] = op
		}
	}
	bad := func(w, r history.Op, format string, args ...any) {
		vs = append(vs, Violation{Checker: CheckNoLostAck, Key: w.Key, OpIDs: []int{w.ID, r.ID},
			Detail: fmt.Sprintf(format, args...)})
	}
	for _, w := range ok {
		ackedComplete := w.Type == history.OpComplete && w.Status == statusOK
		if !ackedComplete && !isGrant(w) {
			continue
		}
		r, seen := final[w.Key]
		if !seen || r.Invoke <= w.Return {
			st.Unchecked++
			continue
		}
		st.Checked++
		if r.Status != statusOK {
			bad(w, r, "acknowledged %s (owner %s) lost: the final read found no intent", w.Type, w.Owner)
			continue
		}
		if ackedComplete {
			if (r.State != stateExecuted && r.State != stateCommitted) || r.IntentOwner != w.Owner || r.IntentFence != w.FencingToken {
				bad(w, r, "acknowledged complete by owner %s with token %d lost: the final read shows %s owner=%s token=%d",
					w.Owner, w.FencingToken, r.State, r.IntentOwner, r.IntentFence)
			}
			continue
		}
		if r.IntentFence < w.IntentFence {
			bad(w, r, "acknowledged grant to owner %s with token %d lost: the final read shows %s owner=%s token=%d",
				w.Owner, w.IntentFence, r.State, r.IntentOwner, r.IntentFence)
		}
	}
	return vs, st
}
