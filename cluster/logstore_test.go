package cluster

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Each log store keeps its entries and stable state across a reopen.
func TestOpenLogStoreKeepsItsState(t *testing.T) {
	for _, kind := range []string{LogStoreWAL, LogStoreBoltDB} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openLogStore(dir, kind, hclog.NewNullLogger(), logStoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("a")}, {Index: 2, Term: 1, Data: []byte("b")}}); err != nil {
				t.Fatal(err)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = openLogStore(dir, kind, hclog.NewNullLogger(), logStoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var l raft.Log
			if err := s.GetLog(2, &l); err != nil || string(l.Data) != "b" {
				t.Fatalf("reopened: entry 2 = %q, %v", l.Data, err)
			}
			if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
				t.Fatalf("reopened: term %d, %v", term, err)
			}
			other := map[string]string{LogStoreWAL: "raft.db", LogStoreBoltDB: "wal"}[kind]
			if _, err := os.Stat(filepath.Join(dir, other)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a %s store made %s too (%v)", kind, other, err)
			}
		})
	}
}

// A data dir holds one log store for life: opening the other kind on it
// is refused (it would start an empty second log), and leaves the data
// dir as it was.
func TestOpenLogStoreRefusesTheOtherKind(t *testing.T) {
	for _, tc := range []struct{ made, asked, other string }{
		{LogStoreBoltDB, LogStoreWAL, "wal"},
		{LogStoreWAL, LogStoreBoltDB, "raft.db"},
	} {
		t.Run(tc.made+" opened as "+tc.asked, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openLogStore(dir, tc.made, hclog.NewNullLogger(), logStoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("old")}}); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err := openLogStore(dir, tc.asked, hclog.NewNullLogger(), logStoreOptions{}); !errors.Is(err, ErrLogStore) ||
				!strings.Contains(err.Error(), `holds a "`+tc.made+`" log store`) {
				if s != nil {
					_ = s.Close()
				}
				t.Fatalf("open %s on a %s data dir: %v, want ErrLogStore naming %s", tc.asked, tc.made, err, tc.made)
			}
			if _, err := os.Stat(filepath.Join(dir, tc.other)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the refused open made %s (%v)", tc.other, err)
			}
			s, err = openLogStore(dir, tc.made, hclog.NewNullLogger(), logStoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var l raft.Log
			if err := s.GetLog(1, &l); err != nil || string(l.Data) != "old" {
				t.Fatalf("the %s store after the refusal: entry 1 = %q, %v", tc.made, l.Data, err)
			}
		})
	}
	if _, err := openLogStore(t.TempDir(), "bolt", hclog.NewNullLogger(), logStoreOptions{}); !errors.Is(err, ErrLogStore) {
		t.Fatalf("an unknown kind: %v, want ErrLogStore", err)
	}
}

// A node runs on raft-boltdb when configured, restarts on its own log,
// and refuses to start on that data dir as a raft-wal node.
func TestNodeOnBoltDB(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.LogStore = LogStoreBoltDB })
	n := tc.start("n1", 1)
	ctx := ctxT(t)
	tc.propose(ctx, claim("k", "o"))
	want, index := n.Digest()
	raftAddr, gossipAddr := n.RaftAddr(), n.GossipAddr()
	if err := n.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, "n1")
	cfg := Config{ID: "n1", DataDir: filepath.Join(tc.dir, "n1"), RaftAddr: raftAddr, GossipAddr: gossipAddr,
		Logger: testLogger(t)}
	if bad, err := New(cfg); !errors.Is(err, ErrLogStore) {
		if bad != nil {
			_ = bad.Kill()
		}
		t.Fatalf("a raft-wal node on a raft-boltdb data dir: %v, want ErrLogStore", err)
	}
	n = tc.startAt("n1", raftAddr, gossipAddr, 1)
	waitFor(t, 30*time.Second, "the restarted node to apply its log", func() bool {
		got, idx := n.Digest()
		return idx >= index && got == want
	})
}

// A follower whose log conflicts with a new leader's truncates its tail
// (raft's "clearing log suffix") and may then stop. raft-wal before v0.4.1
// marked the tail segment sealed on a tail truncation without writing its
// index block, so the node panicked on every later start ("sealed segment
// has no index block", hashicorp/raft-wal#31): the fault suite's membership
// nemesis stopped a deposed leader right after such a truncation and the
// node never came back.
func TestWALSurvivesATailTruncationAndARestart(t *testing.T) {
	dir := t.TempDir()
	s, err := openLogStore(dir, LogStoreWAL, hclog.NewNullLogger(), logStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: []byte{byte(i)}})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(9, 10); err != nil { // the conflicting suffix
		t.Fatal(err)
	}
	if err := s.StoreLogs([]*raft.Log{{Index: 9, Term: 2, Data: []byte("new leader")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openLogStore(dir, LogStoreWAL, hclog.NewNullLogger(), logStoreOptions{})
	if err != nil {
		t.Fatalf("reopening after a tail truncation: %v", err)
	}
	defer s.Close()
	for i := uint64(1); i <= 9; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d after a tail truncation and a restart: %v", i, err)
		}
		if i == 9 && (l.Term != 2 || string(l.Data) != "new leader") {
			t.Fatalf("entry 9 = term %d %q, want the new leader's", l.Term, l.Data)
		}
	}
	if last, err := s.LastIndex(); err != nil || last != 9 {
		t.Fatalf("last index %d, %v; want 9", last, err)
	}
}

// The timed wrapper (Config.ObserveLogWrite) times every append and
// answers raft.MonotonicLogStore as the store it wraps: hiding raft-wal's
// answer made Raft keep the old log after a snapshot restore, and raft-wal
// then refused the next append ("non-monotonic log entries").
func TestTimedLogStoreTimesAppendsAndKeepsMonotonic(t *testing.T) {
	cases := []struct {
		kind      string
		monotonic bool
	}{
		{LogStoreWAL, true},
		{LogStoreBoltDB, false},
	}
	for _, tt := range cases {
		t.Run(tt.kind, func(t *testing.T) {
			s, err := openLogStore(t.TempDir(), tt.kind, hclog.NewNullLogger(), logStoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var observed int
			timed := timedLogStore{LogStore: s, observe: func(time.Duration) { observed++ }}
			cache, err := raft.NewLogCache(8, timed)
			if err != nil {
				t.Fatal(err)
			}
			if got := cache.IsMonotonic(); got != tt.monotonic {
				t.Fatalf("IsMonotonic through the wrapper and Raft's cache = %v, want %v", got, tt.monotonic)
			}
			if err := cache.StoreLog(&raft.Log{Index: 1, Term: 1}); err != nil {
				t.Fatal(err)
			}
			if err := cache.StoreLogs([]*raft.Log{{Index: 2, Term: 1}, {Index: 3, Term: 1}}); err != nil {
				t.Fatal(err)
			}
			if observed != 2 {
				t.Fatalf("%d appends timed, want 2", observed)
			}
		})
	}
}
