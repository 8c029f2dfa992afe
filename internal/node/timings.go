package node

import (
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/intentledger/intentd/cluster"
)

// FastTimings sets the Raft, reconcile and gossip timings that in-process
// clusters on loopback use (tests, the local cluster, the canary): elections
// and failure detection in about a second instead of the production
// defaults' several, so a test that kills a leader waits less. Loopback
// has no network delay to absorb, so they are safe there and nowhere else.
func FastTimings(c *Config) {
	c.Raft.HeartbeatTimeout = 500 * time.Millisecond
	c.Raft.ElectionTimeout = 500 * time.Millisecond
	c.Raft.LeaderLeaseTimeout = 500 * time.Millisecond
	prev := c.Tune
	c.Tune = func(cc *cluster.Config) {
		cc.ReconcileInterval = 200 * time.Millisecond
		cc.GossipTuning = func(mc *memberlist.Config) {
			mc.ProbeInterval, mc.ProbeTimeout, mc.GossipInterval = 200*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
		}
		if prev != nil {
			prev(cc)
		}
	}
}
