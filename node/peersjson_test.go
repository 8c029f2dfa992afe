package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestPeersJSONRecoveryRunbook performs docs/operations.md's "Recovering
// with peers.json": a majority (n2, n3) is lost, n1 alone cannot elect;
// n1 is stopped, given a peers.json naming only itself and started, and
// leads with every acknowledged write; the fenced nodes are wiped before
// they come back with --join, so the cluster ends with exactly the three
// voters it should have (a recovery once came back with five: the
// excluded nodes returned with their old data and were re-added).
func TestPeersJSONRecoveryRunbook(t *testing.T) {
	tn := newTestNodes(t)
	addrs := map[string][3]string{}
	for _, id := range []string{"n1", "n2", "n3"} {
		addrs[id] = [3]string{nodetest.FreePort(t), nodetest.FreePort(t), nodetest.FreePort(t)}
	}
	start := func(id string, expect int) *Node {
		var join []string
		for other, m := range tn.mains {
			if other != id {
				join = append(join, m.Cluster().GossipAddr())
			}
		}
		return tn.startCfg(id, expect, addrs[id], nil, join...)
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		start(id, 3)
	}
	tn.waitReady()
	var acked []string
	for i := range 20 {
		key := fmt.Sprintf("before:%d", i)
		if a := nodetest.ClaimUntilDefinite(t, []string{addrs["n1"][0], addrs["n2"][0], addrs["n3"][0]}, 0, key, "o"); a.Code != http.StatusCreated {
			t.Fatalf("claim %s: %+v", key, a)
		}
		acked = append(acked, key)
	}
	// Make sure n1 holds every acknowledged write before the majority goes.
	nodetest.WaitFor(t, 30*time.Second, "n1 to apply every write", func() bool {
		l := tn.leader()
		return l != nil && tn.mains["n1"].Cluster().Status().AppliedIndex >= l.Cluster().Status().CommitIndex
	})

	// The majority is gone for good (fenced: they stay off until wiped).
	for _, id := range []string{"n2", "n3"} {
		tn.mains[id].Kill()
		delete(tn.mains, id)
	}
	nodetest.WaitFor(t, 30*time.Second, "n1 to lose its leadership", func() bool { return !tn.mains["n1"].Cluster().IsLeader() })

	// Steps 2-4: stop the survivor, write peers.json, start it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tn.mains["n1"].Shutdown(ctx); err != nil {
		t.Fatalf("stopping n1: %v", err)
	}
	delete(tn.mains, "n1")
	peers, _ := json.Marshal([]map[string]any{{"id": "n1", "address": addrs["n1"][1], "non_voter": false}})
	if err := os.WriteFile(filepath.Join(tn.dir, "n1", cluster.PeersFile), peers, 0o600); err != nil {
		t.Fatal(err)
	}
	n1 := start("n1", 1)
	// A new leader answers linearizable reads once its barrier is applied:
	// until then a read is 503 no_leader, which is an answer to wait out.
	nodetest.WaitFor(t, 30*time.Second, "n1 to lead alone and answer linearizable reads", func() bool {
		if !n1.Cluster().IsLeader() {
			return false
		}
		code, _, err := doJSON(http.DefaultClient, "GET", "http://"+addrs["n1"][0]+"/v1/intents/"+acked[0]+"?consistency=linearizable", nil)
		return err == nil && code != http.StatusServiceUnavailable
	})
	if _, err := os.Stat(filepath.Join(tn.dir, "n1", cluster.PeersFile+".applied")); err != nil {
		t.Fatalf("peers.json was not renamed once applied: %v", err)
	}
	for _, key := range acked {
		code, body, err := doJSON(http.DefaultClient, "GET", "http://"+addrs["n1"][0]+"/v1/intents/"+key+"?consistency=linearizable", nil)
		if err != nil || code != http.StatusOK || body["owner"] != "o" {
			t.Fatalf("acknowledged %s after the recovery: %d %v %v", key, code, body, err)
		}
	}

	// Step 5: wipe the excluded nodes, then let them join as new members.
	for _, id := range []string{"n2", "n3"} {
		if err := os.RemoveAll(filepath.Join(tn.dir, id)); err != nil {
			t.Fatal(err)
		}
		start(id, 0)
	}
	nodetest.WaitFor(t, 60*time.Second, "three voters, one leader", func() bool {
		st := n1.Cluster().Status()
		voters := 0
		for _, ns := range st.Nodes {
			if ns.Suffrage == "voter" {
				voters++
			}
		}
		return voters == 3 && st.LeaderID != ""
	})
	st := n1.Cluster().Status()
	if len(st.Nodes) != 3 {
		t.Fatalf("after the recovery %d members, want exactly 3: %+v", len(st.Nodes), st.Nodes)
	}
	if a := nodetest.ClaimUntilDefinite(t, []string{addrs["n2"][0]}, 0, "after:1", "o"); a.Code != http.StatusCreated {
		t.Fatalf("claim through a rejoined node: %+v", a)
	}
}
