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

// Leader returns the leader's ID and HTTP address ("" when unknown). The
// address is the one the leader told this node itself over its Raft
// address (membership.go), never gossip's; while the first answer is on
// its way Leader waits for it, at most leaderAddrWait.
func (n *Node) Leader() (id, httpAddr string) {
	addr, lid := n.raft.LeaderWithID()
	if lid == "" {
		return "", ""
	}
	return string(lid), n.provenHTTP(string(lid), string(addr), leaderAddrWait)
}

// Status describes the cluster as this node sees it. Ready means the node
// can serve linearizable requests now (readiness): it knows a leader whose
// barrier completed (if it is the leader itself) or whose HTTP address the
// leader told it (if it follows), and has applied nearly everything
// committed; NotReady says which condition fails.
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
	st.LeaderCommitIndex = n.watch.leaderCommit(st.LeaderID)
	if st.State == "leader" {
		st.LeaderCommitIndex = st.CommitIndex
	}
	st.Region, st.Role, st.Network = n.cfg.Region, roleName(n.cfg.Replica), n.cfg.Network
	st.PreferLeaderRegion = n.cfg.PreferLeaderRegion
	if st.State == "leader" {
		st.Placement = n.placementState.Load()
	}
	st.Ready, st.NotReady = n.readiness(st)

	// A server's HTTP address is the one it told this node itself over its
	// Raft address; a member known from gossip alone shows none.
	nodes := map[string]*MemberStatus{}
	voterCount := 0
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			suffrage := "voter"
			if s.Suffrage != raft.Voter {
				suffrage = "nonvoter"
			} else {
				voterCount++
			}
			nodes[string(s.ID)] = &MemberStatus{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: suffrage, Gossip: "unknown",
				HTTPAddr: n.provenHTTP(string(s.ID), string(s.Address), 0)}
		}
	}
	for _, m := range n.gossip.snapshot() {
		ns, ok := nodes[m.meta.ID]
		if !ok {
			ns = &MemberStatus{ID: m.meta.ID, RaftAddr: m.meta.Raft}
			nodes[m.meta.ID] = ns
		}
		if m.meta.ID == n.cfg.ID || n.trustsGossipAddrs() {
			ns.HTTPAddr = n.provenHTTP(m.meta.ID, m.meta.Raft, 0)
		}
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
	if w := voterWarning(voterCount); w != "" {
		st.Warnings = append(st.Warnings, w)
	}
	if _, keys := n.watch.verdict(); keys != "" && st.State != "leader" {
		st.Warnings = append(st.Warnings, keys)
	}
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
