package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		ok   bool
	}{
		"defaults with an upstream": {[]string{"--upstream-bin", "up"}, true},
		"no upstream":               {nil, false},
		"bad callers":               {[]string{"--upstream-bin", "up", "--callers", "1,x"}, false},
		"zero callers":              {[]string{"--upstream-bin", "up", "--callers", "0"}, false},
		"bad transport":             {[]string{"--upstream-bin", "up", "--transports", "sse"}, false},
		"no duration":               {[]string{"--upstream-bin", "up", "--duration", "0s"}, false},
		"bad pid":                   {[]string{"--upstream-bin", "up", "--node-pids", "12,a"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(tc.args, io.Discard)
			if (err == nil) != tc.ok {
				t.Errorf("parse(%q): %v", tc.args, err)
			}
		})
	}
}

// TestVerdict: the target holds when the gate's added p50 is at most twice
// the ledger's claim p50 of the same round, in every round, without errors.
func TestVerdict(t *testing.T) {
	ms := time.Millisecond
	cfg := config{callers: []int{1}, transports: []string{"stdio"}, rounds: 1, duration: time.Second}
	rows := func(gateP50 time.Duration, gateErrors int64) []result {
		return []result{
			{cell: cell{"direct", "stdio", 1}, round: 1, p50: 1 * ms, p99: 2 * ms, calls: 100},
			{cell: cell{"gate", "stdio", 1}, round: 1, p50: gateP50, p99: 9 * ms, errors: gateErrors, calls: 100},
			{cell: cell{"ledger", "", 1}, round: 1, p50: 4 * ms, claimP50: 2 * ms, calls: 100},
		}
	}
	// A direct cell that measured nothing: no difference, not the gate's
	// whole p50 (a published table once showed one so).
	empty := rows(3*ms, 0)
	empty[0] = result{cell: cell{"direct", "stdio", 1}, round: 1}
	for name, tc := range map[string]struct {
		rs   []result
		want string
	}{
		"added 4 ms, limit 4 ms":  {rows(5*ms, 0), "| 1 | stdio | 4.00 ms | 7.00 ms | 4.00 ms | 4.00 ms | **met** |"},
		"added 5 ms, limit 4 ms":  {rows(6*ms, 0), "**not met**"},
		"errors":                  {rows(2*ms, 1), "**not met**"},
		"direct measured nothing": {empty, "| 1 | stdio | n/a ms | n/a ms | 4.00 ms | 4.00 ms | **not met** |"},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			writeTables(&b, cfg, tc.rs)
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("want %q in\n%s", tc.want, b.String())
			}
		})
	}
}
