package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// Timings.Apply sets what the timings set and leaves the rest of a
// Config as it was.
func TestTimingsApplySetsOnlyWhatIsSet(t *testing.T) {
	cfg := Config{
		Raft:              RaftTuning{ElectionTimeout: 3 * time.Second, MaxAppendEntries: 64},
		ReconcileInterval: time.Minute,
		SweepInterval:     time.Hour,
		Gossip:            GossipTimings{PushPullInterval: time.Second, ProbeTimeout: time.Second},
	}
	FastTimings().Apply(&cfg)
	want := Config{
		Raft: RaftTuning{HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
			LeaderLeaseTimeout: 500 * time.Millisecond, MaxAppendEntries: 64},
		ReconcileInterval: 200 * time.Millisecond,
		SweepInterval:     time.Hour,
		Gossip: GossipTimings{ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 100 * time.Millisecond,
			GossipInterval: 50 * time.Millisecond, PushPullInterval: time.Second},
	}
	if cfg.Raft != want.Raft || cfg.ReconcileInterval != want.ReconcileInterval || cfg.SweepInterval != want.SweepInterval ||
		cfg.Gossip != want.Gossip {
		t.Fatalf("after Apply\n%+v %v %v %+v\nwant\n%+v %v %v %+v", cfg.Raft, cfg.ReconcileInterval, cfg.SweepInterval, cfg.Gossip,
			want.Raft, want.ReconcileInterval, want.SweepInterval, want.Gossip)
	}
	before := cfg
	Timings{}.Apply(&cfg)
	if cfg.Raft != before.Raft || cfg.ReconcileInterval != before.ReconcileInterval || cfg.Gossip != before.Gossip {
		t.Fatal("zero timings changed the config")
	}
}

// Gossip timings reach memberlist; a zero one keeps its local default.
func TestGossipTimingsReachMemberlist(t *testing.T) {
	mc := memberlist.DefaultLocalConfig()
	def := *mc
	GossipTimings{ProbeInterval: 300 * time.Millisecond, GossipInterval: 20 * time.Millisecond}.apply(mc)
	if mc.ProbeInterval != 300*time.Millisecond || mc.GossipInterval != 20*time.Millisecond ||
		mc.ProbeTimeout != def.ProbeTimeout || mc.PushPullInterval != def.PushPullInterval {
		t.Fatalf("probe %v/%v, gossip %v, push-pull %v", mc.ProbeInterval, mc.ProbeTimeout, mc.GossipInterval, mc.PushPullInterval)
	}
}
