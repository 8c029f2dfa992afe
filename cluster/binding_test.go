package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
)

// principalOn reads the principal of default/key on n's replica.
func principalOn(n *Node, key string) (string, bool) {
	var in *fsm.Intent
	n.sm.read(func(l *fsm.Machine) { in = l.Get("default", key) })
	if in == nil {
		return "", false
	}
	return in.Principal, true
}

// lastEntryVersion is the encoding version byte of the newest command
// entry in n's log.
func lastEntryVersion(t *testing.T, n *Node) byte {
	t.Helper()
	last, err := n.logs.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := last; i > 0; i-- {
		var l raft.Log
		if err := n.logs.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if l.Type == raft.LogCommand {
			return l.Data[1]
		}
	}
	t.Fatal("no command in the log")
	return 0
}

// Every replica binds a grant to the API key that claimed it and refuses
// another key's report alike: the caller travels in the log entry (of
// fsm.EncodingVersion, which every node announces in gossip) and the
// state machine decides.
func TestGrantBindingReplicates(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.LeaveOnShutdown = false })
	tc.startN(3)
	ctx := ctxT(t)
	c := claim("bound", "o")
	c.Principal = "agents-a"
	r := tc.propose(ctx, c)
	if r.Status != fsm.StatusGranted || r.Intent.Principal != "agents-a" {
		t.Fatalf("claim: %s, bound to %q", r.Status, r.Intent.Principal)
	}
	report := &fsm.Complete{Namespace: "default", Key: "bound", Owner: "o", FencingToken: r.Intent.FencingToken,
		Outcome: fsm.OutcomeFailed, Principal: "agents-b"}
	if r := tc.propose(ctx, report); r.Status != fsm.StatusNotGrantHolder {
		t.Fatalf("another key's report: %s %s", r.Status, r.Detail)
	}
	tc.propose(ctx, claim("unbound", "o"))

	leader := tc.leader()
	waitFor(t, 30*time.Second, "every node to announce its encoding", func() bool {
		st := leader.Status()
		for _, ns := range st.Nodes {
			if ns.Decodes != int(fsm.EncodingVersion) {
				return false
			}
		}
		return len(st.Nodes) == 3
	})
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
		if v := lastEntryVersion(t, n); v != fsm.EncodingVersion {
			t.Fatalf("%s holds an entry of version %d, want %d", id, v, fsm.EncodingVersion)
		}
		for key, principal := range map[string]string{"bound": "agents-a", "unbound": ""} {
			if got, ok := principalOn(n, key); !ok || got != principal {
				t.Fatalf("%s holds %s bound to %q (present %t), want %q", id, key, got, ok, principal)
			}
		}
	}
}
