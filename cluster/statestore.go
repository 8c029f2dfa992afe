package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/fsm/pebblestate"
)

// State engines: where a node keeps its state machine (Config.StateEngine).
const (
	// StateEnginePebble keeps the ledger on disk, in pebble under
	// <data-dir>/state, with memory as a bounded cache; a restart replays
	// only the log after what the store holds. The default.
	StateEnginePebble = "pebble"
	// StateEngineMemory keeps the whole ledger in memory, rebuilt from the
	// latest snapshot and the log at every start (the engine before issue
	// 32; kept for one release and for tests).
	StateEngineMemory = "memory"
)

// ErrStateEngine is a Config.StateEngine this build does not know.
var ErrStateEngine = errors.New("cluster: unknown state engine")

// stateDir is where a node keeps its state machine on disk: the current
// store, and fresh ones an installed snapshot is restored into before it
// replaces the current one in one step (pebblestate.Dir).
type stateDir interface {
	Current() fsm.Store
	// Checkpoint writes a checkpoint of the current store, as synced, to
	// dest (which must not exist).
	Checkpoint(dest string) error
	Stage() (fsm.Store, error)
	Promote(staged fsm.Store) error
	Discard(staged fsm.Store) error
	Close() error
}

// pebbleDir adapts pebblestate.Dir to stateDir.
type pebbleDir struct{ d *pebblestate.Dir }

func (p pebbleDir) Current() fsm.Store { return p.d.Current() }

func (p pebbleDir) Checkpoint(dest string) error { return p.d.Current().Checkpoint(dest) }

func (p pebbleDir) Stage() (fsm.Store, error) {
	s, err := p.d.Stage()
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (p pebbleDir) Promote(s fsm.Store) error { return p.d.Promote(s.(*pebblestate.Store)) }
func (p pebbleDir) Discard(s fsm.Store) error { return p.d.Discard(s.(*pebblestate.Store)) }
func (p pebbleDir) Close() error              { return p.d.Close() }

// openStateMachine opens the state machine cfg asks for.
func openStateMachine(cfg Config) (*stateMachine, error) {
	switch cfg.StateEngine {
	case StateEngineMemory:
		return newStateMachine(), nil
	case StateEnginePebble:
		dir := filepath.Join(cfg.DataDir, "state")
		marker := filepath.Join(cfg.DataDir, rebuildMarker)
		rebuild := false
		if _, err := os.Stat(marker); err == nil {
			rebuild = true
			cfg.Logger.Warn("the state store failed a read or write before the last stop; rebuilding it from the snapshots and the log",
				"marker", marker)
		}
		var sm *stateMachine
		var err error
		if !rebuild {
			if sm, err = openStateStore(dir, cfg); err != nil {
				cfg.Logger.Error("the state store does not open; rebuilding it from the snapshots and the log", "err", err)
				rebuild = true
			}
		}
		if rebuild {
			// The store is derived from the snapshots and the log, which
			// checksum what they hold: start it empty and let catchUpStore
			// restore the newest snapshot and replay the log after it.
			if err := os.RemoveAll(dir); err != nil {
				return nil, fmt.Errorf("cluster: remove the state store to rebuild it: %w", err)
			}
			if sm, err = openStateStore(dir, cfg); err != nil {
				return nil, err
			}
		}
		sm.marker = marker
		sm.log = cfg.Logger.With("node", cfg.ID)
		if err := removeCheckpointDebris(cfg.DataDir); err != nil {
			_ = sm.close()
			return nil, err
		}
		sm.checkpoints = filepath.Join(cfg.DataDir, checkpointsDir)
		return sm, nil
	}
	return nil, fmt.Errorf("%w %q: want %q or %q", ErrStateEngine, cfg.StateEngine, StateEnginePebble, StateEngineMemory)
}

// rebuildMarker is the file in the data dir that makes the next start
// rebuild the state store (written when the store fails a read or write).
const rebuildMarker = "state.rebuild"

func openStateStore(dir string, cfg Config) (*stateMachine, error) {
	d, err := pebblestate.OpenDir(dir, pebblestate.Options{CacheBytes: cfg.StateCacheBytes, MemTableBytes: cfg.StateMemTableBytes, Logger: cfg.Logger.With("node", cfg.ID, "component", "state")})
	if err != nil {
		return nil, fmt.Errorf("cluster: state store: %w", err)
	}
	sm, err := newStateMachineOn(pebbleDir{d})
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return sm, nil
}

// catchUpStore makes the stored state one raft can go on from without
// restoring a snapshot (raft.Config.NoSnapshotRestoreOnStart), and
// returns the index of the snapshot raft starts from: it reads every log
// entry after it (for configuration changes), applies those after what
// the store holds, and skips the rest (ApplyBatch). The store holds the state
// as of index S; raft would restore its newest snapshot (index X) and
// replay the log after it. When S ≥ X the entries after S are in the log
// (the log is compacted only behind a snapshot, and the store is synced
// before one is taken) and nothing needs doing. When S < X (the state
// directory was lost, or this is the first start of this engine on a data
// dir of the memory engine) or the store is ahead of the log (a log that
// lost entries: nothing the store holds past the log can be trusted), the
// newest restorable snapshot is restored into a fresh store, or an empty
// one replaces it when there is none.
func (n *Node) catchUpStore(logs raft.LogStore, snapDir string) (uint64, error) {
	sm := n.sm
	stored := sm.storedIndex()
	metas, err := n.snaps.List()
	if err != nil {
		return 0, fmt.Errorf("cluster: list snapshots: %w", err)
	}
	var newest uint64
	if len(metas) > 0 {
		newest = metas[0].Index
	}
	last, err := logs.LastIndex()
	if err != nil {
		return 0, fmt.Errorf("cluster: log last index: %w", err)
	}
	if stored <= max(last, newest) && (stored >= newest || onlyRaftEntries(logs, stored, newest)) {
		return newest, sm.rebuilt(n.cfg.dirSync)
	}
	restore, err := checkRestorable(logs, n.snaps, snapDir)
	if err != nil {
		return 0, err
	}
	n.log.Warn("rebuilding the state store", "stored_index", stored, "newest_snapshot", newest,
		"last_log_index", last, "from_snapshot", restore)
	// raft, not restoring a snapshot at start, goes on from the newest it
	// lists and replays the log after that one only: the unreadable
	// snapshots newer than the one restored must leave its view, or the
	// entries between the two would never reach the rebuilt store. (On
	// the memory engine raft itself falls back past a snapshot that does
	// not open.)
	if err := n.setAsideSnapshots(metas, restore); err != nil {
		return 0, err
	}
	if restore == 0 {
		if err := sm.reset(); err != nil {
			return 0, err
		}
		return 0, sm.rebuilt(n.cfg.dirSync)
	}
	for _, m := range metas {
		if m.Index != restore {
			continue
		}
		_, rc, err := n.snaps.Open(m.ID)
		if err != nil {
			return 0, fmt.Errorf("cluster: open snapshot %s: %w", m.ID, err)
		}
		if err := sm.Restore(rc); err != nil {
			return 0, fmt.Errorf("cluster: restore snapshot %s into the state store: %w", m.ID, err)
		}
		return restore, sm.rebuilt(n.cfg.dirSync)
	}
	return 0, fmt.Errorf("cluster: snapshot at index %d vanished", restore)
}

// rebuilt removes the rebuild marker once the store is one raft can go on
// from (durably: a marker that comes back rebuilds once more, no harm).
func (s *stateMachine) rebuilt(dirSync func(string) error) error {
	if s.marker == "" {
		return nil
	}
	if err := os.Remove(s.marker); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("cluster: remove %s: %w", s.marker, err)
	}
	return syncDirs(dirSync, filepath.Dir(s.marker))
}

// markRebuild makes the next start rebuild the state store: called when
// the store failed (fsm.ErrStoreIO), before the panic stops the node.
// Until the marker is written the failure may repeat at every start.
func (s *stateMachine) markRebuild(p any) {
	err, ok := p.(error)
	if !ok || !errors.Is(err, fsm.ErrStoreIO) || s.marker == "" {
		return
	}
	f, ferr := os.Create(s.marker)
	if ferr == nil {
		ferr = errors.Join(f.Sync(), f.Close(), syncDir(filepath.Dir(s.marker)))
	}
	if ferr != nil && s.log != nil {
		s.log.Error("the state store failed and could not be marked for a rebuild: the next start may fail the same way",
			"marker", s.marker, "err", ferr)
	}
}

// onlyRaftEntries reports whether the log holds every entry in (from, to]
// and none of them reaches the state machine (no command, no
// configuration: raft's no-ops and barriers): a store synced at from then
// holds the state as of to. A snapshot's index is raft's last applied
// entry, which may be such an entry past the last one the state machine
// saw.
func onlyRaftEntries(logs raft.LogStore, from, to uint64) bool {
	for i := from + 1; i <= to; i++ {
		var e raft.Log
		if err := logs.GetLog(i, &e); err != nil {
			return false
		}
		if e.Type == raft.LogCommand || e.Type == raft.LogConfiguration {
			return false
		}
	}
	return true
}

// unreadableSnapshotsDir is where a rebuild moves the snapshots it could
// not read (kept for a post-mortem, out of raft's view).
const unreadableSnapshotsDir = "snapshots.unreadable"

// setAsideSnapshots moves every listed snapshot newer than index out of
// the snapshot store, durably.
func (n *Node) setAsideSnapshots(metas []*raft.SnapshotMeta, index uint64) error {
	is := n.snaps
	if is.dir == "" {
		return nil
	}
	aside := filepath.Join(n.cfg.DataDir, unreadableSnapshotsDir)
	moved := false
	for _, m := range metas {
		if m.Index <= index {
			continue
		}
		if err := os.MkdirAll(aside, 0o750); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		if err := os.Rename(filepath.Join(is.dir, m.ID), filepath.Join(aside, m.ID)); err != nil {
			return fmt.Errorf("cluster: set the unreadable snapshot %s aside: %w", m.ID, err)
		}
		n.log.Warn("an unreadable snapshot was set aside", "snapshot", m.ID, "index", m.Index, "to", aside)
		moved = true
	}
	if !moved {
		return nil
	}
	return syncDirs(n.cfg.dirSync, is.dir, aside, n.cfg.DataDir)
}
