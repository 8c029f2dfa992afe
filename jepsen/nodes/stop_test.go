package nodes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A node that does not exit after SIGTERM within the stop's bound gets
// SIGQUIT first, so the Go runtime writes every goroutine's stack into its
// log, and only then SIGKILL; Stop reports the timeout. The stand-in node
// ignores SIGTERM and writes a marker when SIGQUIT arrives, as the Go
// runtime would write its dump.
func TestStopPastItsBoundKeepsTheEvidence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	c := &Cluster{cfg: Config{Dir: dir}, n: 1, procs: make([]*proc, 2)}
	if err := os.MkdirAll(filepath.Dir(c.LogPath(1)), 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(c.LogPath(1), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644) // as the harness opens node logs
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("/bin/sh", "-c",
		`trap '' TERM; trap 'echo "goroutine 1 [running]: (dump)"; exit 2' QUIT; echo ready; while :; do sleep 0.05; done`)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.procs[1] = p
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-p.done })
	readLog := func() string {
		b, err := os.ReadFile(c.LogPath(1))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(readLog(), "ready"); {
		if time.Now().After(deadline) {
			t.Fatal("the stand-in node never started")
		}
		time.Sleep(10 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = c.Stop(ctx, 1)
	if err == nil || !strings.Contains(err.Error(), "no exit after SIGTERM") {
		t.Fatalf("Stop of a node that ignores SIGTERM: %v, want the timeout reported", err)
	}
	if !p.exited() {
		t.Fatal("the node still runs after Stop passed its bound")
	}
	log := readLog()
	quit := strings.Index(log, "SIGQUIT (stop timed out")
	dump := strings.Index(log, "goroutine 1 [running]: (dump)")
	if quit < 0 || dump < quit {
		t.Fatalf("the node log does not show SIGQUIT and then the dump before the kill:\n%s", log)
	}
}
