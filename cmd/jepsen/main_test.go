package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
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
