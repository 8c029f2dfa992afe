package main

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intentledger/intentd/testkit/nodetest"
)

// These tests run real intentd processes: kill -9 is a real crash.

// intentdBinary builds intentd once and runs the test in parallel with the
// other process tests (each process has its own ports and data directory).
func intentdBinary(t *testing.T) string {
	t.Helper()
	bin := nodetest.IntentdBinary(t)
	t.Parallel()
	return bin
}

// fastDev are the flags of every process here: fast elections, no auth.
var fastDev = []string{"--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms", "--auth=off"}

func startProc(t *testing.T, bin, dir, id string, args ...string) *nodetest.Proc {
	t.Helper()
	return nodetest.StartProc(t, bin, dir, id, append(append([]string{}, fastDev...), args...)...)
}

func TestProcessSingleNodeDefaultsAndSIGTERM(t *testing.T) {
	bin := intentdBinary(t)
	p := startProc(t, bin, t.TempDir(), "solo")
	nodetest.WaitFor(t, 30*time.Second, "single node ready", func() bool { return nodetest.Ready(p.HTTP) })
	a := nodetest.ClaimUntilDefinite(t, []string{p.HTTP}, 0, "solo:1", "o")
	if a.Code != http.StatusCreated {
		t.Fatalf("claim: %v", a)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited, err := p.Wait(30 * time.Second)
	if !exited {
		t.Fatal("no exit after SIGTERM")
	}
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Log())
	}
}

// startThree starts processes p1..p3 that bootstrap one cluster and waits
// until all three are ready; procs maps each HTTP address to its process.
func startThree(t *testing.T, bin, dir string) (p1, p2, p3 *nodetest.Proc, procs map[string]*nodetest.Proc) {
	t.Helper()
	p1 = startProc(t, bin, dir, "p1", "--bootstrap-expect", "3")
	p2 = startProc(t, bin, dir, "p2", "--bootstrap-expect", "3", "--join", p1.Gossip)
	p3 = startProc(t, bin, dir, "p3", "--bootstrap-expect", "3", "--join", p1.Gossip)
	nodetest.WaitFor(t, 30*time.Second, "three ready nodes", func() bool {
		return nodetest.Ready(p1.HTTP) && nodetest.Ready(p2.HTTP) && nodetest.Ready(p3.HTTP)
	})
	return p1, p2, p3, map[string]*nodetest.Proc{p1.HTTP: p1, p2.HTTP: p2, p3.HTTP: p3}
}

func TestProcessKill9LeaderNothingAcknowledgedLost(t *testing.T) {
	bin := intentdBinary(t)
	dir := t.TempDir()
	p1, p2, p3, procs := startThree(t, bin, dir)
	addrs := []string{p1.HTTP, p2.HTTP, p3.HTTP}
	fences := map[string]any{}
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("proc:%d", i)
		a := nodetest.ClaimUntilDefinite(t, addrs, i, key, "owner-1")
		if a.Code != http.StatusCreated {
			t.Fatalf("claim %s: %v", key, a)
		}
		fences[key] = a.Body["fencing_token"]
	}
	leader := procs[nodetest.LeaderHTTP(p1.HTTP, "")]
	if leader == nil {
		t.Fatal("no leader known")
	}
	leader.Kill()
	var survivors []string
	for _, a := range addrs {
		if a != leader.HTTP {
			survivors = append(survivors, a)
		}
	}
	nodetest.WaitFor(t, 30*time.Second, "a new leader", func() bool {
		l := nodetest.LeaderHTTP(survivors[0], "")
		return l != "" && l != leader.HTTP && nodetest.Ready(survivors[0]) && nodetest.Ready(survivors[1])
	})
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("proc:%d", i)
		a := nodetest.GetUntilDefinite(t, survivors[i%2], "/v1/intents/"+key)
		if in := nodetest.IntentOf(a.Body); a.Code != 200 || in["fencing_token"] != fences[key] || in["owner"] != "owner-1" {
			t.Errorf("%s after kill -9 of the leader: %v", key, a)
		}
		if b := nodetest.ClaimUntilDefinite(t, survivors, i, key, "owner-2"); b.Code != http.StatusConflict {
			t.Errorf("second owner on %s after failover: %v", key, b)
		}
	}
	// The killed node restarts on its data and catches up.
	leader.Args = append(leader.Args, "--join", procs[survivors[0]].Gossip)
	leader.Start(t)
	nodetest.WaitFor(t, 30*time.Second, "the restarted node to be ready", func() bool { return nodetest.Ready(leader.HTTP) })
	nodetest.WaitFor(t, 30*time.Second, "the restarted node to serve a stale read of the last claim", func() bool {
		a, err := nodetest.Get(leader.HTTP, "/v1/intents/proc:19?consistency=stale")
		return err == nil && a.Code == 200 && nodetest.IntentOf(a.Body)["fencing_token"] == fences["proc:19"]
	})
}

// A follower's graceful leave finishes on its own while another member is
// paused (SIGSTOP: it accepts TCP connections and answers nothing) and
// while requests are in flight: the fault suite once saw a leave hang for
// 30 s and the run was lost.
func TestProcessFollowerLeavesPromptlyWhileAMemberIsPaused(t *testing.T) {
	bin := intentdBinary(t)
	dir := t.TempDir()
	p1, p2, p3, procs := startThree(t, bin, dir)
	leader := procs[nodetest.LeaderHTTP(p1.HTTP, "")]
	if leader == nil {
		t.Fatal("no leader known")
	}
	var followers []*nodetest.Proc
	for _, p := range []*nodetest.Proc{p1, p2, p3} {
		if p != leader {
			followers = append(followers, p)
		}
	}
	paused, leaving := followers[0], followers[1]
	if err := paused.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = paused.Signal(syscall.SIGCONT) }()
	// A long-poll in flight on the leaving node (forwarded to the leader):
	// the drain must not wait its minute out.
	go func() { _, _ = nodetest.Get(leaving.HTTP, "/v1/intents/none?wait=60s") }()
	nodetest.WaitFor(t, 10*time.Second, "the long-poll to be forwarded", func() bool {
		return nodetest.MetricSum(leaving.HTTP, "intentd_http_forwarded_total") >= 1
	})

	start := time.Now()
	if err := leaving.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited, err := leaving.Wait(40 * time.Second)
	if !exited {
		t.Fatalf("no exit 40 s after SIGTERM with a member paused (--shutdown-timeout is 20 s)")
	}
	if err != nil {
		t.Fatalf("exit after SIGTERM with a paused member: %v\n%s", err, leaving.Log())
	}
	t.Logf("left in %v with a member paused", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(leaving.Log(), "node stopped") {
		t.Fatalf("the leave did not finish gracefully:\n%s", leaving.Log())
	}
}
