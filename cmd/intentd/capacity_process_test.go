package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/testkit/nodetest"
)

// memoryCgroupV1 is where cgroup v1's memory controller is mounted.
const memoryCgroupV1 = "/sys/fs/cgroup/memory"

// memoryCgroup makes a cgroup v1 memory cgroup limited to limit bytes and
// removes it when the test ends; it skips the test where there is none to
// make (not root, no cgroup v1), and fails it then under CI=true.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: this test needs root to make a memory cgroup")
		}
		t.Skip("needs root to make a memory cgroup")
	}
	if _, err := os.Stat(filepath.Join(memoryCgroupV1, "memory.limit_in_bytes")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: no cgroup v1 memory controller at %s: %v", memoryCgroupV1, err)
		}
		t.Skipf("no cgroup v1 memory controller at %s", memoryCgroupV1)
	}
	dir := filepath.Join(memoryCgroupV1, fmt.Sprintf("intentd-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The process is killed by its own cleanup, registered later and so
		// run first; an empty cgroup is removed.
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing the cgroup: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// oomKills reads the OOM kills in the cgroup (memory.oom_control).
func oomKills(t *testing.T, cg string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(cg, "memory.oom_control"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// TestProcessLedgerFullBeforeOOM: a node in a 160 MiB memory cgroup, with
// the defaults (capacity from the cgroup, high water 0.8, GOMEMLIMIT
// 90%), filled with claims of new keys of 60 KB payloads, answers 507
// ledger_full before it runs out of memory: it is never OOM-killed and
// keeps serving reads, completes and duplicates. Bounded by the number of
// claims (about three times what fills the high water), not by time.
func TestProcessLedgerFullBeforeOOM(t *testing.T) {
	const limit = 160 << 20
	cg := memoryCgroup(t, limit)
	bin := intentdBinary(t)
	http1, raft, gossip := nodetest.FreePort(t), nodetest.FreePort(t), nodetest.FreePort(t)
	args := append([]string{"-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, cg, bin,
		"--id", "full", "--data-dir", filepath.Join(t.TempDir(), "full"),
		"--http-addr", http1, "--raft-addr", raft, "--gossip-addr", gossip}, fastDev...)
	p := nodetest.StartProcess(t, "full", "/bin/sh", args...)
	nodetest.WaitFor(t, 30*time.Second, "node ready", func() bool { return nodetest.Ready(http1) })
	if !strings.Contains(p.Log(), "source=cgroup") {
		t.Fatalf("the node did not take its memory capacity from the cgroup:\n%s", p.Log())
	}

	held := nodetest.ClaimUntilDefinite(t, []string{http1}, 0, "held", "o")
	if held.Code != http.StatusCreated {
		t.Fatalf("claim held: %v", held)
	}
	pad := strings.Repeat("x", 60<<10-64)
	const most = 3 * limit / (60 << 10)
	refusedAt := -1
	for i := 0; i < most && refusedAt < 0; i++ {
		a, err := nodetest.Post(http1, "/v1/intents", map[string]any{
			"key": fmt.Sprintf("fill-%d", i), "tool": "test.tool", "owner": "o", "payload": map[string]any{"p": pad}})
		switch {
		case err != nil:
			t.Fatalf("claim %d: %v (OOM kills in the cgroup: %d)", i, err, oomKills(t, cg))
		case a.Code == http.StatusInsufficientStorage && a.Body["code"] == "ledger_full":
			refusedAt = i
			if d, _ := a.Body["detail"].(string); !strings.Contains(d, "(memory)") {
				t.Fatalf("ledger_full for another resource than memory: %v", a.Body)
			}
		case a.Code != http.StatusCreated:
			t.Fatalf("claim %d: %d %v", i, a.Code, a.Body)
		}
	}
	if refusedAt < 0 {
		t.Fatalf("%d claims of 60 KB in a %d MiB cgroup and no ledger_full", most, limit>>20)
	}
	t.Logf("ledger_full after %d claims of 60 KB", refusedAt)
	if exited, err := p.Wait(0); exited {
		t.Fatalf("the node exited: %v", err)
	}
	if n := oomKills(t, cg); n != 0 {
		t.Fatalf("%d OOM kills in the cgroup", n)
	}
	if a, err := nodetest.Get(http1, "/v1/intents/fill-0"); err != nil || a.Code != http.StatusOK {
		t.Fatalf("read on a full ledger: %d %v (%v)", a.Code, a.Body, err)
	}
	if a, err := nodetest.Post(http1, "/v1/intents/held/complete", map[string]any{
		"owner": "o", "fencing_token": held.Body["fencing_token"], "outcome": "executed"}); err != nil || a.Code != http.StatusOK {
		t.Fatalf("complete on a full ledger: %d %v (%v)", a.Code, a.Body, err)
	}
	if a := nodetest.ClaimUntilDefinite(t, []string{http1}, 0, "held", "other"); a.Code != http.StatusOK || a.Body["status"] != "duplicate" {
		t.Fatalf("duplicate on a full ledger: %v", a)
	}
}
