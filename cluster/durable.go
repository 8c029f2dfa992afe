package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/hashicorp/raft"
)

// Directory entries are durable only once their directory is fsynced
// (POSIX; ext4 often hides it, a power loss on a stricter file system
// does not). The node fsyncs every directory it creates or whose entries
// it changes before it relies on them: the data directory after creating
// it and the log store and snapshot directories in it, each new snapshot
// directory and snapshots/ after raft moved it into place and reaped old
// ones (raft fsyncs snapshots/ but not the new directory, and compacts the
// log once Create's sink is closed: a snapshot whose meta.json a power
// loss dropped would leave a node with neither the snapshot nor the log it
// replaced), and the data directory after a peers.json recovery renamed
// the file (a power loss could otherwise bring the file back and apply the
// membership override again).

// syncDir fsyncs the directory at path, making its entries durable.
func syncDir(path string) error {
	if runtime.GOOS == "windows" {
		return nil // directories cannot be fsynced there
	}
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cluster: fsync directory %s: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cluster: fsync directory %s: %w", path, err)
	}
	return nil
}

// syncDirs fsyncs each directory, in order, through sync (nil: syncDir).
func syncDirs(sync func(string) error, paths ...string) error {
	if sync == nil {
		sync = syncDir
	}
	for _, p := range paths {
		if err := sync(p); err != nil {
			return err
		}
	}
	return nil
}

// durableSink makes a closed snapshot durable: the new snapshot's
// directory (its meta.json and state.bin entries) and snapshots/ (the
// rename into place and the reaping of old snapshots) are fsynced before
// Close returns, so before raft compacts the log the snapshot replaces.
//
// It also writes the snapshot's checksummed metadata (meta.sum, see
// snapmeta.go) into the temporary directory before raft's Close renames
// it into place.
type durableSink struct {
	raft.SnapshotSink
	dir  string // the snapshot store's directory (snapshots/)
	sync func(string) error
	meta *sinkMeta // nil: no sidecar
	// closed is set by the first Close: the FSM's Persist closes the sink
	// and raft closes it again (raft's own Close is idempotent).
	closed bool
}

// Write implements raft.SnapshotSink.
func (s *durableSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	if s.meta != nil {
		s.meta.wrote(p[:n])
	}
	return n, err
}

// Close implements raft.SnapshotSink. A snapshot that could not be closed
// (its meta.json not written, say, on a full disk) leaves no temporary
// directory behind.
func (s *durableSink) Close() error {
	if s.closed {
		return s.SnapshotSink.Close()
	}
	s.closed = true
	if s.meta != nil {
		if err := s.meta.writeSidecar(filepath.Join(s.dir, s.ID()+".tmp"), s.ID()); err != nil {
			_ = s.SnapshotSink.Cancel()
			return err
		}
	}
	if err := s.SnapshotSink.Close(); err != nil {
		return errors.Join(err, s.removeTemp())
	}
	return syncDirs(s.sync, filepath.Join(s.dir, s.ID()), s.dir)
}

// Cancel implements raft.SnapshotSink. raft's file sink, cancelling a
// snapshot whose write failed (a full disk), flushes its buffer first and,
// when that fails again, returns before it removes the snapshot's
// temporary directory; raft never lists nor reaps a .tmp directory, so
// every snapshot a full disk cut short stayed for good, a partial copy of
// the state taking the space the node was waiting for. Cancel removes it
// whatever the sink answered.
func (s *durableSink) Cancel() error {
	err := s.SnapshotSink.Cancel()
	if rerr := s.removeTemp(); rerr != nil {
		return errors.Join(err, rerr)
	}
	return nil // the snapshot is gone, which is all Cancel promises
}

// removeTemp removes the snapshot's temporary directory, if it is there.
func (s *durableSink) removeTemp() error {
	if err := os.RemoveAll(filepath.Join(s.dir, s.ID()+tmpSnapshotSuffix)); err != nil {
		return fmt.Errorf("cluster: remove a failed snapshot: %w", err)
	}
	return nil
}

// removeFailedCreate removes the temporary directory raft's file snapshot
// store made for a snapshot of (term, index) in dir when its Create then
// failed (the state file could not be created on a full disk): raft
// returns without removing it, and never reaps it. raft names the
// directory term-index-milliseconds, which Create's caller does not learn;
// two snapshots of the same term and index are never written at once.
func removeFailedCreate(dir string, term, index uint64) error {
	tmps, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%d-%d-*%s", term, index, tmpSnapshotSuffix)))
	if err != nil {
		return err
	}
	for _, t := range tmps {
		if err := os.RemoveAll(t); err != nil {
			return fmt.Errorf("cluster: remove a failed snapshot: %w", err)
		}
	}
	return nil
}

// tmpSnapshotSuffix names the directory raft's file snapshot store writes
// a snapshot in until it is complete.
const tmpSnapshotSuffix = ".tmp"

// removeTempSnapshots removes the temporary directories of snapshots that
// were never completed (a crash, or a full disk before durableSink.Cancel
// cleaned up after itself) from the snapshot directory dir; raft skips
// them forever. Nothing writes a snapshot while the node starts.
func removeTempSnapshots(dir string, sync func(string) error) (int, error) {
	tmps, err := filepath.Glob(filepath.Join(dir, "*"+tmpSnapshotSuffix))
	if err != nil || len(tmps) == 0 {
		return 0, err
	}
	for _, t := range tmps {
		if err := os.RemoveAll(t); err != nil {
			return 0, fmt.Errorf("cluster: remove an unfinished snapshot: %w", err)
		}
	}
	return len(tmps), syncDirs(sync, dir)
}
