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
	Ready        bool   `json:"ready"`
	// Nodes are the members this node knows of, sorted by ID.
	Nodes []MemberStatus `json:"nodes"`
}

// MemberStatus is one member: in the Raft configuration, in gossip, or both.
type MemberStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Suffrage string `json:"suffrage,omitempty"` // voter, nonvoter, or "" if not in the configuration
	Gossip   string `json:"gossip"`             // alive, suspect, dead, left, unknown
	Leader   bool   `json:"leader"`
	// Decodes is the log entry encoding version the member announces it
	// decodes (fsm.EncodingVersion; 0: not in gossip).
	Decodes int `json:"decodes,omitempty"`
}
