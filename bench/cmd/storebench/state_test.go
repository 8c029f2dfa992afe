package main

import (
	"strings"
	"testing"
)

// TestStateTableMergesPhases checks that the phase lines of one run make
// one row in each table, and that a plain run's line (the build before
// the change) makes a row of its own under the base's name.
func TestStateTableMergesPhases(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []string // substrings of the output
		rows  int      // table rows, both tables
	}{
		{
			name: "phases of one run",
			lines: []string{
				`{"build":"new","engine":"fsm-pebble","n":10,"phase":"fill","fill_intents_per_s":1234,"snapshot_s":1.5}`,
				`{"build":"new","engine":"fsm-pebble","n":10,"phase":"restore","restore_s":2.5}`,
				`{"build":"new","engine":"fsm-pebble","n":10,"phase":"restart-tail","tail_restart_open_s":0.25,"tail_restart_replay_s":3.5,"tail_restart_replayed":7}`,
			},
			want: []string{"| new | fsm-pebble | 10 |", "| 1234 |", "| 2.50 |", "0.25 + 3.50 (7)"},
			rows: 2,
		},
		{
			name: "a plain run beside a state run",
			lines: []string{
				`{"engine":"fsm-memory","n":10,"steady":0,"fill_entries_per_s":2000,"checkpoint_s":4.5,"restart_s":5.5}`,
				`{"build":"new","engine":"fsm-memory","n":10,"phase":"fill","fill_intents_per_s":900}`,
			},
			want: []string{"| old | fsm-memory | 10 |", "| 1000 |", "in the fill's process", "| new | fsm-memory | 10 |", "| 900 |"},
			rows: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			if err := stateTable(strings.NewReader(strings.Join(tt.lines, "\n")), &out, "old"); err != nil {
				t.Fatal(err)
			}
			s := out.String()
			for _, w := range tt.want {
				if !strings.Contains(s, w) {
					t.Errorf("no %q in\n%s", w, s)
				}
			}
			rows := 0
			for _, line := range strings.Split(s, "\n") {
				if strings.HasPrefix(line, "| new ") || strings.HasPrefix(line, "| old ") {
					rows++
				}
			}
			if rows != tt.rows {
				t.Errorf("%d rows, want %d:\n%s", rows, tt.rows, s)
			}
		})
	}
}
