package checker

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/intentledger/intentd/jepsen/history"
)

// Intent states and answer words the model speaks. They mirror fsm's, but
// the checker reads only what the history recorded, so it keeps its own
// spelling instead of importing the product.
const (
	stateAbsent    = ""
	stateDeclared  = "declared"
	stateExecuted  = "executed"
	stateCommitted = "committed"
	stateFailed    = "failed"
	stateApproved  = "approved"
	stateInDoubt   = "in_doubt"

	statusGranted      = "granted"
	statusDuplicate    = "duplicate"
	statusInFlight     = "in_flight"
	statusInDoubt      = "in_doubt"
	statusDivergent    = "divergent"
	statusOK           = "ok"
	statusFenced       = "fenced"
	statusNotFound     = "not_found"
	statusInvalidState = "invalid_state"
)

// keyState is the model's state of one key: the intent record as far as
// the history can see it.
type keyState struct {
	State string // stateAbsent when there is no record
	Owner string
	// Fence is the current grant's fencing token; 0 means the grant was
	// made by a claim whose answer was lost, and the first observation of
	// the token fixes it.
	Fence uint64
	// Floor is the largest fencing token of an earlier generation: a new
	// grant's token must exceed it.
	Floor uint64
	Gen   uint64
	Tag   string // payload variant of the claim that created the record
}

func (s keyState) String() string {
	if s.State == stateAbsent {
		return "absent"
	}
	fence := "?"
	if s.Fence != 0 {
		fence = fmt.Sprint(s.Fence)
	}
	return fmt.Sprintf("%s owner=%s fence=%s gen=%d tag=%s", s.State, s.Owner, fence, s.Gen, s.Tag)
}

// opInput is what a client sent.
type opInput struct {
	ID    int // history op ID, for reports
	Key   string
	Type  history.OpType
	Owner string
	Tag   string // payload variant of a claim
	Fence uint64 // fencing token of a complete
}

// opOutput is what the ledger answered. A nil *opOutput is an unknown
// answer (an info op): the op may have taken effect with any answer.
// Zero-valued intent fields were not recorded and are not compared.
type opOutput struct {
	Status  string
	Created bool
	State   string
	Owner   string
	Fence   uint64
	Gen     uint64
	Tag     string
}

func inputOf(op history.Op) opInput {
	return opInput{ID: op.ID, Key: op.Key, Type: op.Type, Owner: op.Owner, Tag: op.Payload, Fence: op.FencingToken}
}

func outputOf(op history.Op) *opOutput {
	return &opOutput{Status: op.Status, Created: op.Created, State: op.State, Owner: op.IntentOwner,
		Fence: op.IntentFence, Gen: op.Generation, Tag: op.IntentTag}
}

// observe checks that an answer's intent fields agree with s, fixing an
// unknown fencing token from the answer. Empty fields were not recorded.
func observe(s keyState, out *opOutput) (keyState, bool) {
	if out.State != "" && out.State != s.State {
		return s, false
	}
	if out.Owner != "" && out.Owner != s.Owner {
		return s, false
	}
	if out.Gen != 0 && out.Gen != s.Gen {
		return s, false
	}
	if out.Tag != "" && out.Tag != s.Tag {
		return s, false
	}
	if out.Fence != 0 {
		switch {
		case s.Fence == out.Fence:
		case s.Fence == 0 && out.Fence > s.Floor:
			s.Fence = out.Fence
		default:
			return s, false
		}
	}
	return s, true
}

// answer is one way the ledger could have answered an op in a state.
type answer struct {
	status  string
	created bool
	next    keyState
}

// accept returns the next states of the answers consistent with out (all
// of them when out is unknown).
func accept(answers []answer, out *opOutput) []interface{} {
	next := make([]interface{}, 0, len(answers))
	for _, a := range answers {
		if out == nil {
			next = append(next, a.next)
			continue
		}
		if out.Status != a.status || (a.status == statusGranted && out.Created != a.created) {
			continue
		}
		if s, ok := observe(a.next, out); ok {
			next = append(next, s)
		}
	}
	return next
}

// claimAnswers is the ledger's claim transition (fsm.applier.claim) for
// the states a run can reach.
func claimAnswers(s keyState, in opInput) []answer {
	grant := func(floor uint64, tag string) answer {
		return answer{status: statusGranted, created: true,
			next: keyState{State: stateDeclared, Owner: in.Owner, Floor: floor, Gen: s.Gen + 1, Tag: tag}}
	}
	if s.State == stateAbsent {
		return []answer{grant(s.Floor, in.Tag)}
	}
	if in.Tag != s.Tag {
		return []answer{{status: statusDivergent, next: s}}
	}
	switch s.State {
	case stateDeclared:
		if s.Owner == in.Owner {
			return []answer{{status: statusGranted, next: s}}
		}
		return []answer{{status: statusInFlight, next: s}}
	case stateExecuted, stateCommitted:
		return []answer{{status: statusDuplicate, next: s}}
	case stateFailed, stateApproved:
		return []answer{grant(max(s.Floor, s.Fence), s.Tag)}
	case stateInDoubt:
		return []answer{{status: statusInDoubt, next: s}}
	}
	return nil
}

// completeAnswers is the ledger's complete(executed) transition. With an
// unknown fencing token both a match and a mismatch are possible.
func completeAnswers(s keyState, in opInput) []answer {
	if s.State == stateAbsent {
		return []answer{{status: statusNotFound, next: s}}
	}
	if s.Owner != in.Owner || (s.Fence != 0 && s.Fence != in.Fence) {
		return []answer{{status: statusFenced, next: s}}
	}
	var out []answer
	match := s
	if s.Fence == 0 {
		out = append(out, answer{status: statusFenced, next: s})
		if in.Fence <= s.Floor {
			return out
		}
		match.Fence = in.Fence
	}
	switch match.State {
	case stateDeclared, stateInDoubt:
		match.State = stateExecuted
		return append(out, answer{status: statusOK, next: match})
	case stateExecuted, stateCommitted:
		// The workload's result is a function of the key, so a repeated
		// report is the same report: idempotent.
		return append(out, answer{status: statusOK, next: match})
	}
	return append(out, answer{status: statusInvalidState, next: match})
}

// readAnswers is a linearizable GET.
func readAnswers(s keyState) []answer {
	if s.State == stateAbsent {
		return []answer{{status: statusNotFound, next: s}}
	}
	return []answer{{status: statusOK, next: s}}
}

func modelStep(state, input, output interface{}) []interface{} {
	s := state.(keyState)
	in := input.(opInput)
	out, _ := output.(*opOutput)
	switch in.Type {
	case history.OpClaim:
		return accept(claimAnswers(s, in), out)
	case history.OpComplete:
		return accept(completeAnswers(s, in), out)
	case history.OpRead:
		return accept(readAnswers(s), out)
	}
	return nil
}

func hashState(state interface{}) uint64 {
	s := state.(keyState)
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%d\x00%s", s.State, s.Owner, s.Fence, s.Floor, s.Gen, s.Tag)
	return h.Sum64()
}

func describeOperation(input, output interface{}) string {
	in := input.(opInput)
	var call string
	switch in.Type {
	case history.OpClaim:
		call = fmt.Sprintf("claim(%s, %s)", in.Owner, in.Tag)
	case history.OpComplete:
		call = fmt.Sprintf("complete(%s, %d)", in.Owner, in.Fence)
	default:
		call = string(in.Type) + "()"
	}
	out, _ := output.(*opOutput)
	if out == nil {
		return call + " → ?"
	}
	var b strings.Builder
	b.WriteString(call + " → " + out.Status)
	if out.Created {
		b.WriteString(" (created)")
	}
	if out.State != "" {
		fmt.Fprintf(&b, " %s", out.State)
	}
	if out.Owner != "" {
		fmt.Fprintf(&b, " owner=%s", out.Owner)
	}
	if out.Fence != 0 {
		fmt.Fprintf(&b, " fence=%d", out.Fence)
	}
	return b.String()
}

func describeMetadata(info interface{}) string {
	if info == nil {
		return ""
	}
	return fmt.Sprintf("op %v", info)
}

// partitionByKey splits a history into one partition per key, in order of
// the keys' first appearance. Check sorts the history by key first, so the
// partitions come out in sorted key order.
func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	idx := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range ops {
		k := op.Input.(opInput).Key
		i, ok := idx[k]
		if !ok {
			i = len(parts)
			idx[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

// Model is the porcupine model of the ledger the linearizable checker
// uses, partitioned by key. An operation's Input and Output are the
// checker's own types; an Output of nil is an unknown (info) answer.
// porcupine.Visualize needs it to draw a LinearizationInfo.
//
// It models what a fault run can reach: claims, complete(executed) with a
// result that is a function of the key (so a repeated report is the same
// report), and linearizable reads. Leases outlast the run, so in_doubt is
// impossible and any in_doubt answer is a violation; nothing is purged
// within a run. A claim with an unknown answer that created a record
// leaves its fencing token unknown until an answer or read shows it; the
// token must exceed those of the key's earlier generations.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition:                 partitionByKey,
		Init:                      func() []interface{} { return []interface{}{keyState{}} },
		Step:                      modelStep,
		Hash:                      hashState,
		DescribeOperation:         describeOperation,
		DescribeState:             func(s interface{}) string { return s.(keyState).String() },
		DescribeOperationMetadata: describeMetadata,
	}
	return nm.ToModel()
}
