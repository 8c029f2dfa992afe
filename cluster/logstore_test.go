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
