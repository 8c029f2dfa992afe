package nodetest

import (
	"bytes"
	"encoding/json"
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
)

var (
	buildMu sync.Mutex
	builds  = map[string]string{} // package and build tags -> binary
)

// IntentdBinary builds cmd/intentd once per test binary (per set of build
// tags) and returns its path. It skips the test under -short: real
// processes are the integration tier.
func IntentdBinary(t *testing.T, tags ...string) string {
	t.Helper()
	return Binary(t, "cmd/intentd", tags...)
}

// Binary builds the module's package pkg ("cmd/intent-proxy") once per
// test binary (per set of build tags) and returns its path. It skips the
// test under -short: real processes are the integration tier.
func Binary(t *testing.T, pkg string, tags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs real processes: integration tier")
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	joined := strings.Join(tags, ",")
	key := pkg + " " + joined
	if bin, ok := builds[key]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "intentd-bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if joined != "" {
		args = append(args, "-tags", joined)
	}
	out, err := exec.Command("go", append(args, "github.com/intentledger/intentd/"+pkg)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./%s: %v\n%s", pkg, err, out)
	}
	builds[key] = bin
	return bin
}

// handedOut holds every address FreePort returned in this test process:
// the kernel hands a port closed a moment ago out again, so two nodes of
// one cluster, given their ports before either started, could get the
// same one (a CI run saw n3's gossip port equal n1's).
var handedOut struct {
	sync.Mutex
	addrs map[string]bool
}

// FreePort returns a loopback address whose port was free a moment ago
// and that no earlier call in this process returned.
func FreePort(t *testing.T) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.addrs == nil {
		handedOut.addrs = map[string]bool{}
	}
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr
		}
	}
	t.Fatal("no loopback port that was not handed out already")
	return ""
}

// Process is one process of a test, started from Bin with Args, its
// output kept in memory. Start may be called again after it ended (a
// restart).
type Process struct {
	Name, Bin string
	Args      []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	log  LockedBuffer
	done chan error
}

// StartProcess starts bin with args; the test's cleanup kills it and, if
// the test failed, logs its output under name.
func StartProcess(t *testing.T, name, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{Name: name, Bin: bin, Args: args}
	p.Start(t)
	t.Cleanup(func() { p.cleanup(t) })
	return p
}

func (p *Process) cleanup(t *testing.T) {
	p.Kill()
	if t.Failed() {
		t.Logf("log of %s:\n%s", p.Name, p.Log())
	}
}

// Start starts the process (again) with its Args.
func (p *Process) Start(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	p.cmd, p.done = cmd, done
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Signal(sig)
}

// Wait waits up to limit for the process to exit and returns how it
// exited; exited is false if it is still running.
func (p *Process) Wait(limit time.Duration) (exited bool, err error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case err := <-done:
		done <- err // later waits see it too
		return true, err
	case <-time.After(limit):
		return false, nil
	}
}

// Kill SIGKILLs the process, if it runs, and waits for it to exit.
func (p *Process) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	_, _ = p.Wait(time.Minute)
}

// Stop sends SIGTERM and waits up to limit for the exit; exited is false
// if the process still runs.
func (p *Process) Stop(limit time.Duration) (exited bool, err error) {
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return false, err
	}
	return p.Wait(limit)
}

// Log returns everything the process (and its earlier runs) printed.
func (p *Process) Log() string { return p.log.String() }

// Proc is one intentd process on loopback. Start may be called again
// after the process ended (a restart on the same ports and data).
type Proc struct {
	ID, HTTP, Raft, Gossip string
	// Bin is the binary, DataDir the node's data directory and Args the
	// flags beyond ID, data dir and addresses.
	Bin, DataDir string
	Args         []string

	Process
}

// StartProc starts node id of bin with its data under dir on fresh ports,
// passing args; the test's cleanup kills it and, if the test failed, logs
// its output.
func StartProc(t *testing.T, bin, dir, id string, args ...string) *Proc {
	t.Helper()
	p := &Proc{ID: id, HTTP: FreePort(t), Raft: FreePort(t), Gossip: FreePort(t), Bin: bin,
		DataDir: filepath.Join(dir, id), Args: args}
	p.Start(t)
	t.Cleanup(func() { p.cleanup(t) })
	return p
}

// Start starts the process (again), on its ports and data directory.
func (p *Proc) Start(t *testing.T) {
	t.Helper()
	p.Process.Name, p.Process.Bin = p.ID, p.Bin
	p.Process.Args = append([]string{"--id", p.ID, "--data-dir", p.DataDir, "--http-addr", p.HTTP,
		"--raft-addr", p.Raft, "--gossip-addr", p.Gossip}, p.Args...)
	p.Process.Start(t)
}

// Ready reports whether the node at addr answers /readyz with 200.
func Ready(addr string) bool {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// LeaderHTTP returns the leader's HTTP address as the node at addr knows
// it ("" when unknown). apiKey is sent when not empty.
func LeaderHTTP(addr, apiKey string) string {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/cluster", nil)
	if err != nil {
		return ""
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var st struct {
		LeaderHTTP string `json:"leader_http"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	return strings.TrimPrefix(st.LeaderHTTP, "http://")
}

// MetricSum adds up every series of the metric name on the node's
// /metrics, whatever its labels (-1 when it cannot be read).
func MetricSum(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err == nil {
			sum += f
		}
	}
	return sum
}

// LockedBuffer is a bytes.Buffer safe for a process's output and a test
// reading it at once.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
