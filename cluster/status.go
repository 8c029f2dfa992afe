package cluster

import (
	"sort"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// caughtUpSlack is how many committed entries a node may still have to
// apply and count as caught up (ready).
const caughtUpSlack = 256

// IsLeader reports whether this node is the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the leader's ID and advertised HTTP address ("" when
// unknown).
func (n *Node) Leader() (id, httpAddr string) {
	_, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	if m, ok := n.gossip.lookup(string(lid)); ok {
		return string(lid), m.meta.HTTP
	}
	return string(lid), ""
}

// Status describes the cluster as this node sees it. Ready means the node
// knows a leader whose barrier completed (if it is the leader itself) and
// has applied nearly everything committed.
func (n *Node) Status() Status {
	st := Status{
		NodeID:      n.cfg.ID,
		State:       stateName(n.raft.State()),
		Term:        n.raft.CurrentTerm(),
		CommitIndex: n.raft.CommitIndex(),
		LastIndex:   n.raft.LastIndex(),
	}
	st.AppliedIndex, _ = n.sm.appliedIndex()
	if st.AppliedIndex < st.CommitIndex && n.onlyNonFSMEntries(st.AppliedIndex, st.CommitIndex) {
		// Only no-ops and barriers remain: the state reflects the commit index.
		st.AppliedIndex = st.CommitIndex
	}
	st.LeaderID, st.LeaderHTTP = n.Leader()
	st.Region, st.Role, st.Network = n.cfg.Region, roleName(n.cfg.Replica), n.cfg.Network
	st.PreferLeaderRegion = n.cfg.PreferLeaderRegion
	if st.State == "leader" {
		st.Placement = n.placementState.Load()
	}
	leaderReady := st.LeaderID != "" && (st.State != "leader" || n.readyTerm.Load() == st.Term)
	st.Ready = !n.stopping.Load() && leaderReady && st.AppliedIndex+caughtUpSlack >= st.CommitIndex

	nodes := map[string]*MemberStatus{}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			suffrage := "voter"
			if s.Suffrage != raft.Voter {
				suffrage = "nonvoter"
			}
			nodes[string(s.ID)] = &MemberStatus{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: suffrage, Gossip: "unknown"}
		}
	}
	for _, m := range n.gossip.snapshot() {
		ns, ok := nodes[m.meta.ID]
		if !ok {
			ns = &MemberStatus{ID: m.meta.ID, RaftAddr: m.meta.Raft}
			nodes[m.meta.ID] = ns
		}
		ns.HTTPAddr = m.meta.HTTP
		ns.Gossip = gossipState(m.state)
		ns.Decodes = int(m.meta.Encoding)
		ns.Region, ns.Role = m.meta.Region, roleName(m.meta.Replica)
		if m.meta.ID == st.LeaderID {
			st.LeaderRegion = m.meta.Region
		}
	}
	for _, ns := range nodes {
		ns.Leader = ns.ID == st.LeaderID
		st.Nodes = append(st.Nodes, *ns)
	}
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].ID < st.Nodes[j].ID })
	return st
}

func roleName(replica bool) string {
	if replica {
		return "replica"
	}
	return "voter"
}

func stateName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

func gossipState(s memberlist.NodeStateType) string {
	switch s {
	case memberlist.StateAlive:
		return "alive"
	case memberlist.StateSuspect:
		return "suspect"
	case memberlist.StateDead:
		return "dead"
	case memberlist.StateLeft:
		return "left"
	}
	return "unknown"
}
