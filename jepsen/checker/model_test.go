package checker

import (
	"testing"

	"github.com/intentledger/intentd/jepsen/history"
)

func TestModelStep(t *testing.T) {
	absent := keyState{}
	declared := keyState{State: stateDeclared, Owner: "o1", Fence: 10, Gen: 1, Tag: "a"}
	lostGrant := keyState{State: stateDeclared, Owner: "o1", Gen: 1, Tag: "a"} // token unknown
	executed := keyState{State: stateExecuted, Owner: "o1", Fence: 10, Gen: 1, Tag: "a"}
	failedGen := keyState{State: stateFailed, Owner: "o1", Fence: 10, Gen: 1, Tag: "a"}
	claim := func(owner, tag string) opInput {
		return opInput{Type: history.OpClaim, Key: "k", Owner: owner, Tag: tag}
	}
	complete := func(owner string, fence uint64) opInput {
		return opInput{Type: history.OpComplete, Key: "k", Owner: owner, Fence: fence}
	}
	readOp := opInput{Type: history.OpRead, Key: "k"}
	tests := []struct {
		name  string
		state keyState
		in    opInput
		out   *opOutput
		want  []keyState // nil: the step is impossible
	}{
		{"first claim is granted", absent, claim("o1", "a"),
			&opOutput{Status: "granted", Created: true, Fence: 10, Gen: 1, Owner: "o1"}, []keyState{declared}},
		{"first claim must create", absent, claim("o1", "a"),
			&opOutput{Status: "granted", Fence: 10}, nil},
		{"first claim cannot be in_flight", absent, claim("o1", "a"), &opOutput{Status: "in_flight"}, nil},
		{"lost first claim: token unknown", absent, claim("o1", "a"), nil, []keyState{lostGrant}},
		{"same owner gets its grant back", declared, claim("o1", "a"),
			&opOutput{Status: "granted", Fence: 10}, []keyState{declared}},
		{"same owner cannot get another token", declared, claim("o1", "a"),
			&opOutput{Status: "granted", Fence: 11}, nil},
		{"same owner fixes an unknown token", lostGrant, claim("o1", "a"),
			&opOutput{Status: "granted", Fence: 10}, []keyState{declared}},
		{"other owner is in_flight", declared, claim("o2", "a"),
			&opOutput{Status: "in_flight", Owner: "o1", Fence: 10}, []keyState{declared}},
		{"other owner is never granted", declared, claim("o2", "a"),
			&opOutput{Status: "granted", Created: true, Fence: 11}, nil},
		{"other payload is divergent", declared, claim("o1", "b"), &opOutput{Status: "divergent"}, []keyState{declared}},
		{"divergent beats duplicate", executed, claim("o2", "b"), &opOutput{Status: "duplicate"}, nil},
		{"duplicate after execution", executed, claim("o2", "a"),
			&opOutput{Status: "duplicate", State: "executed", Owner: "o1", Fence: 10}, []keyState{executed}},
		{"duplicate shows the recorded grant", executed, claim("o2", "a"),
			&opOutput{Status: "duplicate", Owner: "o2"}, nil},
		{"in_doubt is impossible with long leases", declared, claim("o2", "a"), &opOutput{Status: "in_doubt"}, nil},
		{"failed generation is granted anew above the old token", failedGen, claim("o2", "a"),
			&opOutput{Status: "granted", Created: true, Fence: 12, Gen: 2},
			[]keyState{{State: stateDeclared, Owner: "o2", Fence: 12, Floor: 10, Gen: 2, Tag: "a"}}},
		{"new generation token must exceed the old one", failedGen, claim("o2", "a"),
			&opOutput{Status: "granted", Created: true, Fence: 9, Gen: 2}, nil},
		{"complete by the holder executes", declared, complete("o1", 10), &opOutput{Status: "ok"}, []keyState{executed}},
		{"complete is idempotent", executed, complete("o1", 10), &opOutput{Status: "ok"}, []keyState{executed}},
		{"stale token is fenced", declared, complete("o1", 9), &opOutput{Status: "fenced"}, []keyState{declared}},
		{"stale token cannot execute", declared, complete("o1", 9), &opOutput{Status: "ok"}, nil},
		{"other owner is fenced", executed, complete("o2", 10), &opOutput{Status: "fenced"}, []keyState{executed}},
		{"complete on nothing", absent, complete("o1", 10), &opOutput{Status: "not_found"}, []keyState{absent}},
		{"unknown complete may or may not match an unknown token", lostGrant, complete("o1", 10), nil,
			[]keyState{lostGrant, executed}},
		{"ok complete fixes an unknown token", lostGrant, complete("o1", 10), &opOutput{Status: "ok"}, []keyState{executed}},
		{"read sees the record", executed, readOp,
			&opOutput{Status: "ok", State: "executed", Owner: "o1", Fence: 10, Gen: 1, Tag: "a"}, []keyState{executed}},
		{"read cannot see an older state", executed, readOp,
			&opOutput{Status: "ok", State: "declared", Owner: "o1", Fence: 10}, nil},
		{"read cannot miss the record", executed, readOp, &opOutput{Status: "not_found"}, nil},
		{"read of nothing", absent, readOp, &opOutput{Status: "not_found"}, []keyState{absent}},
		{"read fixes an unknown token", lostGrant, readOp,
			&opOutput{Status: "ok", State: "declared", Owner: "o1", Fence: 10}, []keyState{declared}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := modelStep(tc.state, tc.in, tc.out)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d next states %v, want %v", len(got), got, tc.want)
			}
			for i := range got {
				if got[i].(keyState) != tc.want[i] {
					t.Errorf("next state %d: got %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestRedundantUnknown(t *testing.T) {
	tests := []struct {
		name string
		run  func() *run
		keep []int
		drop []int
	}{
		{name: "retries of a lost claim collapse to the first", keep: []int{0}, drop: []int{1, 2}, run: func() *run {
			r := &run{}
			r.add(unknown(grant(0, "k", "o", 0, true)), 0, 5)
			r.add(unknown(grant(0, "k", "o", 0, true)), 6, 8)
			r.add(unknown(grant(0, "k", "o", 0, true)), 9, -1)
			return r
		}},
		{name: "claim after the record was seen is a no-op", keep: []int{0}, drop: []int{2}, run: func() *run {
			r := &run{}
			r.add(unknown(grant(0, "k", "o0", 0, true)), 0, 5)
			r.add(refused(1, "k", "o1", "in_flight", "declared", "o0", 10), 1, 3)
			r.add(unknown(grant(2, "k", "o2", 0, true)), 4, -1)
			return r
		}},
		{name: "claim concurrent with the first sight is kept", keep: []int{0, 2}, run: func() *run {
			r := &run{}
			r.add(unknown(grant(0, "k", "o0", 0, true)), 0, 5)
			r.add(refused(1, "k", "o1", "in_flight", "declared", "o0", 10), 1, 3)
			r.add(unknown(grant(2, "k", "o2", 0, true)), 3, -1)
			return r
		}},
		{name: "complete by the holder is kept", keep: []int{1}, run: func() *run {
			r := &run{}
			r.add(grant(0, "k", "o0", 10, true), 0, 1)
			r.add(unknown(complete(0, "k", "o0", 10, "")), 2, -1)
			return r
		}},
		{name: "complete after another grant was seen is fenced", drop: []int{1}, run: func() *run {
			r := &run{}
			r.add(grant(0, "k", "o0", 10, true), 0, 1)
			r.add(unknown(complete(1, "k", "o1", 10, "")), 2, -1)
			return r
		}},
		{name: "complete after its execution was seen is idempotent", drop: []int{2}, run: func() *run {
			r := &run{}
			r.add(grant(0, "k", "o0", 10, true), 0, 1)
			r.add(read(1, "k", "executed", "o0", 10), 2, 3)
			r.add(unknown(complete(0, "k", "o0", 10, "")), 4, -1)
			return r
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keep := redundantUnknown(checkHistory(tc.run().ops))
			for _, id := range tc.keep {
				if !keep[id] {
					t.Errorf("op %d dropped, want it kept", id)
				}
			}
			for _, id := range tc.drop {
				if keep[id] {
					t.Errorf("op %d kept, want it dropped", id)
				}
			}
		})
	}
}
