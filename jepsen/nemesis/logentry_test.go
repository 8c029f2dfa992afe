package nemesis

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// TestReplayedDigits: in a real raft-wal segment, corrupt-log-entry's
// candidates are the payload digits of entries past the given index,
// never in the segment's last batch, and only in a key's first claim.
func TestReplayedDigits(t *testing.T) {
	dir := t.TempDir()
	w, err := wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Ten batches of two entries; entries 2k-1 and 2k both claim key
	// s1:g0:2k, so every key is claimed twice, first by the odd entry.
	for b := 0; b < 10; b++ {
		var logs []*raft.Log
		for j := 0; j < 2; j++ {
			i := uint64(2*b + j + 1)
			key := fmt.Sprintf("s1:g0:%d", (i+1)/2*2) // entries 1,2 -> 2; 3,4 -> 4; ...
			logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand,
				Data: []byte(fmt.Sprintf("\x01\x01cmd{\"key\":\"%s\",\"variant\":\"a\"}", key))})
		}
		if err := w.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments %v, %v", segs, err)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, off := range replayedDigits(b, 6, map[string]bool{}) {
		if c := b[off]; c < '0' || c > '8' || (c-'0')%2 != 0 {
			t.Fatalf("offset %d holds %q, not an even digit", off, c)
		}
		// The key the digit belongs to: back to the opening quote.
		start := off
		for b[start] != '"' {
			start--
		}
		end := off
		for b[end] != '"' {
			end++
		}
		got[string(b[start+1:end])]++
	}
	// Entries 7 to 18 (past 6, not the last batch, 19 and 20), first
	// claims only: entries 7, 9, ..., 17, keys 8 to 18, two even digits
	// each (the 0 of g0 and the key's own).
	want := map[string]int{"s1:g0:8": 2, "s1:g0:10": 2, "s1:g0:12": 2, "s1:g0:14": 2, "s1:g0:16": 2, "s1:g0:18": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("candidate digits per key %v, want %v", got, want)
	}
}
