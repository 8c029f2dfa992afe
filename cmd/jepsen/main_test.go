package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/checker"
	"github.com/intentledger/intentd/jepsen/nemesis"
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

func TestParseRegionsAndDelay(t *testing.T) {
	o, err := parse([]string{"--regions", "eu:2,us:2,ap:1", "--rtt", "eu-us=80ms,eu-ap=150ms,us-ap=150ms", "--jitter", "10%"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodes != 5 || o.wan.layout == nil || o.wan.matrix == nil || o.wan.matrix.OneWay(1, 5) != 75*time.Millisecond || o.wan.matrix.Jitter != 0.1 {
		t.Fatalf("parsed %+v", o.wan)
	}
	if d := o.wan.describe(o.raftTimeout); !strings.Contains(d, "eu n1,n2; us n3,n4; ap n5") || !strings.Contains(d, "ap-eu 150ms") {
		t.Errorf("describe = %q", d)
	}
	if got := o.wan.regionNemesesFor(); !reflect.DeepEqual(got, []string{"wan", "isolate-leader-region", "kill-leader-region"}) {
		t.Errorf("all adds %v", got)
	}
	// Delay without regions: a region per node; all adds only wan.
	o, err = parse([]string{"--nodes", "3", "--rtt", "30ms"}, io.Discard)
	if err != nil || o.wan.layout.String() != "n1:1,n2:1,n3:1" || o.wan.matrix.OneWay(2, 3) != 15*time.Millisecond {
		t.Fatalf("--rtt alone: %+v %v", o.wan, err)
	}
	if got := o.wan.regionNemesesFor(); !reflect.DeepEqual(got, []string{"wan"}) {
		t.Errorf("all adds %v", got)
	}
	// Replicas count as nodes; a run without delay has no matrix.
	o, err = parse([]string{"--regions", "eu:2+1,us:2,ap:1"}, io.Discard)
	if err != nil || o.nodes != 6 || o.wan.matrix != nil {
		t.Fatalf("replicas: %+v %v", o, err)
	}
	if err := o.wan.checkNemeses([]string{"kill-leader+isolate-leader-region"}); err != nil {
		t.Errorf("isolate-leader-region on eu:2+1,us:2,ap:1: %v", err)
	}
	if err := o.wan.checkNemeses([]string{"wan"}); err == nil {
		t.Error("wan without --rtt accepted")
	}
	o, _ = parse([]string{"--regions", "eu:3,us:2", "--rtt", "50ms"}, io.Discard)
	if err := o.wan.checkNemeses([]string{"kill-leader-region"}); err == nil || !strings.Contains(err.Error(), "quorum") {
		t.Errorf("kill-leader-region with a quorum region: %v", err)
	}
	for _, bad := range [][]string{
		{"--regions", "eu:2,us:2"},                 // 4 voters
		{"--regions", "eu:2,us:1", "--nodes", "5"}, // disagrees
		{"--jitter", "10%"},                        // without --rtt
		{"--regions", "eu:2,us:1", "--rtt", "eu-us=1ms,eu-ap=2ms"},
		{"--placement"}, // without --regions
		{"--raft-timeout", "100ms"},
		{"--raft-timeout", "1s", "--hold", "3s"}, // heals before an election
		{"--regions", "eu:0+1,us:2,ap:1"},        // node 1 a replica
	} {
		if _, err := parse(bad, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}

// Node flags go only where the binary knows them; what is left out is
// said in a note.
func TestNodeFlagsFollowTheBinary(t *testing.T) {
	o, err := parse([]string{"--regions", "eu:2+1,us:2,ap:1", "--placement", "--node-network", "wan"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	args, expect, notes := o.wan.nodeFlags(map[string]bool{"region": true, "voter": true, "network": true}, o.nodes)
	if got := args(3); !reflect.DeepEqual(got, []string{"--region", "eu", "--voter=false", "--bootstrap-expect", "0", "--network", "wan"}) {
		t.Errorf("replica n3: %q", got)
	}
	if got := args(6); !reflect.DeepEqual(got, []string{"--region", "ap", "--network", "wan"}) {
		t.Errorf("voter n6: %q", got)
	}
	if expect != 5 || len(notes) != 0 {
		t.Errorf("bootstrap-expect %d, notes %q", expect, notes)
	}
	args, expect, _ = o.wan.nodeFlags(map[string]bool{"region": true, "role": true}, o.nodes)
	if got := args(3); !reflect.DeepEqual(got, []string{"--region", "eu", "--role", "replica", "--bootstrap-expect", "0"}) || expect != 5 {
		t.Errorf("replica n3 with --role: %q", got)
	}
	args, expect, notes = o.wan.nodeFlags(map[string]bool{"id": true}, o.nodes)
	if got := args(3); len(got) != 0 || expect != 0 || len(notes) != 3 ||
		!strings.Contains(notes[0], "--region") || !strings.Contains(notes[1], "n3 ran as voters") || !strings.Contains(notes[2], "--network") {
		t.Errorf("an old binary: args %q, expect %d, notes %q", got, expect, notes)
	}

	o, err = parse([]string{"--local-duplicates"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	args, _, notes = o.wan.nodeFlags(map[string]bool{"local-duplicates": true}, o.nodes)
	if got := args(2); !reflect.DeepEqual(got, []string{"--local-duplicates"}) || len(notes) != 0 {
		t.Errorf("--local-duplicates: %q, notes %q", got, notes)
	}
	args, _, notes = o.wan.nodeFlags(map[string]bool{}, o.nodes)
	if got := args(2); len(got) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "--local-duplicates") {
		t.Errorf("--local-duplicates on an old binary: %q, notes %q", got, notes)
	}
}

func TestBinaryFlags(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fake-intentd")
	script := "#!/bin/sh\ncat >&2 <<'EOF'\nUsage of intentd:\n  -region string\n    \tthe node's region\n  -voter\n    \ta voter (default true)\nEOF\nexit 0\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	known, help, err := binaryHelp(t.Context(), bin)
	if err != nil || !known["region"] || !known["voter"] || known["network"] || !strings.Contains(help, "the node's region") {
		t.Fatalf("flags %v, %v", known, err)
	}
}

// The election timeout of a --network profile comes from the binary's
// --help, as intentd words it.
func TestProfileElection(t *testing.T) {
	help := "  -network string\n    \ttiming profile: lan (one data centre: Raft 1s/1s/500ms, memberlist local) or wan (members 30-300 ms apart: Raft 1s/3s/1s, memberlist WAN); explicit timing flags win (default \"lan\")\n"
	for profile, want := range map[string]time.Duration{"lan": time.Second, "wan": 3 * time.Second} {
		if got, err := profileElection(help, profile); err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", profile, got, err, want)
		}
	}
	if _, err := profileElection(help, "moon"); err == nil || !strings.Contains(err.Error(), "--raft-timeout") {
		t.Errorf("an unknown profile: %v", err)
	}
	// With the nodes' own profile, the hold is checked once its timeout is
	// known, not at parse time.
	o, err := parse([]string{"--node-network", "wan", "--hold", "3s"}, io.Discard)
	if err != nil || !o.profileTimeouts() {
		t.Fatalf("parse: %+v %v", o, err)
	}
	o.raftTimeout = 3 * time.Second
	if o.checkHold() == nil {
		t.Error("a 3s hold passed for a 3s election timeout")
	}
	if o, err := parse([]string{"--node-network", "wan", "--raft-timeout", "2s", "--hold", "3s"}, io.Discard); err == nil || o.profileTimeouts() {
		t.Errorf("an explicit --raft-timeout: checked at parse time: %v", err)
	}
}

// --storage: a storage nemesis puts the nodes on lazy filesystems (strict
// unless told), and an unknown mode is refused; --power-loss is mixed
// unless told, --trailing-logs 128; unknown or empty values are refused.
func TestParseStorage(t *testing.T) {
	cases := []struct {
		args      []string
		storage   string
		powerLoss nemesis.PowerLossMode
		trailing  int
		bad       bool
	}{
		{args: []string{"--nemesis", "kill-leader"}, storage: ""},
		{args: []string{"--nemesis", "power-loss-all"}, storage: "strict"},
		{args: []string{"--nemesis", "kill-leader+disk-full-leader"}, storage: "strict"},
		{args: []string{"--nemesis", "corrupt-snapshot", "--storage", "ext4"}, storage: "ext4"},
		{args: []string{"--nemesis", "power-loss-all", "--power-loss", "clean"}, storage: "strict", powerLoss: nemesis.PowerLossClean},
		{args: []string{"--nemesis", "power-loss-all", "--power-loss", "torn"}, storage: "strict", powerLoss: nemesis.PowerLossTorn},
		{args: []string{"--nemesis", "corrupt-snapshot", "--trailing-logs", "100000"}, storage: "strict", trailing: 100000},
		{args: []string{"--storage", "xfs"}, bad: true},
		{args: []string{"--power-loss", "partial"}, bad: true},
		{args: []string{"--trailing-logs", "0"}, bad: true},
	}
	for _, tc := range cases {
		o, err := parse(tc.args, io.Discard)
		if tc.bad {
			if err == nil {
				t.Errorf("parse(%q) accepted", tc.args)
			}
			continue
		}
		if tc.powerLoss == "" {
			tc.powerLoss = nemesis.PowerLossMixed
		}
		if tc.trailing == 0 {
			tc.trailing = 128
		}
		if err != nil || o.storage != tc.storage || o.powerLoss != tc.powerLoss || o.trailingLogs != tc.trailing {
			t.Errorf("parse(%q): storage %q, power loss %q, trailing logs %d, %v; want %q, %q, %d",
				tc.args, o.storage, o.powerLoss, o.trailingLogs, err, tc.storage, tc.powerLoss, tc.trailing)
		}
	}
}
