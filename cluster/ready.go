package cluster

import "fmt"

// readiness says whether this node can serve linearizable requests now,
// and when it cannot, which condition fails: its cluster name and KEK
// match its leader's (progress.go); it knows a leader; as the leader, its
// barrier for its term has applied; as a follower, the leader told it its
// HTTP address itself (membership.go), without which every request it
// would forward answers 503 ("leader is n1 at "); it has applied all but
// ReadyMaxLag of the entries the leader last reported committed (a
// follower's own commit index is capped by its own log, so a follower far
// behind would pass the next check alone); and it has applied all but
// caughtUpSlack of the entries it knows committed.
func (n *Node) readiness(st Status) (ready bool, why string) {
	refused, _ := n.watch.verdict()
	switch {
	case n.stopping.Load():
		return false, "the node is shutting down"
	case refused != "":
		return false, refused
	case st.LeaderID == "":
		return false, "the node knows no leader"
	case st.State == "leader" && n.readyTerm.Load() != st.Term:
		return false, fmt.Sprintf("the leader's barrier for term %d has not applied yet", st.Term)
	case st.State != "leader" && st.LeaderHTTP == "":
		return false, fmt.Sprintf("leader %s has not told this node its HTTP address yet (requests cannot be forwarded)", st.LeaderID)
	case st.State != "leader" && st.AppliedIndex+n.cfg.ReadyMaxLag < st.LeaderCommitIndex:
		return false, fmt.Sprintf("applied index %d is %d entries behind leader %s's commit index %d (more than the ready bound %d)",
			st.AppliedIndex, st.LeaderCommitIndex-st.AppliedIndex, st.LeaderID, st.LeaderCommitIndex, n.cfg.ReadyMaxLag)
	case st.AppliedIndex+caughtUpSlack < st.CommitIndex:
		return false, fmt.Sprintf("applied index %d is more than %d entries behind commit index %d", st.AppliedIndex, caughtUpSlack,
			st.CommitIndex)
	}
	return true, ""
}
