package cluster

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// GossipTimings are the intervals of gossip's failure detection and
// dissemination. Zero takes memberlist's local-network default (noted).
type GossipTimings struct {
	// ProbeInterval is how often a node probes a random member (1s).
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for an ack before it asks
	// other members to probe indirectly (200ms); below ProbeInterval.
	ProbeTimeout time.Duration
	// GossipInterval is how often a node passes on what it heard
	// (100ms).
	GossipInterval time.Duration
	// PushPullInterval is how often a node syncs its full state with a
	// random member (15s).
	PushPullInterval time.Duration
}

// apply sets the timings that are not zero on mc.
func (g GossipTimings) apply(mc *memberlist.Config) {
	setDuration(&mc.ProbeInterval, g.ProbeInterval)
	setDuration(&mc.ProbeTimeout, g.ProbeTimeout)
	setDuration(&mc.GossipInterval, g.GossipInterval)
	setDuration(&mc.PushPullInterval, g.PushPullInterval)
}

// Timings are the intervals that decide how fast a cluster notices a
// failure or a change and acts on it: Raft's, the leader's reconcile of
// gossip into voters, and gossip's. Zero leaves a value as it is.
type Timings struct {
	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are
	// Config.Raft's.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// ReconcileInterval is Config.ReconcileInterval.
	ReconcileInterval time.Duration
	// Gossip is Config.Gossip.
	Gossip GossipTimings
}

// FastTimings are timings for clusters on one machine (tests, local
// clusters): Raft heartbeat, election and leader lease 500ms, reconcile
// every 200ms, gossip probes every 200ms with a 100ms timeout, gossip
// every 50ms. Apply them to a Config:
//
//	cluster.FastTimings().Apply(&cfg)
func FastTimings() Timings {
	return Timings{
		HeartbeatTimeout:   500 * time.Millisecond,
		ElectionTimeout:    500 * time.Millisecond,
		LeaderLeaseTimeout: 500 * time.Millisecond,
		ReconcileInterval:  200 * time.Millisecond,
		Gossip: GossipTimings{
			ProbeInterval:  200 * time.Millisecond,
			ProbeTimeout:   100 * time.Millisecond,
			GossipInterval: 50 * time.Millisecond,
		},
	}
}

// Apply sets the timings of t that are not zero on c, and leaves the
// rest of c as it is. Its method value fits a hook that adjusts a
// Config (func(*Config)).
func (t Timings) Apply(c *Config) {
	setDuration(&c.Raft.HeartbeatTimeout, t.HeartbeatTimeout)
	setDuration(&c.Raft.ElectionTimeout, t.ElectionTimeout)
	setDuration(&c.Raft.LeaderLeaseTimeout, t.LeaderLeaseTimeout)
	setDuration(&c.ReconcileInterval, t.ReconcileInterval)
	setDuration(&c.Gossip.ProbeInterval, t.Gossip.ProbeInterval)
	setDuration(&c.Gossip.ProbeTimeout, t.Gossip.ProbeTimeout)
	setDuration(&c.Gossip.GossipInterval, t.Gossip.GossipInterval)
	setDuration(&c.Gossip.PushPullInterval, t.Gossip.PushPullInterval)
}

// networkProfile is what Config.Network sets: Raft's timeouts (where the
// Config leaves them zero) and the memberlist configuration gossip starts
// from (Config.Gossip adjusts it).
type networkProfile struct {
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	memberlist                                            func() *memberlist.Config
	// inFlight is how many AppendEntries the leader keeps in flight to
	// one follower (the transport's MaxRPCsInFlight; 1: no pipeline).
	inFlight int
}

// networkProfiles are the values of Config.Network. lan is one data
// centre (sub-millisecond RTTs): Raft's 1 s heartbeat and election
// timeouts and 500 ms leader lease, memberlist's local profile (1 s probes
// with a 200 ms timeout). wan is members 30-300 ms apart: a follower
// gives up on its leader after 1-2 s without contact (heartbeats go out
// every 100-200 ms, so a 300 ms RTT and its jitter never pass for a
// failure), a candidate waits 3-6 s before it tries again, the leader's
// lease is 1 s, and memberlist's WAN profile (5 s probes with a 3 s
// timeout, 500 ms gossip, 60 s push-pull, suspicion six probe rounds).
// The heartbeat timeout is a third of the election timeout because a lost
// leader costs one of each: see cluster/DESIGN.md, Regions. Replication is
// pipelined on wan (4 AppendEntries in flight per follower) and not on
// lan: across regions a new entry would otherwise wait for the previous
// batch's round trip, and on a LAN pipelining sends smaller batches, each
// with its follower fsync (cluster/DESIGN.md, Transport).
var networkProfiles = map[string]networkProfile{
	NetworkLAN: {HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond,
		memberlist: memberlist.DefaultLocalConfig, inFlight: 1},
	NetworkWAN: {HeartbeatTimeout: time.Second, ElectionTimeout: 3 * time.Second, LeaderLeaseTimeout: time.Second,
		memberlist: memberlist.DefaultWANConfig, inFlight: pipelineInFlight},
}

// defaultDuration sets *dst to v if *dst is not set (zero or negative).
func defaultDuration(dst *time.Duration, v time.Duration) {
	if *dst <= 0 {
		*dst = v
	}
}

// setDuration sets *dst to v unless v is zero.
func setDuration(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}
