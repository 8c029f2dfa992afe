package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// syncRecorder records the directories a node fsyncs, then fsyncs them.
type syncRecorder struct {
	mu   sync.Mutex
	dirs []string
}

func (r *syncRecorder) sync(path string) error {
	r.mu.Lock()
	r.dirs = append(r.dirs, path)
	r.mu.Unlock()
	return syncDir(path)
}

func (r *syncRecorder) synced(path string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.dirs, path)
}

// TestDirectoriesAreMadeDurable: a node fsyncs its data directory's
// parent and itself, the log store's and the snapshot store's
// directories, and every snapshot directory raft moves into place (its
// meta.json would otherwise be lost with a power loss while the log it
// replaced is compacted: a node that could not start again). Before, none
// of them was fsynced by intentd.
func TestDirectoriesAreMadeDurable(t *testing.T) {
	for _, store := range []string{LogStoreWAL, LogStoreBoltDB} {
		t.Run(store, func(t *testing.T) {
			rec := &syncRecorder{}
			tc := newTestCluster(t, func(c *Config) {
				c.dirSync = rec.sync
				c.LogStore = store
				c.Raft.SnapshotThreshold = 16
				c.Raft.SnapshotInterval = 50 * time.Millisecond
				c.Raft.TrailingLogs = 4
			})
			n := tc.start("n1", 1)
			dataDir := filepath.Join(tc.dir, "n1")
			want := []string{tc.dir, dataDir, filepath.Join(dataDir, "snapshots")}
			if store == LogStoreWAL {
				want = append(want, filepath.Join(dataDir, "wal"))
			}
			for _, d := range want {
				if !rec.synced(d) {
					t.Errorf("%s was not fsynced at start", d)
				}
			}
			waitFor(t, 30*time.Second, "n1 to lead", func() bool { return n.IsLeader() })
			ctx := ctxT(t)
			for i := range 64 {
				tc.propose(ctx, claim(fmt.Sprintf("durable-%d", i), "o"))
			}
			snapshots := filepath.Join(dataDir, "snapshots")
			waitFor(t, 30*time.Second, "a snapshot and its directory fsynced", func() bool {
				entries, err := os.ReadDir(snapshots)
				if err != nil {
					return false
				}
				for _, e := range entries {
					if e.IsDir() && filepath.Ext(e.Name()) != ".tmp" && rec.synced(filepath.Join(snapshots, e.Name())) {
						return true
					}
				}
				return false
			})
		})
	}
}

// TestSyncDirsStopsAtTheFirstFailure: a directory that cannot be fsynced
// is an error, naming it, and nothing after it is tried.
func TestSyncDirsStopsAtTheFirstFailure(t *testing.T) {
	dir := t.TempDir()
	var tried []string
	err := syncDirs(func(p string) error {
		tried = append(tried, p)
		return syncDir(p)
	}, dir, filepath.Join(dir, "missing"), dir)
	if err == nil || len(tried) != 2 {
		t.Fatalf("err %v after %v", err, tried)
	}
}
