package cluster

import (
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

// Close implements raft.SnapshotSink.
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
		return err
	}
	return syncDirs(s.sync, filepath.Join(s.dir, s.ID()), s.dir)
}
