package checker

import (
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

func TestLatencyByRegion(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	claim := func(node string, at, took int, status string, local bool) history.Op {
		return history.Op{Type: history.OpClaim, Node: node, Invoke: ms(at), Return: ms(at + took), Outcome: history.OutcomeOK,
			Status: status, Local: local}
	}
	ops := []history.Op{
		claim("a", 0, 100, statusGranted, false),
		claim("a", 10, 200, statusGranted, false),
		claim("a", 20, 90, statusDuplicate, false),
		claim("a", 30, 1, statusDuplicate, true),
		claim("b", 0, 50, statusGranted, false),
		claim("b", 1000, 5000, statusGranted, false), // during the fault: left out
		claim("b", 10, 3, statusInFlight, false),     // neither a grant nor a duplicate
		{Type: history.OpClaim, Node: "b", Invoke: 0, Return: ms(7), Outcome: history.OutcomeInfo},
		{Type: history.OpComplete, Node: "b", Invoke: 0, Return: ms(7), Outcome: history.OutcomeOK, Status: statusOK},
		claim("x", 0, 1, statusGranted, false), // no region
	}
	faults := []history.Fault{{Nemesis: "kill-leader", Start: ms(2000), End: ms(3000)}}
	regions := map[string]string{"a": "eu", "b": "us"}
	got := LatencyByRegion(ops, faults, func(n string) string { return regions[n] })
	if len(got) != 2 || got[0].Region != "eu" || got[1].Region != "us" {
		t.Fatalf("regions %+v", got)
	}
	eu, us := got[0], got[1]
	if eu.Grants != 2 || eu.GrantP50 != ms(100) || eu.GrantP99 != ms(200) || eu.Duplicates != 2 || eu.Local != 1 ||
		eu.DuplicateP50 != ms(90) || eu.LocalP50 != ms(1) || eu.LocalP99 != ms(1) {
		t.Errorf("eu %+v", eu)
	}
	if us.Grants != 1 || us.GrantP99 != ms(50) || us.Duplicates != 0 || us.Local != 0 {
		t.Errorf("us %+v", us)
	}
}
