package cluster

// Status describes the cluster as one node sees it (Node.Status); GET
// /v1/cluster serves it as JSON.
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
	// readiness compares the applied index with it (Config.ReadyMaxLag).
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
