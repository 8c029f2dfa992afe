// Package clusterview is what a cluster member shows the API, as plain
// data: its status (GET /v1/cluster and /readyz), its snapshots (backup and
// restore) and the refusals of an operator's membership calls. The cluster
// package returns these types (its Status, Snapshot, ... are aliases of
// them) and httpapi serves them, so the API declares the interfaces it
// consumes without importing the cluster. It imports nothing of the
// module.
package clusterview

import (
	"errors"
	"io"
)

// Status describes the cluster as one node sees it (cluster.Node.Status);
// GET /v1/cluster serves it as JSON.
type Status struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"` // leader, follower, candidate, shutdown
	LeaderID     string `json:"leader_id"`
	LeaderHTTP   string `json:"leader_http"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastIndex    uint64 `json:"last_index"`
	// LeaderCommitIndex is the commit index the leader last reported to
	// this node (on the leader, its own; 0 while none is known):
	// readiness compares the applied index with it (cluster's
	// Config.ReadyMaxLag).
	LeaderCommitIndex uint64 `json:"leader_commit_index,omitempty"`
	Ready             bool   `json:"ready"`
	// NotReady says why the node is not ready ("" when it is).
	NotReady string `json:"not_ready,omitempty"`
	// Region and Role ("voter" or "replica") are this node's, as
	// configured; Network its timing profile.
	Region  string `json:"region,omitempty"`
	Role    string `json:"role"`
	Network string `json:"network"`
	// LeaderRegion is the leader's region as gossip announces it.
	LeaderRegion string `json:"leader_region,omitempty"`
	// PreferLeaderRegion is this node's --prefer-leader-region; Placement
	// what the leader does about it (on the leader only).
	PreferLeaderRegion string           `json:"prefer_leader_region,omitempty"`
	Placement          *LeaderPlacement `json:"leader_placement,omitempty"`
	// Warnings are conditions an operator should know of that do not
	// make the node unready: an even voter count, API keys that differ
	// from the leader's.
	Warnings []string `json:"warnings,omitempty"`
	// Nodes are the members this node knows of, sorted by ID.
	Nodes []MemberStatus `json:"nodes"`
}

// MemberStatus is one member: in the Raft configuration, in gossip, or both.
type MemberStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Suffrage string `json:"suffrage,omitempty"` // voter, nonvoter, or "" if not in the configuration
	// Region and Role ("voter" or "replica") are what the member announces
	// in gossip ("" when it is not in gossip); Suffrage follows Role once
	// the leader has reconciled.
	Region string `json:"region,omitempty"`
	Role   string `json:"role,omitempty"`
	Gossip string `json:"gossip"` // alive, suspect, dead, left, unknown
	Leader bool   `json:"leader"`
	// Decodes is the log entry encoding version the member announces it
	// decodes (fsm.EncodingVersion; 0: not in gossip).
	Decodes int `json:"decodes,omitempty"`
}

// LeaderPlacement is the leader's view of its preferred region (cluster's
// Config.PreferLeaderRegion), in Status (the leader's only).
type LeaderPlacement struct {
	// PreferredRegion is the region the leader tries to keep leadership
	// in ("" on a replica that leads: it hands leadership to any voter).
	PreferredRegion string `json:"preferred_region"`
	// State is "in_region" (this leader is where it should be), "waiting"
	// (no voter there qualifies yet: Detail says why), "moving" (a
	// transfer to Target is under way) or "backoff" (the last transfer
	// failed: Detail says why and when the next is tried).
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
	Target string `json:"target,omitempty"`
	// Transfers counts the transfers this leader started.
	Transfers int `json:"transfers"`
}

// The states of LeaderPlacement.
const (
	PlacementInRegion = "in_region"
	PlacementWaiting  = "waiting"
	PlacementMoving   = "moving"
	PlacementBackoff  = "backoff"
)

// SnapshotInfo describes a ledger snapshot (a backup).
type SnapshotInfo struct {
	// Index is the log index of the last command the snapshot reflects.
	Index uint64 `json:"index"`
	// Intents is the number of intents in it.
	Intents int `json:"intents"`
	// Digest is the hex SHA-256 of the snapshot's bytes, which is also the
	// replica digest of a ledger holding exactly that state.
	Digest string `json:"digest"`
	// Bytes is the snapshot's size.
	Bytes int64 `json:"bytes"`
}

// Snapshot is a consistent, immutable view of the ledger taken by
// cluster.Node.TakeSnapshot, to be written out once with Write.
type Snapshot interface {
	// Index is the log index of the last command the snapshot reflects.
	Index() uint64
	// Intents is the number of intents in it.
	Intents() int
	// Write writes the snapshot in the state machine's deterministic
	// encoding (fsm.Machine.WriteSnapshot, with a SHA-256 trailer) to w.
	Write(w io.Writer) (SnapshotInfo, error)
}

// ErrNotEmpty refuses a restore into a ledger that already holds intents
// (unless forced): a restore replaces the whole state, and on a ledger in
// use it would undo acknowledged writes.
var ErrNotEmpty = errors.New("the ledger is not empty; restore into a fresh cluster (or force it)")

// The refusals of an operator's membership calls (cluster.Node.RemovePeer,
// TransferLeadership and the leader's membership changes).
var (
	// ErrUnknownPeer is a removal or a leadership transfer naming a node
	// that is not a server of the Raft configuration.
	ErrUnknownPeer = errors.New("cluster: no such server in the configuration")
	// ErrRemoveLeader is a removal of the leader itself: it must hand its
	// leadership over first (TransferLeadership), then be removed by the
	// new leader.
	ErrRemoveLeader = errors.New("cluster: the leader cannot remove itself; transfer leadership first")
	// ErrNotVoter is a leadership transfer to a server that is not a
	// voter.
	ErrNotVoter = errors.New("cluster: the target is not a voter")
	// ErrNoLiveMajority is a removal or demotion the leader refused
	// because the voters left would not include a majority it currently
	// hears from: the new configuration could not commit, and the cluster
	// would have no leader until the unreachable voters returned.
	ErrNoLiveMajority = errors.New("cluster: the change would leave the voters without a live majority")
)
