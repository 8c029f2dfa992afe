package checker

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/intentledger/intentd/jepsen/history"
)

// maxLinOpIDs bounds the op IDs one linearizability violation lists.
const maxLinOpIDs = 10

// linearizableHistory turns the checked history into porcupine operations,
// sorted by key then invocation. Failed ops did not happen and are left
// out, as are reads with an unknown answer (they observed nothing and
// changed nothing). Writes with an unknown answer may have taken effect at
// any time after their invocation: they return at end with a nil output,
// unless reduce is set and the model shows they cannot change anything
// (see redundantUnknown); dropped counts those left out for that reason.
func linearizableHistory(h checkedHistory, end int64, reduce bool) (hist []porcupine.Operation, dropped int) {
	for _, op := range h.ok {
		hist = append(hist, porcupine.Operation{ClientId: op.Process, Input: inputOf(op),
			Call: int64(op.Invoke), Output: outputOf(op), Return: int64(op.Return), Metadata: op.ID})
	}
	keep := redundantUnknown(h)
	for _, op := range h.unknown {
		if op.Type == history.OpRead {
			continue
		}
		if reduce && !keep[op.ID] {
			dropped++
			continue
		}
		hist = append(hist, porcupine.Operation{ClientId: op.Process, Input: inputOf(op),
			Call: int64(op.Invoke), Output: (*opOutput)(nil), Return: end, Metadata: op.ID})
	}
	sort.SliceStable(hist, func(i, j int) bool {
		a, b := hist[i].Input.(opInput), hist[j].Input.(opInput)
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if hist[i].Call != hist[j].Call {
			return hist[i].Call < hist[j].Call
		}
		return a.ID < b.ID
	})
	return hist, dropped
}

// grantSeen is an ok op that showed a key's current grant.
type grantSeen struct {
	ret      time.Duration
	owner    string
	fence    uint64
	finished bool // executed or committed
}

// redundantUnknown returns the IDs of the writes with an unknown answer
// that the linearizability check must keep. Each one it leaves out can
// take effect in no linearization of the model, so leaving it out changes
// no verdict, while every such write left in doubles porcupine's search:
//
//   - of identical unknown writes (key, type, owner, payload, token) only
//     the earliest-invoked is kept: claim and complete are idempotent, so
//     at most one of them is effective, and the earliest can take its
//     place;
//   - an unknown claim invoked after an ok op showed the key's record is
//     a no-op: only an absent (or failed) record is granted anew, and a
//     record never goes back to absent (nothing is purged within a run; a
//     complete is always executed, so nothing fails);
//   - an unknown complete(owner, token) invoked after an ok op showed the
//     key's grant as another owner or token (fenced), or as this one
//     already executed (idempotent), is a no-op.
func redundantUnknown(h checkedHistory) map[int]bool {
	type identity struct {
		key, owner, tag string
		typ             history.OpType
		fence           uint64
	}
	existsSince := map[string]time.Duration{}
	grants := map[string][]grantSeen{}
	for _, op := range h.ok {
		exists := op.Type == history.OpClaim ||
			(op.Type == history.OpComplete && op.Status != statusNotFound) ||
			(op.Type == history.OpRead && op.Status == statusOK)
		if exists {
			if t, seen := existsSince[op.Key]; !seen || op.Return < t {
				existsSince[op.Key] = op.Return
			}
		}
		switch {
		case op.Type == history.OpComplete && op.Status == statusOK:
			grants[op.Key] = append(grants[op.Key], grantSeen{op.Return, op.Owner, op.FencingToken, true})
		case op.Type == history.OpClaim && op.Status == statusGranted:
			grants[op.Key] = append(grants[op.Key], grantSeen{op.Return, op.Owner, op.IntentFence, false})
		case op.IntentOwner != "" && op.IntentFence != 0 && op.State != "":
			finished := op.State == stateExecuted || op.State == stateCommitted
			grants[op.Key] = append(grants[op.Key], grantSeen{op.Return, op.IntentOwner, op.IntentFence, finished})
		}
	}
	earliest := map[identity]history.Op{}
	for _, op := range h.unknown {
		if op.Type == history.OpRead {
			continue
		}
		id := identity{op.Key, op.Owner, op.Payload, op.Type, op.FencingToken}
		if prev, seen := earliest[id]; !seen || op.Invoke < prev.Invoke || (op.Invoke == prev.Invoke && op.ID < prev.ID) {
			earliest[id] = op
		}
	}
	keep := map[int]bool{}
	for _, op := range earliest {
		switch op.Type {
		case history.OpClaim:
			if t, seen := existsSince[op.Key]; seen && t < op.Invoke {
				continue
			}
		case history.OpComplete:
			noop := false
			for _, g := range grants[op.Key] {
				if g.ret < op.Invoke && (g.owner != op.Owner || g.fence != op.FencingToken || g.finished) {
					noop = true
					break
				}
			}
			if noop {
				continue
			}
		}
		keep[op.ID] = true
	}
	return keep
}

func checkLinearizable(h checkedHistory, spanEnd time.Duration, timeout time.Duration) ([]Violation, Linearization, LinStats) {
	end := int64(spanEnd) + 1
	hist, dropped := linearizableHistory(h, end, true)
	model := Model()
	parts := partitionByKey(hist)
	st := LinStats{Keys: len(parts), Ops: len(hist), InfoDropped: dropped, Timeout: timeout}
	for _, op := range hist {
		if op.Output.(*opOutput) == nil {
			st.InfoOps++
		}
	}
	start := time.Now()
	result, info := porcupine.CheckOperationsVerbose(model, hist, timeout)
	st.Duration = time.Since(start)
	st.Result = string(result)
	lin := Linearization{Model: model, Info: info, Result: result, End: end}

	var vs []Violation
	// An Illegal verdict reached when the time was up may come from keys
	// whose search was cut short, not only from keys that failed.
	timedOut := result == porcupine.Unknown || (result == porcupine.Illegal && timeout > 0 && st.Duration >= timeout)
	if timedOut {
		vs = append(vs, Violation{Checker: CheckLinearizable, Detail: fmt.Sprintf(
			"porcupine did not finish within %v (%d ops over %d keys): an unknown verdict proves nothing",
			timeout, st.Ops, st.Keys)})
	}
	if result != porcupine.Illegal {
		return vs, lin, st
	}
	before := len(vs)
	partials := info.PartialLinearizations()
	for i, part := range parts {
		if i >= len(partials) {
			break
		}
		if v, bad := partitionViolation(model, part, partials[i]); bad {
			if timedOut {
				v.Detail += " (the check also timed out, so this key may only be unfinished)"
			}
			vs = append(vs, v)
		}
	}
	if len(vs) == before && !timedOut {
		vs = append(vs, Violation{Checker: CheckLinearizable,
			Detail: "porcupine found the history not linearizable but named no key"})
	}
	return vs, lin, st
}

// partitionViolation reports a key whose ops have no linearization: the
// longest partial linearization porcupine found, the states the key can
// be in after it, and the ops it could not place, earliest return first.
func partitionViolation(model porcupine.Model, part []porcupine.Operation, partials [][]int) (Violation, bool) {
	var longest []int
	for _, p := range partials {
		if len(p) > len(longest) {
			longest = p
		}
	}
	if len(longest) == len(part) {
		return Violation{}, false
	}
	placed := make(map[int]bool, len(longest))
	state := model.Init()
	for _, id := range longest {
		placed[id] = true
		_, state = model.Step(state, part[id].Input, part[id].Output)
	}
	var rest []porcupine.Operation
	for id, op := range part {
		if !placed[id] {
			rest = append(rest, op)
		}
	}
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].Return < rest[j].Return })
	var opIDs []int
	for _, op := range rest {
		if len(opIDs) == maxLinOpIDs {
			break
		}
		opIDs = append(opIDs, op.Input.(opInput).ID)
	}
	first := rest[0]
	key := first.Input.(opInput).Key
	return Violation{Checker: CheckLinearizable, Key: key, OpIDs: opIDs, Detail: fmt.Sprintf(
		"no linearization of the key's %d ops: porcupine placed at most %d, leaving the key %s; the earliest-returning op it could not place is op %d %s",
		len(part), len(longest), model.DescribeState(state), first.Input.(opInput).ID,
		model.DescribeOperation(first.Input, first.Output))}, true
}
