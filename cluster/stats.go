package cluster

import "path/filepath"

// Stats are the node's operational numbers beyond Status, for metrics.
type Stats struct {
	// LastLogIndex is the index of the last entry in the local log.
	LastLogIndex uint64
	// LastSnapshotIndex and LastSnapshotTerm describe the newest snapshot
	// on disk (0 when there is none).
	LastSnapshotIndex uint64
	LastSnapshotTerm  uint64
	// LastSnapshotBytes is the newest snapshot's size on disk.
	LastSnapshotBytes int64
	// Snapshots is the number of snapshots retained on disk.
	Snapshots int
	// GossipMembers is the number of members memberlist knows alive.
	GossipMembers int
	// Forwarded is the number of commands this node forwarded to the
	// leader, and ForwardsServed the number it received from followers
	// to apply as the leader, since it started.
	Forwarded, ForwardsServed uint64
}

// Stats returns the node's operational numbers. It reads snapshot metadata
// from disk, so call it at scrape frequency, not per request.
func (n *Node) Stats() Stats {
	st := Stats{LastLogIndex: n.raft.LastIndex(), Forwarded: n.fwd.sent.Load(), ForwardsServed: n.fwdServer.served.Load()}
	if metas, err := n.snaps.List(); err == nil && len(metas) > 0 {
		st.Snapshots = len(metas)
		st.LastSnapshotIndex, st.LastSnapshotTerm, st.LastSnapshotBytes = metas[0].Index, metas[0].Term, metas[0].Size
		if is := n.snaps; is.dir != "" {
			// A checkpoint snapshot's state.bin is a reference; what it can
			// come to take is its checkpoint's files (shared with the store
			// until compaction replaces them).
			if b, ok := checkpointBytes(filepath.Join(is.dir, metas[0].ID, checkpointDirName)); ok {
				st.LastSnapshotBytes = b
			}
		}
	}
	if n.ml != nil {
		st.GossipMembers = n.ml.NumMembers()
	}
	return st
}
