package cluster

import (
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// principalOn reads the principal of default/key on n's replica.
func principalOn(n *Node, key string) (string, bool) {
	var in *fsm.Intent
	n.sm.read(func(l *fsm.Ledger) { in = l.Get("default", key) })
	if in == nil {
		return "", false
	}
	return in.Principal, true
}

// A rolling upgrade to the version that binds grants to API keys: while
// one server decodes only EncodingBinary (the version before), the leader
// writes EncodingBinary, which cannot carry the caller, so every replica
// records the grant bound to no key. Once that server is upgraded in
// place, the leader writes EncodingBinary2, every replica binds the grant
// to the claiming key and refuses another key's report alike.
func TestCallerEncodingWaitsForEveryServer(t *testing.T) {
	old := true
	tc := newTestCluster(t, func(c *Config) {
		c.LeaveOnShutdown = false
		if c.ID == "n3" && old {
			c.MaxLogEncoding = fsm.EncodingBinary
		}
	})
	tc.startN(3)
	ctx := ctxT(t)
	waitFor(t, 30*time.Second, "the leader to write the newest encoding n3 decodes", func() bool {
		return tc.leader().Status().LogEncoding == int(fsm.EncodingBinary)
	})
	before := claim("before", "o")
	before.Principal = "agents-a"
	r := tc.propose(ctx, before)
	if r.Status != fsm.StatusGranted || r.Intent.Principal != "" {
		t.Fatalf("claim with an older server: %s, bound to %q; want a grant bound to no key", r.Status, r.Intent.Principal)
	}
	if got := lastEntryEncoding(t, tc.leader()); got != fsm.EncodingBinary {
		t.Fatalf("with a server that decodes only EncodingBinary the leader wrote encoding %d", got)
	}

	// Upgrade n3 in place: same data and addresses, this version.
	n3 := tc.nodes["n3"]
	raftAddr, gossipAddr := n3.RaftAddr(), n3.GossipAddr()
	if err := n3.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, "n3")
	old = false
	var join string
	for _, n := range tc.nodes {
		join = n.GossipAddr()
	}
	tc.startAt("n3", raftAddr, gossipAddr, 3, join)
	waitFor(t, 30*time.Second, "the leader to write EncodingBinary2", func() bool {
		return tc.leader().Status().LogEncoding == int(fsm.EncodingBinary2)
	})
	after := claim("after", "o")
	after.Principal = "agents-a"
	r = tc.propose(ctx, after)
	if r.Status != fsm.StatusGranted || r.Intent.Principal != "agents-a" {
		t.Fatalf("claim after the upgrade: %s, bound to %q", r.Status, r.Intent.Principal)
	}
	if got := lastEntryEncoding(t, tc.leader()); got != fsm.EncodingBinary2 {
		t.Fatalf("after the upgrade the leader wrote encoding %d", got)
	}
	report := &fsm.Complete{Namespace: "default", Key: "after", Owner: "o", FencingToken: r.Intent.FencingToken,
		Outcome: fsm.OutcomeFailed, Principal: "agents-b"}
	if r := tc.propose(ctx, report); r.Status != fsm.StatusNotGrantHolder {
		t.Fatalf("another key's report after the upgrade: %s %s", r.Status, r.Detail)
	}

	leader := tc.leader()
	want, wantIndex := leader.Digest()
	for id, n := range tc.nodes {
		waitFor(t, 30*time.Second, id+" to apply every entry to the same state", func() bool {
			got, idx := n.Digest()
			if idx < wantIndex {
				return false
			}
			want, wantIndex = leader.Digest()
			return got == want
		})
		for key, principal := range map[string]string{"before": "", "after": "agents-a"} {
			if got, ok := principalOn(n, key); !ok || got != principal {
				t.Fatalf("%s holds %s bound to %q (present %t), want %q", id, key, got, ok, principal)
			}
		}
	}
}
