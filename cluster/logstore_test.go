package cluster

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// testLogStoreKinds are the log store kinds, each with the other kind and
// the file or dir the other kind keeps in a data dir.
var testLogStoreKinds = []struct{ kind, other, otherFile string }{
	{LogStoreWAL, LogStoreBoltDB, "raft.db"},
	{LogStoreBoltDB, LogStoreWAL, "wal"},
}

// openTestLogStore opens a log store of kind in dir, closed at the end of
// the test (closing it before is harmless: both kinds close once).
func openTestLogStore(t *testing.T, dir, kind string) logStore {
	t.Helper()
	s, err := openLogStore(dir, kind, hclog.NewNullLogger(), logStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// forEachLogStore runs test in a subtest per log store kind (raft-wal,
// raft-boltdb) on a store of that kind opened in a fresh data dir dir; a
// test that closes it may reopen it with openTestLogStore(t, dir, kind).
func forEachLogStore(t *testing.T, test func(t *testing.T, kind, dir string, store logStore)) {
	t.Helper()
	for _, k := range testLogStoreKinds {
		t.Run(k.kind, func(t *testing.T) {
			dir := t.TempDir()
			test(t, k.kind, dir, openTestLogStore(t, dir, k.kind))
		})
	}
}

// otherLogStore is the kind that is not kind, and the file or dir it
// keeps in a data dir.
func otherLogStore(kind string) (other, file string) {
	for _, k := range testLogStoreKinds {
		if k.kind == kind {
			return k.other, k.otherFile
		}
	}
	panic("unknown log store kind " + kind)
}

// Each log store keeps its entries and stable state across a reopen.
func TestOpenLogStoreKeepsItsState(t *testing.T) {
	forEachLogStore(t, func(t *testing.T, kind, dir string, s logStore) {
		if err := s.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("a")}, {Index: 2, Term: 1, Data: []byte("b")}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openTestLogStore(t, dir, kind)
		var l raft.Log
		if err := s.GetLog(2, &l); err != nil || string(l.Data) != "b" {
			t.Fatalf("reopened: entry 2 = %q, %v", l.Data, err)
		}
		if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
			t.Fatalf("reopened: term %d, %v", term, err)
		}
		_, other := otherLogStore(kind)
		if _, err := os.Stat(filepath.Join(dir, other)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a %s store made %s too (%v)", kind, other, err)
		}
	})
}

// A data dir holds one log store for life: opening the other kind on it
// is refused (it would start an empty second log), and leaves the data
// dir as it was.
func TestOpenLogStoreRefusesTheOtherKind(t *testing.T) {
	forEachLogStore(t, func(t *testing.T, made, dir string, s logStore) {
		asked, askedFile := otherLogStore(made)
		if err := s.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("old")}}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if s, err := openLogStore(dir, asked, hclog.NewNullLogger(), logStoreOptions{}); !errors.Is(err, ErrLogStore) ||
			!strings.Contains(err.Error(), `holds a "`+made+`" log store`) {
			if s != nil {
				_ = s.Close()
			}
			t.Fatalf("open %s on a %s data dir: %v, want ErrLogStore naming %s", asked, made, err, made)
		}
		if _, err := os.Stat(filepath.Join(dir, askedFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the refused open made %s (%v)", askedFile, err)
		}
		s = openTestLogStore(t, dir, made)
		var l raft.Log
		if err := s.GetLog(1, &l); err != nil || string(l.Data) != "old" {
			t.Fatalf("the %s store after the refusal: entry 1 = %q, %v", made, l.Data, err)
		}
	})
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

// failingAppends is a log store whose appends fail with err; it answers
// raft.MonotonicLogStore as the store it wraps.
type failingAppends struct {
	raft.LogStore
	err error
}

func (s failingAppends) StoreLogs([]*raft.Log) error { return s.err }
func (s failingAppends) IsMonotonic() bool           { return innerMonotonic(s.LogStore) }

// The log store wrappers raft's log cache sits on (checked, full-disk
// guard, timed) answer raft.MonotonicLogStore as the store they wrap
// (raft-wal monotonic, raft-boltdb not): hiding raft-wal's answer made
// Raft keep the old log after a snapshot restore, and raft-wal then
// refused the next append ("non-monotonic log entries"). A single append
// (StoreLog) goes through the wrapper's own StoreLogs: the wrapper applies
// what it adds to it.
func TestLogStoreWrappers(t *testing.T) {
	for _, tt := range []struct {
		name string
		// wrap returns the wrapper around inner and added, which reports
		// whether the wrapper applied what it adds to a StoreLog of entry
		// 1 that returned err.
		wrap func(t *testing.T, inner raft.LogStore) (w raft.LogStore, added func(err error) bool)
	}{
		{"checkedLog", func(t *testing.T, inner raft.LogStore) (raft.LogStore, func(error) bool) {
			return &checkedLog{LogStore: inner}, func(err error) bool {
				var l raft.Log // as stored, with its checksum
				return err == nil && inner.GetLog(1, &l) == nil && bytes.HasPrefix(l.Extensions, logMagic)
			}
		}},
		{"guardedLogStore", func(t *testing.T, inner raft.LogStore) (raft.LogStore, func(error) bool) {
			g := &fullGuard{ctx: t.Context(), log: slog.New(slog.DiscardHandler), every: time.Hour,
				probe: func() error { return syscall.ENOSPC }, stand: func(bool) {}}
			return guardedLogStore{LogStore: failingAppends{inner, syscall.ENOSPC}, guard: g}, func(err error) bool {
				return errors.Is(err, syscall.ENOSPC) && g.isFull()
			}
		}},
		{"timedLogStore", func(t *testing.T, inner raft.LogStore) (raft.LogStore, func(error) bool) {
			var timed atomic.Int32
			return timedLogStore{LogStore: inner, observe: func(time.Duration) { timed.Add(1) }}, func(err error) bool {
				return err == nil && timed.Load() == 1
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEachLogStore(t, func(t *testing.T, kind, _ string, s logStore) {
				w, added := tt.wrap(t, s)
				cache, err := raft.NewLogCache(8, w)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := cache.IsMonotonic(), kind == LogStoreWAL; got != want {
					t.Fatalf("IsMonotonic through the wrapper and Raft's cache = %v, want %v", got, want)
				}
				if err := w.StoreLog(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("one")}); !added(err) {
					t.Fatalf("%s did not apply what it adds to StoreLog (%v)", tt.name, err)
				}
			})
		})
	}
}
