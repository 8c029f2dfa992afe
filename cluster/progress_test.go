package cluster

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// testLag is the ready bound the tests run with: fill(…, lagFill) commits
// more entries than that.
const (
	testLag = 50
	lagFill = 80 // 80 claims and 40 completions: 120 entries
)

// A follower whose log the leader holds back knows only the commit index
// of what it holds, so its own commit index check passes; it is not ready
// because it is far behind the commit index its leader reports, says how
// far, and is ready again once it caught up. (Before, it answered ready.)
func TestAFollowerFarBehindTheLeaderIsNotReady(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.ReadyMaxLag = testLag })
	tc.startN(3)
	leader := tc.leader()
	follower := tc.follower(leader)
	tc.propose(ctxT(t), claim("k", "o"))
	waitFor(t, 30*time.Second, "the follower to be ready", func() bool { return follower.Status().Ready })

	leader.drops.set(follower.ID(), true)
	fill(t, tc, "lag", lagFill)
	var st Status
	waitFor(t, 30*time.Second, "the follower to know how far behind it is", func() bool {
		st = follower.Status()
		return !st.Ready && strings.Contains(st.NotReady, "entries behind leader "+leader.ID())
	})
	if st.AppliedIndex+caughtUpSlack < st.CommitIndex {
		t.Fatalf("applied %d, own commit %d: the follower's own commit index check alone would refuse it; want the case where it passes",
			st.AppliedIndex, st.CommitIndex)
	}
	if st.LeaderCommitIndex <= st.AppliedIndex+testLag {
		t.Fatalf("leader commit index %d, applied %d: want more than %d behind", st.LeaderCommitIndex, st.AppliedIndex, testLag)
	}
	t.Logf("not ready: %s", st.NotReady)

	leader.drops.set(follower.ID(), false)
	waitFor(t, 60*time.Second, "the follower to catch up and be ready", func() bool { return follower.Status().Ready })
}

// identities hands each node the identity of its ID (n1's for those not
// listed).
type identities struct {
	mu sync.Mutex
	m  map[string]Identity
}

func (ids *identities) tune(c *Config) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	id, ok := ids.m[c.ID]
	if !ok {
		id = ids.m["n1"]
	}
	c.Identity = id
}

func keys(digest string) func() string { return func() string { return digest } }

// A member whose cluster name or KEK differs from the leader's (no KEK
// against a KEK included) is never added and says why it is not ready;
// one whose API keys differ is added, and warned about.
func TestTheLeaderRefusesAMemberOfAnotherCluster(t *testing.T) {
	base := Identity{Cluster: "prod", KEK: "kek-a", APIKeys: keys("keys-a")}
	for _, tt := range []struct {
		name   string
		joiner Identity
		// refused is what the joiner's NotReady says ("": it is added).
		refused string
	}{
		{"another KEK", Identity{Cluster: "prod", KEK: "kek-b", APIKeys: keys("keys-a")}, "kek differs from the leader's"},
		{"no KEK", Identity{Cluster: "prod", KEK: "", APIKeys: keys("keys-a")}, "kek differs from the leader's"},
		{"another cluster name", Identity{Cluster: "staging", KEK: "kek-a", APIKeys: keys("keys-a")}, "cluster name differs from the leader's"},
		{"other API keys", Identity{Cluster: "prod", KEK: "kek-a", APIKeys: keys("keys-b")}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ids := &identities{m: map[string]Identity{"n1": base, "n2": tt.joiner}}
			tc := newTestCluster(t, ids.tune)
			first := tc.start("n1", 1)
			leader := tc.leader()
			joiner := tc.start("n2", 0, first.GossipAddr())
			if tt.refused == "" {
				waitFor(t, 60*time.Second, "n2 to be a voter", func() bool { return voters(leader)["n2"] })
				waitFor(t, 30*time.Second, "n2 to warn about its API keys", func() bool {
					return strings.Contains(strings.Join(joiner.Status().Warnings, "\n"), "API keys differ from leader n1's")
				})
				return
			}
			waitFor(t, 30*time.Second, "n2 to say why it is not ready", func() bool {
				return strings.Contains(joiner.Status().NotReady, tt.refused)
			})
			waitFor(t, 30*time.Second, "the leader to record its refusal", func() bool {
				leader.joins.mu.Lock()
				defer leader.joins.mu.Unlock()
				return leader.joins.refused["n2"] != ""
			})
			// Rounds of reconcile pass and n2 is still no server.
			from := leader.reconciles.Load()
			waitFor(t, 30*time.Second, "five more reconcile rounds", func() bool { return leader.reconciles.Load() >= from+5 })
			if s := suffrageOf(leader, "n2"); s != "" {
				t.Fatalf("n2 is a %s of the leader's configuration; want it refused (%s)", s, tt.refused)
			}
			if st := joiner.Status(); st.Ready {
				t.Fatal("n2 is ready")
			}
		})
	}
}

// A new member is added as a nonvoter and stays one while its log is
// behind; once it caught up it is a voter, and the leader warns about the
// even voter count.
func TestANewMemberCatchesUpAsANonvoter(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.ReadyMaxLag = testLag })
	nodes := tc.startN(3)
	leader := tc.leader()
	fill(t, tc, "before-join", lagFill)
	leader.drops.set("n4", true)
	fourth := tc.start("n4", 0, nodes[1].GossipAddr())
	waitFor(t, 60*time.Second, "n4 to be a nonvoter", func() bool { return suffrageOf(leader, "n4") == "nonvoter" })
	from := leader.reconciles.Load()
	waitFor(t, 30*time.Second, "five more reconcile rounds", func() bool { return leader.reconciles.Load() >= from+5 })
	if s := suffrageOf(leader, "n4"); s != "nonvoter" {
		t.Fatalf("n4 is a %q with its log held back; want a nonvoter until it catches up", s)
	}
	if st := fourth.Status(); st.Ready {
		t.Fatalf("n4 is ready with its log held back (applied %d, leader commit %d)", st.AppliedIndex, st.LeaderCommitIndex)
	}

	leader.drops.set("n4", false)
	waitFor(t, 60*time.Second, "n4 to be a voter", func() bool { return voters(leader)["n4"] })
	want := "4 voters: a majority is 3; an odd count tolerates as many failures with one node less"
	waitFor(t, 30*time.Second, "the even voter warning", func() bool {
		return strings.Contains(strings.Join(leader.Status().Warnings, "\n"), want)
	})
	waitFor(t, 60*time.Second, "n4 to be ready", func() bool { return fourth.Status().Ready })
}

func TestIdentityRefusal(t *testing.T) {
	mine := memberIdentity{Cluster: "prod", KEK: "a", APIKeys: "k"}
	for _, tt := range []struct {
		name  string
		other memberIdentity
		want  string // a part of the refusal; "": none
	}{
		{"same", mine, ""},
		{"other API keys only", memberIdentity{Cluster: "prod", KEK: "a", APIKeys: "other"}, ""},
		{"other KEK", memberIdentity{Cluster: "prod", KEK: "b", APIKeys: "k"}, "kek differs from the leader's (kek_id a here, b there)"},
		{"no KEK there", memberIdentity{Cluster: "prod", APIKeys: "k"}, "kek differs from the leader's (kek_id a here, none there)"},
		{"other cluster", memberIdentity{Cluster: "dev", KEK: "a", APIKeys: "k"}, "cluster name differs from the leader's (prod here, dev there)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := mine.refusal(tt.other, "the leader's")
			if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("refusal = %q, want %q", got, tt.want)
			}
		})
	}
	// Both without a KEK: the same.
	if got := (memberIdentity{Cluster: "c"}).refusal(memberIdentity{Cluster: "c"}, "x"); got != "" {
		t.Fatalf("no KEK on either side: %q", got)
	}
}

func TestVoterWarning(t *testing.T) {
	for _, tt := range []struct {
		voters int
		want   string
	}{
		{0, ""}, {1, ""}, {3, ""}, {5, ""},
		{2, "2 voters: a majority is 2; an odd count tolerates as many failures with one node less"},
		{4, "4 voters: a majority is 3; an odd count tolerates as many failures with one node less"},
		{6, "6 voters: a majority is 4; an odd count tolerates as many failures with one node less"},
	} {
		if got := voterWarning(tt.voters); got != tt.want {
			t.Errorf("voterWarning(%d) = %q, want %q", tt.voters, got, tt.want)
		}
	}
}
