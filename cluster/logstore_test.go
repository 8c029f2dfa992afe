package cluster

import (
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

func TestOpenLogStoreNewDirUsesWALAndKeepsItsState(t *testing.T) {
	dir := t.TempDir()
	s, kind, err := openLogStore(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if kind != storeWAL {
		t.Fatalf("a new data dir got %s, want %s", kind, storeWAL)
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
	s, kind, err = openLogStore(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var l raft.Log
	if err := s.GetLog(2, &l); err != nil || string(l.Data) != "b" || kind != storeWAL {
		t.Fatalf("reopened %s: entry 2 = %q, %v", kind, l.Data, err)
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Fatalf("reopened: term %d, %v", term, err)
	}
}

func TestOpenLogStoreExistingBoltDirStaysOnBolt(t *testing.T) {
	dir := t.TempDir()
	old, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.StoreLog(&raft.Log{Index: 1, Term: 1, Data: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s, kind, err := openLogStore(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var l raft.Log
	if kind != storeBolt || s.GetLog(1, &l) != nil || string(l.Data) != "old" {
		t.Fatalf("a data dir with raft.db got %s (entry %q): an existing node must keep its log", kind, l.Data)
	}
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
	s, _, err := openLogStore(dir, hclog.NewNullLogger())
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
	s, _, err = openLogStore(dir, hclog.NewNullLogger())
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
