package cluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/fsm/pebblestate"
)

// Checkpoint snapshots. A node whose state is on disk does not write the
// whole ledger into every Raft snapshot: raft's state.bin holds a one-line
// reference (checkpointRef) and the snapshot's directory a checkpoint of
// the state store (pebble hard links of its sstables and a copy of its
// manifest), which costs time and disk in the number of files, not in the
// ledger's bytes. The version 1 stream every node restores (fsm.Restore)
// is made from the checkpoint only when a snapshot is read: sent to a
// follower that is behind, or restored by a node rebuilding its store
// (indexedSnapshots.Open). See DESIGN.md, "Checkpoint snapshots".

// checkpointFormat names a checkpoint reference in a snapshot's state.bin.
const checkpointFormat = "intentd-checkpoint"

// checkpointDirName is the checkpoint's directory inside a snapshot's.
const checkpointDirName = "checkpoint"

// checkpointsDir is where the state machine writes a checkpoint before
// raft's snapshot sink exists (under the data dir, so the rename into the
// snapshot is on one file system); what a crash leaves there is removed at
// start.
const checkpointsDir = "checkpoints"

// checkpointRef is what a checkpoint snapshot's state.bin holds.
type checkpointRef struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Index is the last Raft index the state machine applied when the
	// checkpoint was taken: the snapshot's index, or before it when only
	// no-ops and barriers followed.
	Index uint64 `json:"index"`
	// Intents is how many intents it holds.
	Intents int `json:"intents"`
}

// checkpointSnapshot is the raft.FSMSnapshot of a state store: a
// checkpoint taken when raft asked for the snapshot, and a view of the
// same state for a sink that is not a snapshot directory (streamed as
// version 1, like a snapshot of the memory engine).
type checkpointSnapshot struct {
	path string // the checkpoint, until Persist moves it into the snapshot
	ref  checkpointRef
	l    *fsm.Machine
}

// Persist implements raft.FSMSnapshot: the checkpoint moves into the
// snapshot's temporary directory and state.bin gets the reference; the
// sink's Close makes both durable (durableSink).
func (c *checkpointSnapshot) Persist(sink raft.SnapshotSink) error {
	ds, ok := sink.(*durableSink)
	if !ok || ds.dir == "" {
		return (&snapshot{l: c.l}).Persist(sink)
	}
	dest := filepath.Join(ds.dir, ds.ID()+tmpSnapshotSuffix, checkpointDirName)
	if err := os.Rename(c.path, dest); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: move the checkpoint into it: %w", err)
	}
	c.path = ""
	line, err := json.Marshal(c.ref)
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	if _, err := sink.Write(append(line, '\n')); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (c *checkpointSnapshot) Release() {
	c.l.Release()
	if c.path != "" {
		_ = os.RemoveAll(c.path)
		c.path = ""
	}
}

// readCheckpointRef reads state.bin's first line from br without
// consuming it: a checkpoint reference, or nil for a version 1 stream (or
// anything else, which fsm.Restore then refuses).
func readCheckpointRef(br *bufio.Reader) *checkpointRef {
	head, _ := br.Peek(len(`{"format":"`) + len(checkpointFormat) + 1)
	if !bytes.HasPrefix(head, []byte(`{"format":"`+checkpointFormat+`"`)) {
		return nil
	}
	line, err := br.ReadBytes('\n')
	if err != nil {
		return &checkpointRef{} // a reference cut short: refused below
	}
	var ref checkpointRef
	if err := json.Unmarshal(line, &ref); err != nil {
		return &checkpointRef{}
	}
	return &ref
}

// errBadCheckpoint is a checkpoint snapshot that cannot be read.
var errBadCheckpoint = errors.New("cluster: unreadable checkpoint snapshot")

// checkpointReader serialises the reading of checkpoints: pebble locks a
// database's directory, read-only too, so one checkpoint is streamed at a
// time (raft sends a snapshot to one follower at a time in any case).
type checkpointReader struct{ mu sync.Mutex }

// open opens the checkpoint of snapshot meta in dir as a version 1
// stream: one pass over the checkpoint sizes the stream (raft sends its
// size first), a second writes it as it is read.
func (c *checkpointReader) open(dir string, meta *raft.SnapshotMeta, ref *checkpointRef) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if ref.Version != 1 || ref.Index > meta.Index {
		return nil, nil, fmt.Errorf("%w: snapshot %s: reference %+v", errBadCheckpoint, meta.ID, *ref)
	}
	c.mu.Lock()
	ro, l, err := openCheckpoint(filepath.Join(dir, meta.ID, checkpointDirName))
	if err != nil {
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: snapshot %s: %w", errBadCheckpoint, meta.ID, err)
	}
	size := &countingWriter{w: io.Discard}
	if err := writeStored(l, size); err != nil {
		_ = ro.Close()
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: snapshot %s: %w", errBadCheckpoint, meta.ID, err)
	}
	m := *meta
	m.Size = size.n
	pr, pw := io.Pipe()
	go func() {
		err := writeStored(l, pw)
		_ = ro.Close()
		c.mu.Unlock()
		pw.CloseWithError(err)
	}()
	return &m, &indexedReader{ReadCloser: pr, index: meta.Index}, nil
}

// openCheckpoint opens a checkpoint read-only and the ledger it holds.
func openCheckpoint(path string) (*pebblestate.ReadOnly, *fsm.Machine, error) {
	ro, err := pebblestate.OpenReadOnly(path, nil)
	if err != nil {
		return nil, nil, err
	}
	l, err := fsm.Open(ro)
	if err != nil {
		_ = ro.Close()
		return nil, nil, err
	}
	return ro, l, nil
}

// writeStored writes l's version 1 snapshot to w; a store that fails
// (fsm.ErrStoreIO: a damaged sstable, say) is an error here, not a panic:
// the snapshot is unreadable, the node is not.
func writeStored(l *fsm.Machine, w io.Writer) (err error) {
	defer func() {
		if p := recover(); p != nil {
			perr, ok := p.(error)
			if !ok || !errors.Is(perr, fsm.ErrStoreIO) {
				panic(p)
			}
			err = perr
		}
	}()
	return l.WriteSnapshot(w)
}

// removeCheckpointDebris removes what a crash left in the data dir's
// checkpoints/ (checkpoints raft never got to persist).
func removeCheckpointDebris(dataDir string) error {
	dir := filepath.Join(dataDir, checkpointsDir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("cluster: remove %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// checkpointBytes is the size of the files of the checkpoint in dir, and
// false when there is none.
func checkpointBytes(dir string) (int64, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n, true
}
