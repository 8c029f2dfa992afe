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
	builds  = map[string]string{} // build tags -> binary
)

// IntentdBinary builds cmd/intentd once per test binary (per set of build
// tags) and returns its path. It skips the test under -short: real
// processes are the integration tier.
func IntentdBinary(t *testing.T, tags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs real processes: integration tier")
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	key := strings.Join(tags, ",")
	if bin, ok := builds[key]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "intentd-bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "intentd")
	args := []string{"build", "-o", bin}
	if key != "" {
		args = append(args, "-tags", key)
	}
	out, err := exec.Command("go", append(args, "github.com/intentledger/intentd/cmd/intentd")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/intentd: %v\n%s", err, out)
	}
	builds[key] = bin
	return bin
}

// FreePort returns a loopback address whose port was free a moment ago.
func FreePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Proc is one intentd process on loopback. Start may be called again
// after the process ended (a restart on the same ports and data).
type Proc struct {
	ID, HTTP, Raft, Gossip string
	// Bin is the binary, DataDir the node's data directory and Args the
	// flags beyond ID, data dir and addresses.
	Bin, DataDir string
	Args         []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	log  *lockedBuffer
	done chan error
}

// StartProc starts node id of bin with its data under dir on fresh ports,
// passing args; the test's cleanup kills it and, if the test failed, logs
// its output.
func StartProc(t *testing.T, bin, dir, id string, args ...string) *Proc {
	t.Helper()
	p := &Proc{ID: id, HTTP: FreePort(t), Raft: FreePort(t), Gossip: FreePort(t), Bin: bin,
		DataDir: filepath.Join(dir, id), Args: args}
	p.Start(t)
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("log of %s:\n%s", id, p.Log())
		}
	})
	return p
}

// Start starts the process (again), on its ports and data directory.
func (p *Proc) Start(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	all := append([]string{"--id", p.ID, "--data-dir", p.DataDir, "--http-addr", p.HTTP,
		"--raft-addr", p.Raft, "--gossip-addr", p.Gossip}, p.Args...)
	cmd := exec.Command(p.Bin, all...)
	if p.log == nil {
		p.log = &lockedBuffer{}
	}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	p.cmd, p.done = cmd, done
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Signal(sig)
}

// Wait waits up to limit for the process to exit and returns how it
// exited; exited is false if it is still running.
func (p *Proc) Wait(limit time.Duration) (exited bool, err error) {
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
func (p *Proc) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	_, _ = p.Wait(time.Minute)
}

// Log returns everything the process (and its earlier runs) printed.
func (p *Proc) Log() string { return p.log.String() }

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

// lockedBuffer is a bytes.Buffer safe for a process's output and a test
// reading it at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
