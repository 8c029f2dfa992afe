package cluster

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
)

// ErrUnrestorable is a data dir whose state this node cannot rebuild or
// trust: its newest snapshots are unreadable (their checksum fails, or
// their meta.json no longer matches its checksummed copy) and the log does
// not reach back to the newest readable one; or a log entry it must
// replay fails its checksum (ErrCorruptLog); or its term or vote does
// (ErrCorruptStable).
var ErrUnrestorable = errors.New("cluster: the data dir's state cannot be restored")

// checkRestorable finds, before raft starts, what raft would otherwise
// panic on ("log not found"): raft restores the newest snapshot whose
// checksum holds (its Open verifies the CRC) and then replays the log from
// that snapshot's index on. When the newest snapshots are corrupt and the
// log was compacted past the newest sound one, the node cannot rebuild
// its state and must not serve; it stops with an error that names the
// snapshots and says what to do. Reading each snapshot costs a pass over
// it at start.
//
// dir is the snapshot store's directory: a snapshot whose meta.json does
// not parse is left out of the store's List, and raft falls back past it
// just the same, so its directory counts as an unreadable snapshot too.
//
// It returns the index of the snapshot raft will restore (0: none), past
// which raft replays the log (verifyLog checks those entries).
func checkRestorable(logs raft.LogStore, snaps raft.SnapshotStore, dir string) (uint64, error) {
	metas, err := snaps.List()
	if err != nil {
		return 0, nil // raft reports a snapshot store it cannot list
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return 0, fmt.Errorf("cluster: log first index: %w", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return 0, fmt.Errorf("cluster: log last index: %w", err)
	}
	covers := func(index uint64) bool { return last == 0 || first <= index+1 }
	var bad []string
	var newest uint64 // the newest listed snapshot's index
	if len(metas) > 0 {
		newest = metas[0].Index
	}
	unlisted := unlistedSnapshots(dir, metas)
	for _, u := range unlisted {
		if u.index > newest {
			bad = append(bad, fmt.Sprintf("%s (its meta.json does not parse)", u.id))
		}
	}
	if len(metas) == 0 {
		if len(bad) == 0 || covers(0) {
			return 0, nil
		}
		return 0, fmt.Errorf("%w: every snapshot is unreadable (%s) and the log starts at index %d; %s",
			ErrUnrestorable, strings.Join(bad, ", "), first, rejoinAdvice)
	}
	for _, m := range metas {
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", m.ID, err))
			continue
		}
		_ = rc.Close()
		if len(bad) == 0 || covers(m.Index) {
			return m.Index, nil
		}
		return 0, fmt.Errorf("%w: snapshot %s is unreadable, and the newest readable one, %s (index %d), is older than "+
			"the log, which starts at index %d; %s", ErrUnrestorable, strings.Join(bad, ", "), m.ID, m.Index, first, rejoinAdvice)
	}
	// Every listed snapshot is unreadable. raft refuses to start then
	// ("failed to load any existing snapshots"), even when the log
	// reaches back to its first entry.
	return 0, fmt.Errorf("%w: every snapshot is unreadable (%s) (the log starts at index %d, but raft will not start "+
		"without one of its snapshots); %s", ErrUnrestorable, strings.Join(bad, ", "), first, rejoinAdvice)
}

// rejoinAdvice is what an operator does with a node whose data dir cannot
// be trusted. Restarting it empty under the same membership would be
// unsafe: it has forgotten its vote and the entries it acknowledged, and
// Raft counts it toward a majority as if it had not (Alagappan et al.,
// FAST '18).
const rejoinAdvice = "do not start this node empty in its place: remove it from the cluster through the leader " +
	"(intentctl peer remove ID), move its data dir aside, then start it empty to rejoin as a new member and be " +
	"caught up from its peers, or restore a backup (docs/operations.md, \"A node refuses to start\")"

type snapshotDir struct {
	id    string
	index uint64
}

// unlistedSnapshots are the snapshot directories in dir (named
// term-index-millis by raft's file store, temporary ones aside) that the
// store did not list.
func unlistedSnapshots(dir string, listed []*raft.SnapshotMeta) []snapshotDir {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	for _, m := range listed {
		seen[m.ID] = true
	}
	var out []snapshotDir
	for _, e := range entries {
		parts := strings.Split(e.Name(), "-")
		if !e.IsDir() || seen[e.Name()] || strings.HasSuffix(e.Name(), ".tmp") || len(parts) != 3 {
			continue
		}
		index, err := strconv.ParseUint(parts[1], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, snapshotDir{id: e.Name(), index: index})
	}
	return out
}
