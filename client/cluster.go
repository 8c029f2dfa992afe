package client

import (
	"context"
	"errors"
	"net/http"
)

// ClusterStatus describes the cluster as one node sees it.
type ClusterStatus struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"`
	LeaderID     string `json:"leader_id"`
	LeaderHTTP   string `json:"leader_http"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastIndex    uint64 `json:"last_index"`
	Ready        bool   `json:"ready"`
	// Region and Role ("voter" or "replica") are the answering node's;
	// Network its timing profile ("lan" or "wan").
	Region  string `json:"region,omitempty"`
	Role    string `json:"role"`
	Network string `json:"network"`
	// LeaderRegion is the leader's region.
	LeaderRegion string `json:"leader_region,omitempty"`
	// PreferLeaderRegion is the node's --prefer-leader-region; Placement
	// what the leader does about it (in the leader's answer only).
	PreferLeaderRegion string           `json:"prefer_leader_region,omitempty"`
	Placement          *LeaderPlacement `json:"leader_placement,omitempty"`
	Nodes              []NodeStatus     `json:"nodes"`
}

// LeaderPlacement is the leader's view of its preferred region: State is
// "in_region", "waiting", "moving" or "backoff"; Detail says why.
type LeaderPlacement struct {
	PreferredRegion string `json:"preferred_region"`
	State           string `json:"state"`
	Detail          string `json:"detail,omitempty"`
	Target          string `json:"target,omitempty"`
	Transfers       int    `json:"transfers"`
}

// NodeStatus is one member of the cluster.
type NodeStatus struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr,omitempty"`
	Suffrage string `json:"suffrage,omitempty"`
	Gossip   string `json:"gossip"`
	Leader   bool   `json:"leader"`
	// Region and Role ("voter" or "replica") are what the member announces.
	Region string `json:"region,omitempty"`
	Role   string `json:"role,omitempty"`
	// Decodes is the log entry format version the member announces it
	// reads (0: not announced).
	Decodes int `json:"decodes,omitempty"`
}

// Health is one node's liveness and readiness.
type Health struct {
	Addr string `json:"addr"`
	// Live: the process serves (GET /healthz).
	Live bool `json:"live"`
	// Ready: the node has a leader and is caught up (GET /readyz).
	Ready bool `json:"ready"`
	// Detail says why the node is not ready.
	Detail string `json:"detail,omitempty"`
}

// Cluster reads the cluster's status as the answering node sees it.
func (c *Client) Cluster(ctx context.Context) (*ClusterStatus, error) {
	var out ClusterStatus
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/cluster"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// LeaderID asks the cluster which node leads: the leader's ID, "" when
// the answering node knows none. The front ends' readiness is this
// question (a readiness check is a func(ctx) (string, error)).
func (c *Client) LeaderID(ctx context.Context) (string, error) {
	st, err := c.Cluster(ctx)
	if err != nil {
		return "", err
	}
	return st.LeaderID, nil
}

// Health asks the node at addr (empty: the first configured address)
// whether it is live and ready, without retries. Not being ready is an
// answer, not an error; failing to reach the node is.
func (c *Client) Health(ctx context.Context, addr string) (*Health, error) {
	if addr == "" {
		addr = c.seeds[0]
	}
	base, err := normalizeAddr(addr)
	if err != nil {
		return nil, err
	}
	h := &Health{Addr: base}
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/healthz", addr: base}, nil); err != nil {
		return nil, err
	}
	h.Live = true
	_, err = c.do(ctx, request{method: http.MethodGet, path: "/readyz", addr: base}, nil)
	var p *Problem
	switch {
	case err == nil:
		h.Ready = true
	case errors.As(err, &p) && p.Code == "not_ready":
		h.Detail = p.Detail
	default:
		return nil, err
	}
	return h, nil
}
