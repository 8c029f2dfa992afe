package nodes

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/netns"
	"github.com/intentledger/intentd/jepsen/netns/netnstest"
)

const testPrefix = "ijtest-" // shared by the suite's tests: each run removes any crashed one's leftovers

// buildIntentd builds cmd/intentd into a temporary directory.
func buildIntentd(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "intentd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/intentd")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/intentd: %v\n%s", err, out)
	}
	return bin
}

func TestNameIndex(t *testing.T) {
	for _, tc := range []struct {
		id string
		i  int
	}{{"n1", 1}, {"n12", 12}, {"", 0}, {"n", 0}, {"x1", 0}, {"n0", 0}, {"n-1", 0}} {
		if got := Index(tc.id); got != tc.i {
			t.Errorf("Index(%q) = %d, want %d", tc.id, got, tc.i)
		}
	}
	if Name(3) != "n3" {
		t.Errorf("Name(3) = %q", Name(3))
	}
}

func TestClusterLifecycle(t *testing.T) {
	netnstest.Require(t)
	ctx, stop := signal.NotifyContext(t.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()

	bin := buildIntentd(ctx, t)
	nw, err := netns.Create(ctx, testPrefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := nw.Close(); err != nil {
			t.Errorf("netns close: %v", err)
		}
	}()
	dir := t.TempDir()
	c, err := Start(ctx, Config{Binary: bin, Net: nw, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Errorf("cluster close: %v", err)
		}
		if t.Failed() {
			for i := 1; i <= 3; i++ {
				t.Logf("log of n%d:\n%s", i, c.tail(i))
			}
		}
	}()
	if got := c.HTTPAddr(2); got != "10.213.0.12:8100" {
		t.Errorf("HTTPAddr(2) = %q", got)
	}

	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader: n%d", leader)

	// Kill the leader: the others elect a new one.
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if c.Running(leader) {
		t.Fatalf("n%d still running after Kill", leader)
	}
	if err := c.Kill(leader); err == nil {
		t.Error("killing a dead node succeeded")
	}
	next, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatalf("the killed n%d is still the leader", leader)
	}
	t.Logf("new leader: n%d", next)

	// Restart the old leader on its data dir: everyone is ready again.
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, leader); err == nil {
		t.Error("restarting a running node succeeded")
	}
	if err := c.WaitReady(ctx, 1, 2, 3); err != nil {
		t.Fatal(err)
	}

	// Pause a follower, resume it: it catches up and is ready.
	follower := 1 + next%3
	if err := c.Pause(follower); err != nil {
		t.Fatal(err)
	}
	if !c.Paused(follower) || !c.Running(follower) {
		t.Errorf("n%d: paused %v running %v", follower, c.Paused(follower), c.Running(follower))
	}
	if l, err := c.WaitLeader(ctx); err != nil || l == follower {
		t.Errorf("leader with n%d paused: %d %v", follower, l, err)
	}
	if err := c.Resume(follower); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	// A graceful stop ends the process.
	if err := c.Stop(ctx, follower); err != nil {
		t.Fatal(err)
	}
	if c.Running(follower) {
		t.Errorf("n%d running after Stop", follower)
	}

	panics, err := c.Panics()
	if err != nil || len(panics) != 0 {
		t.Errorf("panics: %q %v", panics, err)
	}
	b, err := os.ReadFile(c.LogPath(leader))
	if err != nil || !strings.Contains(string(b), "jepsen: SIGKILL") {
		t.Errorf("log of n%d lacks the kill note: %v", leader, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if c.Running(i) {
			t.Errorf("n%d running after Close", i)
		}
	}
}

func TestPanics(t *testing.T) {
	dir := t.TempDir()
	c := &Cluster{cfg: Config{Dir: dir}, n: 2}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	log := "{\"msg\":\"fine\"}\npanic: boom\ngoroutine 1 [running]:\nWARNING: DATA RACE\n"
	if err := os.WriteFile(c.LogPath(2), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := c.Panics()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "n2: panic: boom" || got[1] != "n2: WARNING: DATA RACE" {
		t.Errorf("Panics = %q", got)
	}
}
