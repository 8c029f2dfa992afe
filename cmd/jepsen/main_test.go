package main

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/intentledger/intentd/jepsen/checker"
)

func TestParseFlagsWorkloadsAndReproduce(t *testing.T) {
	o, err := parse([]string{"--nodes", "5", "--nemesis", "kill-leader, ring", "--seed", "9", "--results", "/tmp/x", "--duration=10s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodes != 5 || o.seed != 9 || !o.finalRead || !reflect.DeepEqual(o.nemeses, []string{"kill-leader", "ring", "restart-read"}) {
		t.Fatalf("parsed %+v", o)
	}
	if got := workloads(o); !reflect.DeepEqual(got, []string{"w1-contended-claims", "w2-final-reads", "w3-restart-reads"}) {
		t.Fatalf("workloads = %v", got)
	}
	r := o.reproduce()
	if !strings.Contains(r, "--seed=9") || strings.Contains(r, "/tmp/x") || !strings.Contains(r, "--duration=10s") || strings.Count(r, "9") != 1 {
		t.Fatalf("reproduce = %q", r)
	}

	o, err = parse([]string{"--workload", "w1", "--nemesis", "all"}, io.Discard)
	if err != nil || o.finalRead || !reflect.DeepEqual(o.nemeses, []string{"all"}) || o.seed == 0 {
		t.Fatalf("w1 only: %+v %v", o, err)
	}
	for _, bad := range [][]string{{"--nodes", "4"}, {"--workload", "w9"}, {"--hold", "10s", "--interval", "5s"}, {"--clients", "0"}} {
		if _, err := parse(bad, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

// The exit code says what the checkers found first and the harness's
// trouble second; a run whose harness failed never passes on no finding.
func TestVerdictKeepsFindingsAndHarnessTroubleApart(t *testing.T) {
	harness := errors.New("nemesis membership: heal: no exit")
	violation := checker.Result{Valid: false, Violations: []checker.Violation{{Checker: checker.SafetyCheckers[0]}}}
	clean := checker.Result{Valid: true}
	for _, c := range []struct {
		name    string
		bug     string
		res     checker.Result
		harness error
		want    int
	}{
		{"clean run", "", clean, nil, exitValid},
		{"clean history, harness failed", "", clean, harness, exitError},
		{"violation", "", violation, nil, exitInvalid},
		{"violation, harness failed", "", violation, harness, exitInvalid},
		{"control caught", "stale-reads", violation, nil, exitValid},
		{"control caught, harness failed", "stale-reads", violation, harness, exitValid},
		{"control missed", "stale-reads", clean, nil, exitInvalid},
		{"control missed, harness failed", "stale-reads", clean, harness, exitError},
	} {
		got, err := verdict(options{bug: c.bug}, c.res, c.harness, io.Discard)
		if got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
		if (got == exitError) != (err != nil) {
			t.Errorf("%s: exit %d with error %v", c.name, got, err)
		}
	}
}
