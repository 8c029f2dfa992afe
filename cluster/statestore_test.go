package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
)

// restartCase is one way a stopped node's state store can be found.
type restartCase struct {
	name string
	// damage changes the stopped node's data dir.
	damage func(t *testing.T, dataDir string)
	// fromStore: the restarted node goes on from its store (no snapshot
	// restored, so it holds state before it hears from the leader).
	fromStore bool
	// trailingLogs, when set, keeps that much log behind each snapshot
	// (the log then reaches back past an older snapshot).
	trailingLogs uint64
}

// TestNodeRestartsFromItsStateStore restarts a follower of a cluster that
// took snapshots and compacted its log: with its store intact it goes on
// from what the store holds; with the store lost, unreadable or marked
// for a rebuild it rebuilds it from its newest snapshot and the log. In
// every case it ends with the leader's digest and the cluster serves.
func TestNodeRestartsFromItsStateStore(t *testing.T) {
	cases := []restartCase{
		{name: "intact", damage: func(*testing.T, string) {}, fromStore: true},
		{name: "store removed", damage: func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "store unreadable", damage: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "state", "CURRENT"), []byte("gen-999999\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "marked for a rebuild", damage: func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, rebuildMarker), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		// The rebuild falls back past an unreadable newest snapshot to an
		// older one, and must replay the log from that one: raft, which
		// goes on from the newest snapshot it lists, must not list the
		// unreadable one any more.
		{name: "newest snapshot unreadable", trailingLogs: 1000, damage: func(t *testing.T, dir string) {
			// Its state.bin, which raft's CRC covers: the checkpoint's
			// sstables are hard links shared with the older snapshot and
			// the store, so damage there would hit those too.
			states, err := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
			if err != nil || len(states) < 2 {
				t.Fatalf("snapshots: %v %v", states, err)
			}
			newest := states[0]
			for _, p := range states {
				if snapshotIndex(filepath.Base(filepath.Dir(p))) > snapshotIndex(filepath.Base(filepath.Dir(newest))) {
					newest = p
				}
			}
			if err := os.WriteFile(newest, []byte(`{"format":"intentd-checkpoint","version":1,"index":1}`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, rebuildMarker), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { testRestartFromStore(t, tc) })
	}
}

func testRestartFromStore(t *testing.T, rc restartCase) {
	tc := newTestCluster(t, func(c *Config) {
		compacting(c)
		if rc.trailingLogs > 0 {
			c.Raft.TrailingLogs = rc.trailingLogs
		}
	})
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)
	for i := 0; i < 200; i++ {
		tc.propose(ctx, claim(fmt.Sprintf("before-%d", i), "o"))
	}
	follower := tc.follower(leader)
	waitFor(t, 60*time.Second, "the follower to take two snapshots and compact", func() bool {
		first, err := follower.store.FirstIndex()
		metas, lerr := follower.snaps.List()
		compacted := err == nil && (first > 100 || rc.trailingLogs > 0)
		return compacted && lerr == nil && len(metas) >= 2 && follower.sm.storedIndex() >= leader.sm.storedIndex()
	})
	id, gossipJoin := follower.ID(), leader.GossipAddr()
	raftAddr, gossipAddr := follower.RaftAddr(), follower.GossipAddr()
	if err := follower.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, id)
	rc.damage(t, filepath.Join(tc.dir, id))
	restarted := tc.startAt(id, raftAddr, gossipAddr, 3, gossipJoin)
	if _, err := os.Stat(filepath.Join(tc.dir, id, rebuildMarker)); !os.IsNotExist(err) {
		t.Fatalf("the rebuild marker is still there after the start: %v", err)
	}
	var held bool
	restarted.sm.read(func(l *fsm.Machine) { held = l.Get("default", "before-0") != nil })
	if rc.fromStore && !held {
		t.Fatal("the restarted node does not hold what its store held before it hears from the leader")
	}
	tc.propose(ctx, claim("after", "o"))
	waitSameDigest(t, restarted, leader, "the restarted node to catch up")
}

// TestMixedStateEnginesAgree runs a cluster of nodes on both state
// engines, one of them catching up from a snapshot the others sent: they
// exchange the same snapshots and end with equal digests.
func TestMixedStateEnginesAgree(t *testing.T) {
	engines := map[string]string{"n1": StateEnginePebble, "n2": StateEngineMemory, "n3": StateEnginePebble}
	tc := newTestCluster(t, compactingOn(engines))
	nodes := tc.startN(3)
	ctx := ctxT(t)
	for i := 0; i < 150; i++ {
		tc.propose(ctx, claim(fmt.Sprintf("mixed-%d", i), "o"))
	}
	leader := tc.leader()
	waitFor(t, 60*time.Second, "equal digests on both engines", func() bool {
		want, wantIndex := leader.Digest()
		for _, n := range nodes {
			if got, idx := n.Digest(); idx != wantIndex || got != want {
				return false
			}
		}
		return true
	})
}

// TestCheckpointSnapshots takes a snapshot on a node whose state is on
// disk: state.bin holds a one-line reference and the snapshot a pebble
// checkpoint; opened, it streams a version 1 snapshot that fsm.Restore
// takes, of every intent. A node of the memory engine that fell behind
// installs it from the leader and ends with the leader's digest.
func TestCheckpointSnapshots(t *testing.T) {
	engines := map[string]string{"n1": StateEnginePebble, "n2": StateEnginePebble, "n3": StateEngineMemory}
	tc := newTestCluster(t, compactingOn(engines))
	nodes := tc.startN(3)
	ctx := ctxT(t)
	var memory *Node
	for _, n := range nodes {
		if n.ID() == "n3" {
			memory = n
		}
	}
	waitFor(t, 30*time.Second, "a pebble leader", func() bool {
		l := tc.leader()
		if l == memory {
			_ = l.raft.LeadershipTransfer().Error()
			return false
		}
		return true
	})
	raftAddr, gossipAddr := memory.RaftAddr(), memory.GossipAddr()
	if err := memory.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, memory.ID())
	for i := 0; i < 200; i++ {
		tc.propose(ctx, claim(fmt.Sprintf("cp-%d", i), "o"))
	}
	leader := tc.leader()
	waitFor(t, 60*time.Second, "the leader to snapshot and compact", func() bool {
		first, err := leader.store.FirstIndex()
		return err == nil && first > 100
	})
	metas, err := leader.snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("snapshots: %v %v", metas, err)
	}
	dir := filepath.Join(leader.cfg.DataDir, "snapshots", metas[0].ID)
	state, err := os.ReadFile(filepath.Join(dir, "state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(state, []byte(`{"format":"`+checkpointFormat+`"`)) || len(state) > 512 {
		t.Fatalf("state.bin is not a checkpoint reference: %q", state[:min(len(state), 200)])
	}
	if _, err := os.Stat(filepath.Join(dir, checkpointDirName)); err != nil {
		t.Fatalf("no checkpoint in the snapshot: %v", err)
	}
	meta, rc, err := leader.snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != meta.Size {
		t.Fatalf("the stream is %d bytes, its meta says %d", len(data), meta.Size)
	}
	l, err := fsm.Restore(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the stream does not restore: %v", err)
	}
	var ref checkpointRef
	if err := json.Unmarshal(state, &ref); err != nil {
		t.Fatal(err)
	}
	if l.Len() == 0 || l.Len() != ref.Intents {
		t.Fatalf("the snapshot holds %d intents, its reference says %d", l.Len(), ref.Intents)
	}

	restarted := tc.startAt("n3", raftAddr, gossipAddr, 3, leader.GossipAddr())
	waitSameDigest(t, restarted, leader, "the memory node to catch up from the checkpoint")
}

// TestOnlyRaftEntries: a store synced at S covers a snapshot at X > S
// only when every entry in (S, X] is in the log and none reaches the state
// machine.
func TestOnlyRaftEntries(t *testing.T) {
	logs := raft.NewInmemStore()
	entries := []*raft.Log{
		{Index: 1, Type: raft.LogCommand}, {Index: 2, Type: raft.LogConfiguration},
		{Index: 3, Type: raft.LogNoop}, {Index: 4, Type: raft.LogBarrier}, {Index: 5, Type: raft.LogCommand},
		{Index: 7, Type: raft.LogNoop}, // 6 is missing
	}
	if err := logs.StoreLogs(entries); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		from, to uint64
		want     bool
	}{
		{2, 4, true},  // a no-op and a barrier
		{4, 4, true},  // nothing in between
		{1, 4, false}, // a configuration entry
		{0, 4, false}, // a command
		{4, 5, false}, // a command
		{5, 7, false}, // 6 is not in the log
	}
	for _, c := range cases {
		if got := onlyRaftEntries(logs, c.from, c.to); got != c.want {
			t.Errorf("onlyRaftEntries(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

// snapshotIndex is the index in a raft snapshot ID (term-index-millis).
func snapshotIndex(id string) uint64 {
	var term, index, ms uint64
	_, _ = fmt.Sscanf(id, "%d-%d-%d", &term, &index, &ms)
	return index
}

// compactingOn is compacting with each node on the state engine engines
// names for its ID.
func compactingOn(engines map[string]string) func(*Config) {
	return func(c *Config) {
		c.StateEngine = engines[c.ID]
		compacting(c)
	}
}
