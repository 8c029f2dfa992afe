package cluster

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/raft"
)

// ErrUnrestorable is a data dir whose state this node cannot rebuild: its
// newest snapshots are unreadable (their checksum fails) and the log does
// not reach back to the newest readable one.
var ErrUnrestorable = errors.New("cluster: the data dir's state cannot be restored")

// checkRestorable finds, before raft starts, what raft would otherwise
// panic on ("log not found"): raft restores the newest snapshot whose
// checksum holds (its Open verifies the CRC) and then replays the log from
// that snapshot's index on. When the newest snapshots are corrupt and the
// log was compacted past the newest sound one, the node cannot rebuild
// its state and must not serve; it stops with an error that names the
// snapshots and says what to do. Reading each snapshot costs a pass over
// it at start.
func checkRestorable(logs raft.LogStore, snaps raft.SnapshotStore) error {
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return nil // raft reports a snapshot store it cannot list
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("cluster: log first index: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return fmt.Errorf("cluster: log last index: %w", err)
	}
	covers := func(index uint64) bool { return last == 0 || first <= index+1 }
	var bad []string
	for _, m := range metas {
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", m.ID, err))
			continue
		}
		_ = rc.Close()
		if len(bad) == 0 || covers(m.Index) {
			return nil
		}
		return fmt.Errorf("%w: snapshot %s is unreadable, and the newest readable one, %s (index %d), is older than "+
			"the log, which starts at index %d; move this node's data dir aside and start it empty to be caught up "+
			"from its peers, or restore a backup", ErrUnrestorable, strings.Join(bad, ", "), m.ID, m.Index, first)
	}
	if covers(0) {
		return nil
	}
	return fmt.Errorf("%w: every snapshot is unreadable (%s) and the log starts at index %d; move this node's data "+
		"dir aside and start it empty to be caught up from its peers, or restore a backup",
		ErrUnrestorable, strings.Join(bad, ", "), first)
}
