package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intentledger/intentd/testkit/nodetest"
)

// podMembers asks the node at addr for the Raft configuration it knows:
// member ID -> suffrage (voter, nonvoter).
func podMembers(addr string) map[string]string {
	resp, err := http.Get("http://" + addr + "/v1/cluster")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var st struct {
		Nodes []struct {
			ID       string `json:"id"`
			Suffrage string `json:"suffrage"`
		} `json:"nodes"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return nil
	}
	out := map[string]string{}
	for _, n := range st.Nodes {
		if n.Suffrage != "" {
			out[n.ID] = n.Suffrage
		}
	}
	return out
}

// TestProcessPodLifecycle runs what the StatefulSet in deploy/kubernetes
// relies on, with real processes: three nodes started alike (every one
// with --bootstrap-expect 3 and --join naming all three, as each pod's
// arguments do), the leader deleted the way kubelet deletes a pod (its
// preStop step is a sleep, which changes nothing in the process; then
// SIGTERM) while a client keeps writing, and the pod recreated with the
// same ID, data directory and arguments. The SIGTERMed leader hands
// leadership over and exits 0 within the pod's grace period, the two others
// keep acknowledging writes, the Raft configuration keeps it as a voter
// (--leave-on-terminate is false), and once restarted it is ready, a voter
// again, and serves every write acknowledged before, during and after its
// absence from its own copy.
func TestProcessPodLifecycle(t *testing.T) {
	bin := intentdBinary(t)
	dir := t.TempDir()
	ids := []string{"intentd-0", "intentd-1", "intentd-2"}
	procs := make([]*nodetest.Proc, len(ids))
	var gossip []string
	for i, id := range ids {
		procs[i] = &nodetest.Proc{ID: id, HTTP: nodetest.FreePort(t), Raft: nodetest.FreePort(t), Gossip: nodetest.FreePort(t),
			Bin: bin, DataDir: dir + "/" + id}
		gossip = append(gossip, procs[i].Gossip)
	}
	byHTTP := map[string]*nodetest.Proc{}
	var addrs []string
	for _, p := range procs {
		p.Args = append(append([]string{}, fastDev...), "--bootstrap-expect=3", "--join="+strings.Join(gossip, ","),
			"--leave-on-terminate=false", "--shutdown-timeout=25s")
		p.Start(t)
		t.Cleanup(func() {
			p.Kill()
			if t.Failed() {
				t.Logf("log of %s:\n%s", p.ID, p.Log())
			}
		})
		byHTTP[p.HTTP] = p
		addrs = append(addrs, p.HTTP)
	}
	nodetest.WaitFor(t, 60*time.Second, "three ready pods", func() bool {
		return nodetest.Ready(procs[0].HTTP) && nodetest.Ready(procs[1].HTTP) && nodetest.Ready(procs[2].HTTP)
	})

	var mu sync.Mutex
	acked := map[string]any{} // key -> fencing token of its 201
	claim := func(targets []string, key string) {
		a := nodetest.ClaimUntilDefinite(t, targets, 0, key, "owner-1")
		if a.Code == http.StatusCreated {
			mu.Lock()
			acked[key] = a.Body["fencing_token"]
			mu.Unlock()
		}
	}
	for i := range 10 {
		claim(addrs[i%3:i%3+1], fmt.Sprintf("pod:before:%d", i))
	}
	victim := byHTTP[nodetest.LeaderHTTP(procs[0].HTTP, "")]
	if victim == nil {
		t.Fatal("no leader known")
	}
	var survivors []string
	for _, a := range addrs {
		if a != victim.HTTP {
			survivors = append(survivors, a)
		}
	}

	// A client keeps writing through every pod while the leader goes.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			claim(append([]string{addrs[i%3]}, survivors...), fmt.Sprintf("pod:during:%d", i))
		}
	}()
	if err := victim.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// terminationGracePeriodSeconds 40 less the 5 s preStop sleep.
	exited, err := victim.Wait(35 * time.Second)
	if !exited || err != nil {
		t.Fatalf("after SIGTERM: exited %v, err %v", exited, err)
	}
	log := victim.Log()
	if !strings.Contains(log, "transferring leadership before shutdown") || strings.Contains(log, "leadership transfer failed") ||
		!strings.Contains(log, "node stopped") {
		t.Fatalf("the leader did not hand over and stop cleanly:\n%s", log)
	}
	nodetest.WaitFor(t, 30*time.Second, "a new leader among the two left", func() bool {
		l := nodetest.LeaderHTTP(survivors[0], "")
		return l != "" && l != victim.HTTP && nodetest.Ready(survivors[0]) && nodetest.Ready(survivors[1])
	})
	close(stop)
	wg.Wait()
	if m := podMembers(survivors[0]); m[victim.ID] != "voter" || len(m) != 3 {
		t.Fatalf("with %s stopped the configuration is %v, want it still a voter of 3", victim.ID, m)
	}
	for i := range 10 {
		key := fmt.Sprintf("pod:after:%d", i)
		if a := nodetest.ClaimUntilDefinite(t, survivors, i, key, "owner-1"); a.Code != http.StatusCreated {
			t.Fatalf("claim %s on the two left: %v", key, a)
		}
		acked[key] = nil // its token is read back below from the leader
	}

	// The pod comes back: same name, same volume, same arguments.
	victim.Start(t)
	nodetest.WaitFor(t, 60*time.Second, "the recreated pod ready", func() bool { return nodetest.Ready(victim.HTTP) })
	nodetest.WaitFor(t, 30*time.Second, "the recreated pod a voter of 3", func() bool {
		m := podMembers(victim.HTTP)
		return len(m) == 3 && m[victim.ID] == "voter"
	})
	for key, token := range acked {
		if token == nil {
			a := nodetest.GetUntilDefinite(t, survivors[0], "/v1/intents/"+key)
			token = nodetest.IntentOf(a.Body)["fencing_token"]
		}
		nodetest.WaitFor(t, 30*time.Second, key+" on the recreated pod", func() bool {
			a, err := nodetest.Get(victim.HTTP, "/v1/intents/"+key+"?consistency=stale")
			in := nodetest.IntentOf(a.Body)
			return err == nil && a.Code == http.StatusOK && token != nil && in["fencing_token"] == token && in["owner"] == "owner-1"
		})
	}
	t.Logf("%d acknowledged claims read back from the recreated pod", len(acked))
}
