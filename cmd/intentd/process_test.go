package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/intentledger/intentd/internal/nodetest"
)

// These tests run real intentd processes: kill -9 is a real crash.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func intentdBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs real processes: integration tier")
	}
	t.Parallel() // each process has its own ports and data directory
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "intentd-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "intentd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type proc struct {
	id, http, raft, gossip string
	cmd                    *exec.Cmd
	log                    *bytes.Buffer
	done                   chan error
}

func startProc(t *testing.T, bin, dir, id string, p *proc, args ...string) *proc {
	t.Helper()
	if p == nil {
		p = &proc{id: id, http: freePort(t), raft: freePort(t), gossip: freePort(t)}
	}
	p.log = &bytes.Buffer{}
	all := append([]string{"--id", id, "--data-dir", filepath.Join(dir, id), "--http-addr", p.http,
		"--raft-addr", p.raft, "--gossip-addr", p.gossip,
		"--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms", "--auth=off"}, args...)
	p.cmd = exec.Command(bin, all...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done = make(chan error, 1)
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("log of %s:\n%s", id, p.log.String())
		}
	})
	return p
}

func ready(addr string) bool {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

func leaderHTTP(addr string) string {
	resp, err := http.Get("http://" + addr + "/v1/cluster")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var st struct {
		State      string `json:"state"`
		LeaderHTTP string `json:"leader_http"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	return st.LeaderHTTP
}

func TestProcessSingleNodeDefaultsAndSIGTERM(t *testing.T) {
	bin := intentdBinary(t)
	p := startProc(t, bin, t.TempDir(), "solo", nil)
	nodetest.WaitFor(t, 30*time.Second, "single node ready", func() bool { return ready(p.http) })
	a := nodetest.ClaimUntilDefinite(t, []string{p.http}, 0, "solo:1", "o")
	if a.Code != http.StatusCreated {
		t.Fatalf("claim: %v", a)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}

// startThree starts processes p1..p3 that bootstrap one cluster and waits
// until all three are ready; procs maps each HTTP address to its process.
func startThree(t *testing.T, bin, dir string) (p1, p2, p3 *proc, procs map[string]*proc) {
	t.Helper()
	p1 = startProc(t, bin, dir, "p1", nil, "--bootstrap-expect", "3")
	p2 = startProc(t, bin, dir, "p2", nil, "--bootstrap-expect", "3", "--join", p1.gossip)
	p3 = startProc(t, bin, dir, "p3", nil, "--bootstrap-expect", "3", "--join", p1.gossip)
	nodetest.WaitFor(t, 30*time.Second, "three ready nodes", func() bool { return ready(p1.http) && ready(p2.http) && ready(p3.http) })
	return p1, p2, p3, map[string]*proc{p1.http: p1, p2.http: p2, p3.http: p3}
}

func TestProcessKill9LeaderNothingAcknowledgedLost(t *testing.T) {
	bin := intentdBinary(t)
	dir := t.TempDir()
	p1, p2, p3, procs := startThree(t, bin, dir)
	addrs := []string{p1.http, p2.http, p3.http}
	fences := map[string]any{}
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("proc:%d", i)
		a := nodetest.ClaimUntilDefinite(t, addrs, i, key, "owner-1")
		if a.Code != http.StatusCreated {
			t.Fatalf("claim %s: %v", key, a)
		}
		fences[key] = a.Body["fencing_token"]
	}
	leader := procs[leaderHTTP(p1.http)]
	if leader == nil {
		t.Fatal("no leader known")
	}
	if err := leader.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var survivors []string
	for _, a := range addrs {
		if a != leader.http {
			survivors = append(survivors, a)
		}
	}
	nodetest.WaitFor(t, 30*time.Second, "a new leader", func() bool {
		l := leaderHTTP(survivors[0])
		return l != "" && l != leader.http && ready(survivors[0]) && ready(survivors[1])
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
	<-leader.done
	leader.done <- nil
	startProc(t, bin, dir, leader.id, &proc{id: leader.id, http: leader.http, raft: leader.raft, gossip: leader.gossip},
		"--join", procs[survivors[0]].gossip)
	nodetest.WaitFor(t, 30*time.Second, "the restarted node to be ready", func() bool { return ready(leader.http) })
	nodetest.WaitFor(t, 30*time.Second, "the restarted node to serve a stale read of the last claim", func() bool {
		a, err := nodetest.Get(leader.http, "/v1/intents/proc:19?consistency=stale")
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
	leader := procs[leaderHTTP(p1.http)]
	if leader == nil {
		t.Fatal("no leader known")
	}
	var followers []*proc
	for _, p := range []*proc{p1, p2, p3} {
		if p != leader {
			followers = append(followers, p)
		}
	}
	paused, leaving := followers[0], followers[1]
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = paused.cmd.Process.Signal(syscall.SIGCONT) }()
	// A long-poll in flight on the leaving node (forwarded to the leader):
	// the drain must not wait its minute out.
	go func() { _, _ = nodetest.Get(leaving.http, "/v1/intents/none?wait=60s") }()
	nodetest.WaitFor(t, 10*time.Second, "the long-poll to be forwarded", func() bool {
		return metricValue(leaving.http, "intentd_http_forwarded_total") >= 1
	})

	start := time.Now()
	if err := leaving.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-leaving.done:
		leaving.done <- err // for cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM with a paused member: %v\n%s", err, leaving.log)
		}
		t.Logf("left in %v with a member paused", time.Since(start).Round(time.Millisecond))
	case <-time.After(40 * time.Second):
		t.Fatalf("no exit 40 s after SIGTERM with a member paused (--shutdown-timeout is 20 s)")
	}
	if !strings.Contains(leaving.log.String(), "node stopped") {
		t.Fatalf("the leave did not finish gracefully:\n%s", leaving.log)
	}
}

// metricValue reads one unlabelled series from a node's /metrics (-1 when
// it cannot).
func metricValue(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
