package canary

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/intentledger/intentd/client"
)

// ToolProcessEnv, set to "1" in a process's environment, makes a program
// that calls ToolProcessMain at start serve as a canary tool process.
const ToolProcessEnv = "CANARY_TOOL_PROCESS"

// toolReadyPrefix starts the line a tool process prints when it serves.
const toolReadyPrefix = "canary-tool listening "

// ToolProcessMain runs a tool service process: it serves on a loopback
// port, prints "canary-tool listening URL" on stdout, and exits when its
// stdin closes (its parent is gone). At a crash point it kills itself with
// SIGKILL, so nothing of the call survives but what already reached the
// provider and the ledger. With --via http-proxy it serves the plain tool
// on a port of its own and intent-proxy (claiming with --proxy-lease) in
// front of it on the announced one: the crash kills the proxy holding the
// claim together with the tool; with --via mcp it serves the plain MCP
// tool and the MCP gate in front of it the same way. It returns the exit
// code.
func ToolProcessMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("canary-tool", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ledger := fs.String("ledger", "", "comma-separated ledger node URLs")
	provider := fs.String("provider", "", "provider base URL")
	lease := fs.Duration("lease", 10*time.Second, "lease of a grant")
	crashLease := fs.Duration("crash-lease", time.Second, "lease of a grant for a delivery that crashes")
	noLedger := fs.Bool("no-ledger", false, "run effects without the ledger (broken on purpose)")
	viaFlag := fs.String("via", string(ViaSDK), "sdk (the tool service calls client.Do), http-proxy (intent-proxy in front of the plain tool) or mcp (the MCP gate in front of the plain MCP tool)")
	proxyLease := fs.Duration("proxy-lease", grantLease, "--via http-proxy or mcp: the lease intent-proxy or the MCP gate claims with")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	via, err := ParseVia(*viaFlag)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	die := func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	switch via {
	case ViaHTTPProxy:
		return proxyProcessMain(ctx, strings.Split(*ledger, ","), *provider, *proxyLease, *noLedger, die, stdout, stderr)
	case ViaMCP:
		return mcpProcessMain(ctx, strings.Split(*ledger, ","), *provider, *proxyLease, *noLedger, die, stdout, stderr)
	}
	cfg := ToolConfig{Provider: *provider, Lease: *lease, CrashLease: *crashLease, Die: die}
	if !*noLedger {
		cl, err := newLedgerClient(strings.Split(*ledger, ","))
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		cfg.Ledger = cl
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%shttp://%s\n", toolReadyPrefix, ln.Addr())
	if err := ServeTool(ctx, ln, cfg); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// proxyProcessMain is ToolProcessMain with --via http-proxy: the plain
// tool, and intent-proxy in front of it on the announced port, until ctx
// ends.
func proxyProcessMain(ctx context.Context, ledger []string, provider string, lease time.Duration, noLedger bool, die func(),
	stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, err)
		return 1
	}
	cl, err := newLedgerClient(ledger)
	if err != nil {
		return fail(err)
	}
	toolLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	h, err := newProxyLane(cl, "http://"+toolLn.Addr().String(), lease, noLedger)
	if err != nil {
		return fail(err)
	}
	errc := make(chan error, 2)
	go func() { errc <- servePlainTool(ctx, toolLn, PlainToolConfig{Provider: provider, Die: die}) }()
	go func() { errc <- serveUntil(ctx, ln, h) }()
	fmt.Fprintf(stdout, "%shttp://%s\n", toolReadyPrefix, ln.Addr())
	var first error
	for range 2 {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	_ = h.Wait(wctx)
	if first != nil {
		return fail(first)
	}
	return 0
}

// mcpProcessMain is ToolProcessMain with --via mcp: the plain MCP tool on
// a port of its own, and the MCP gate in front of it on the announced
// one, until ctx ends.
func mcpProcessMain(ctx context.Context, ledger []string, provider string, lease time.Duration, noLedger bool, die func(),
	stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, err)
		return 1
	}
	cl, err := newLedgerClient(ledger)
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	lane, err := startMCPLane(ctx, cl, PlainToolConfig{Provider: provider}, lease, noLedger, die)
	if err != nil {
		return fail(err)
	}
	defer lane.close()
	fmt.Fprintf(stdout, "%shttp://%s\n", toolReadyPrefix, ln.Addr())
	if err := serveUntil(ctx, ln, lane.Handler); err != nil {
		return fail(err)
	}
	return 0
}

// toolProcessArgs are what a tool process is started with.
type toolProcessArgs struct {
	ledger     []string
	provider   string
	crashLease time.Duration
	// proxyLease is the lease of the process's intent-proxy
	// (ViaHTTPProxy) or MCP gate (ViaMCP).
	proxyLease time.Duration
	noLedger   bool
	via        Via
}

// newLedgerClient is the ledger client a tool uses.
func newLedgerClient(addrs []string) (*client.Client, error) {
	return client.New(addrs,
		client.WithBackoff(5*time.Millisecond, 50*time.Millisecond),
		client.WithMaxWait(30*time.Second), client.WithAutoCommit(false))
}

// toolProcess is a tool service running as a child process.
type toolProcess struct {
	cmd   *exec.Cmd
	url   string
	stdin io.WriteCloser
	done  chan struct{}
	// stderr keeps the start of the child's error output.
	stderr *boundedBuffer
}

// startToolProcess starts argv as a tool process for the run and waits
// until it serves.
func startToolProcess(ctx context.Context, argv []string, a toolProcessArgs) (*toolProcess, error) {
	args := append(append([]string(nil), argv[1:]...),
		"--ledger", strings.Join(a.ledger, ","), "--provider", a.provider, "--crash-lease", a.crashLease.String())
	if a.noLedger {
		args = append(args, "--no-ledger")
	}
	if a.via == ViaHTTPProxy || a.via == ViaMCP {
		args = append(args, "--via", string(a.via), "--proxy-lease", a.proxyLease.String())
	}
	cmd := exec.Command(argv[0], args...)
	cmd.Env = append(os.Environ(), ToolProcessEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	tp := &toolProcess{cmd: cmd, stdin: stdin, done: make(chan struct{}), stderr: &boundedBuffer{max: 4096}}
	cmd.Stderr = tp.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("canary: start tool process: %w", err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, toolReadyPrefix) {
				ready <- strings.TrimPrefix(line, toolReadyPrefix)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(tp.done)
	}()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case tp.url = <-ready:
		return tp, nil
	case <-tp.done:
		return nil, fmt.Errorf("canary: tool process exited before serving (%v): %s", cmd.ProcessState, tp.stderr)
	case <-ctx.Done():
		tp.stop()
		return nil, ctx.Err()
	case <-t.C:
		tp.stop()
		return nil, errors.New("canary: tool process did not start serving within 30 s")
	}
}

// reap waits (bounded) for the process to end and says how it ended.
func (tp *toolProcess) reap() string {
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-tp.done:
		return fmt.Sprintf("tool process %d ended: %v", tp.cmd.Process.Pid, tp.cmd.ProcessState)
	case <-t.C:
		tp.stop()
		return fmt.Sprintf("tool process %d had to be killed", tp.cmd.Process.Pid)
	}
}

// stop closes the process's stdin, which ends it, and kills it if it is
// still there after a grace period.
func (tp *toolProcess) stop() {
	_ = tp.stdin.Close()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-tp.done:
	case <-t.C:
		_ = tp.cmd.Process.Kill()
		<-tp.done
	}
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// quietLog drops net/http's server error log (aborted handlers are the
// fault being injected, not news).
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }
