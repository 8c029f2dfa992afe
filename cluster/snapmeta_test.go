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

// TestSnapshotMetaChecksum: a snapshot whose meta.json changed (still
// valid JSON, so raft would restore it at the wrong index) or whose
// sidecar changed is refused; without a sidecar (legacy) it opens; and
// with the newest refused and the log compacted the node stops
// (ErrUnrestorable).
func TestSnapshotMetaChecksum(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		bad    bool
	}{
		{name: "sound"},
		{name: "meta.json index changed", bad: true, damage: func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "meta.json"), `"Index":200`, `"Index":300`)
		}},
		{name: "meta.json term changed", bad: true, damage: func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "meta.json"), `"Term":3`, `"Term":4`)
		}},
		{name: "sidecar byte flipped", bad: true, damage: func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, snapMetaFile), `"index":200`, `"index":201`)
		}},
		{name: "legacy: no sidecar", damage: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, snapMetaFile)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			snaps := &indexedSnapshots{SnapshotStore: file, dir: filepath.Join(dir, "snapshots")}
			conf := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "127.0.0.1:1"}}}
			_, trans := raft.NewInmemTransport("127.0.0.1:1")
			var newest string
			for _, index := range []uint64{100, 200} {
				sink, err := snaps.Create(raft.SnapshotVersionMax, index, 3, conf, 1, trans)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := sink.Write([]byte("state at " + sink.ID())); err != nil {
					t.Fatal(err)
				}
				if err := sink.Close(); err != nil {
					t.Fatal(err)
				}
				if err := sink.Close(); err != nil { // raft closes it after the FSM's Persist did
					t.Fatalf("second Close: %v", err)
				}
				newest = sink.ID()
			}
			sdir := filepath.Join(dir, "snapshots", newest)
			if _, err := os.Stat(filepath.Join(sdir, snapMetaFile)); err != nil {
				t.Fatalf("no sidecar: %v", err)
			}
			if tc.damage != nil {
				tc.damage(t, sdir)
			}
			_, rc, err := snaps.Open(newest)
			if tc.bad != errors.Is(err, ErrCorruptSnapshotMeta) {
				t.Fatalf("Open = %v, want ErrCorruptSnapshotMeta: %v", err, tc.bad)
			}
			if err == nil {
				_ = rc.Close()
			}
			logs := raft.NewInmemStore()
			for i := uint64(150); i <= 300; i++ {
				if err := logs.StoreLog(&raft.Log{Index: i, Term: 3, Type: raft.LogNoop}); err != nil {
					t.Fatal(err)
				}
			}
			idx, err := checkRestorable(logs, snaps, filepath.Join(dir, "snapshots"))
			if tc.bad != errors.Is(err, ErrUnrestorable) || !tc.bad && idx != 200 {
				t.Fatalf("checkRestorable = %d, %v; want ErrUnrestorable: %v", idx, err, tc.bad)
			}
		})
	}
}

func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s holds no %s: %s", path, old, b)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}
