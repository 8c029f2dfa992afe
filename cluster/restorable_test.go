package cluster

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestCheckRestorable: a node whose newest snapshot is corrupt and whose
// log was compacted past the older one stops with ErrUnrestorable (raft
// would panic with "log not found"); with the newest sound, or a log that
// reaches back to the older one, it starts.
func TestCheckRestorable(t *testing.T) {
	cases := []struct {
		name        string
		corrupt     []int // which snapshots (by index) get a flipped byte
		badMeta     []int // which snapshots (by index) get a meta.json that does not parse
		logFrom     uint64
		logTo       uint64
		unrestoring bool
	}{
		{name: "sound snapshots", logFrom: 150, logTo: 300},
		{name: "newest corrupt, log compacted past the older", corrupt: []int{200}, logFrom: 150, logTo: 300, unrestoring: true},
		{name: "newest corrupt, log reaches back to the older", corrupt: []int{200}, logFrom: 101, logTo: 300},
		{name: "older corrupt only", corrupt: []int{100}, logFrom: 150, logTo: 300},
		{name: "both corrupt, log compacted", corrupt: []int{100, 200}, logFrom: 150, logTo: 300, unrestoring: true},
		{name: "both corrupt, whole log kept (raft starts on no log alone)", corrupt: []int{100, 200}, logFrom: 1, logTo: 300, unrestoring: true},
		{name: "newest meta.json broken, log compacted past the older", badMeta: []int{200}, logFrom: 150, logTo: 300, unrestoring: true},
		{name: "newest meta.json broken, log reaches back", badMeta: []int{200}, logFrom: 101, logTo: 300},
		{name: "older meta.json broken only", badMeta: []int{100}, logFrom: 150, logTo: 300},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			ids := map[int]string{}
			for _, index := range []int{100, 200} {
				sink, err := snaps.Create(raft.SnapshotVersionMax, uint64(index), 1, raft.Configuration{}, 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := sink.Write([]byte("state at index " + filepath.Base(sink.ID()))); err != nil {
					t.Fatal(err)
				}
				if err := sink.Close(); err != nil {
					t.Fatal(err)
				}
				ids[index] = sink.ID()
			}
			for _, index := range tc.corrupt {
				p := filepath.Join(dir, "snapshots", ids[index], "state.bin")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				b[3] ^= 0x10
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, index := range tc.badMeta {
				p := filepath.Join(dir, "snapshots", ids[index], "meta.json")
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, bytes.Replace(b, []byte(","), []byte("."), 1), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			logs := raft.NewInmemStore()
			for i := tc.logFrom; i <= tc.logTo; i++ {
				if err := logs.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogNoop}); err != nil {
					t.Fatal(err)
				}
			}
			_, err = checkRestorable(logs, snaps, filepath.Join(dir, "snapshots"))
			if got := errors.Is(err, ErrUnrestorable); got != tc.unrestoring {
				t.Fatalf("checkRestorable = %v, want ErrUnrestorable: %v", err, tc.unrestoring)
			}
		})
	}
}
