package cluster

import (
	"strings"
	"testing"
	"time"
)

// A follower that has not learned the leader's HTTP address from the
// leader cannot forward a single request (it answers 503 "leader is n1
// at "), so it is not ready, and says why; once the leader tells it, it
// is. (Before, such a follower answered /readyz 200.) The test keeps the
// follower from asking the leader, as a follower cut off from it (a
// restart without --join) is.
func TestFollowerWithoutLeaderHTTPIsNotReady(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	leader := tc.leader()
	follower := tc.follower(leader)
	ctx := ctxT(t)
	tc.propose(ctx, claim("k", "o"))
	waitFor(t, 30*time.Second, "the follower to be ready", func() bool { return follower.Status().Ready })

	// Forget the proof and fail every new one for an hour.
	follower.addrs.mu.Lock()
	follower.addrs.m[leader.ID()] = &provenAddr{raft: leader.RaftAddr(), failedAt: time.Now().Add(time.Hour)}
	follower.addrs.mu.Unlock()
	st := follower.Status()
	if st.Ready || st.LeaderHTTP != "" || !strings.Contains(st.NotReady, "HTTP address") {
		t.Fatalf("follower without the leader's HTTP address: ready %t, leader_http %q (%q); want not ready because of the address",
			st.Ready, st.LeaderHTTP, st.NotReady)
	}
	if st := leader.Status(); !st.Ready || st.NotReady != "" {
		t.Fatalf("leader: ready %t (%q), want ready", st.Ready, st.NotReady)
	}

	follower.addrs.mu.Lock()
	delete(follower.addrs.m, leader.ID())
	follower.addrs.mu.Unlock()
	waitFor(t, 30*time.Second, "the follower to learn the address and be ready", func() bool { return follower.Status().Ready })
}
