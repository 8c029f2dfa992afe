// Package nodes runs and controls real intentd processes for the fault
// suite, one per network namespace of a netns.Net: start, SIGKILL,
// restart on the same data directory, SIGSTOP/SIGCONT, SIGTERM, and the
// questions the suite asks the cluster (who leads, is everyone ready, did
// anything panic).
//
// Node i (1-based) is named "n<i>", listens on its namespace address
// (HTTP :8100, Raft :8200, gossip :8300), keeps its data in
// <Dir>/data/n<i> and appends stdout and stderr to <Dir>/logs/n<i>.log.
// The controller talks to the nodes from the root namespace over the host
// veth, which faults never cut. Close the Cluster before the netns.Net.
package nodes

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/jepsen/lazyfs"
	"github.com/intentledger/intentd/jepsen/netns"
)

// Ports every node listens on, on its namespace address.
const (
	HTTPPort   = 8100
	RaftPort   = 8200
	GossipPort = 8300
)

// Ports of a relayed node (Config.Relayed): its peers reach it on the
// advertised ports (HTTPPeerPort for forwarding, RaftPort, GossipPort),
// where the delay layer's relays listen; the node itself listens for Raft
// and gossip on the backend ports and for HTTP on HTTPPort, which the
// harness's clients reach directly.
const (
	HTTPPeerPort      = 8101
	RaftBackendPort   = 8201
	GossipBackendPort = 8301
)

// Bounds on waits that the caller's context may not bound.
const (
	// StartTimeout bounds Start and Restart waiting for readiness.
	StartTimeout = 90 * time.Second
	// StopTimeout bounds waiting for a process to exit after a signal.
	StopTimeout = 30 * time.Second
	// quitTimeout is how long a node that passed StopTimeout gets, after
	// SIGQUIT, to print every goroutine's stack into its log before it is
	// killed.
	quitTimeout   = 5 * time.Second
	killTimeout   = 10 * time.Second
	probeTimeout  = time.Second
	pollInterval  = 50 * time.Millisecond
	logTailLines  = 20
	defaultBeat   = 500 * time.Millisecond
	minBeat       = 500 * time.Millisecond // intentd's leader lease (500ms) must not exceed it
	panicScanLine = 1 << 20
)

// Config says which binary to run where.
type Config struct {
	// Binary is the path of a built intentd.
	Binary string
	// Net is the network the nodes run in; node i runs in namespace i.
	Net *netns.Net
	// Dir is the results directory: data in <Dir>/data/n<i>, logs in
	// <Dir>/logs/n<i>.log. Nodes start on whatever state the data
	// directories hold: use a fresh Dir for a fresh cluster.
	Dir string
	// ExtraArgs are appended to every node's flags, e.g.
	// "--snapshot-threshold", "64".
	ExtraArgs []string
	// RaftHeartbeat is passed as --raft-heartbeat-timeout and
	// --raft-election-timeout (default 500ms, at least 500ms: intentd's
	// leader lease is 500ms and may not exceed the heartbeat timeout).
	RaftHeartbeat time.Duration
	// ProfileTimeouts leaves the Raft timeouts to the nodes' own timing
	// profile (their --network, in NodeArgs): nothing is passed, and
	// RaftHeartbeat is only what the harness assumes (pauses, holds).
	ProfileTimeouts bool
	// GossipKey, when set, is every node's --gossip-key (base64).
	GossipKey string
	// Relayed makes every node listen for its peers on the backend ports
	// and advertise the public ones (see HTTPPeerPort), where relays that
	// delay each link listen: the caller starts them before Start.
	Relayed bool
	// NodeArgs, when set, gives flags for node i alone, appended after
	// ExtraArgs (e.g. its region).
	NodeArgs func(i int) []string
	// BootstrapExpect is every node's --bootstrap-expect (default: the
	// number of nodes).
	BootstrapExpect int
	// TLSDir, when set, holds a development PKI (tlsutil.DevPKI) with a
	// certificate per node named n<i> that names the node's IP: the nodes
	// run with TLS (HTTPS, Raft over mutual TLS with node identities) and
	// the controller speaks HTTPS, trusting the node CA.
	TLSDir string
	// Storage, when set ("strict" or "ext4", lazyfs's modes), mounts a
	// lazy filesystem over <Dir>/disk/n<i> at each node's data directory,
	// for the storage nemeses (power loss, full disk, corruption).
	Storage string
}

// Cluster is a set of running (or killed, or paused) intentd processes.
// Its methods are safe for concurrent use.
type Cluster struct {
	cfg    Config
	n      int
	client *http.Client
	tls    *tls.Config // the controller's, with TLSDir; nil: plaintext

	mu     sync.Mutex
	procs  []*proc // index 1..n; nil before the first start
	closed bool
	disks  []*lazyfs.FS // index 1..n with Config.Storage; set by Start
}

// proc is one run of one node's process.
type proc struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, set before done closes
	paused bool          // guarded by Cluster.mu
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start starts every node and waits (bounded by ctx and StartTimeout)
// until each one's GET /readyz answers 200. Node i's flags are --id n<i>
// --data-dir <Dir>/data/n<i> --http-addr IP:8100 --raft-addr IP:8200
// --gossip-addr IP:8300 --bootstrap-expect N --join <node 1>:8300 (for
// i > 1) --auth=off --log-format json, then the raft timeouts, ExtraArgs
// and NodeArgs(i). Relayed nodes listen on the backend ports and
// advertise the public ones (HTTPPeerPort). On failure every started process is killed and the error
// names the node and the tail of its log.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Net == nil {
		return nil, errors.New("nodes: Config.Net is required")
	}
	if cfg.Binary == "" || cfg.Dir == "" {
		return nil, errors.New("nodes: Config.Binary and Config.Dir are required")
	}
	if cfg.RaftHeartbeat == 0 {
		cfg.RaftHeartbeat = defaultBeat
	}
	if cfg.RaftHeartbeat < minBeat {
		return nil, fmt.Errorf("nodes: RaftHeartbeat %v is below %v (intentd's leader lease)", cfg.RaftHeartbeat, minBeat)
	}
	bin, err := filepath.Abs(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	if st, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("nodes: binary: %w", err)
	} else if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("nodes: binary %s is not an executable file", bin)
	}
	cfg.Binary = bin
	if cfg.Dir, err = filepath.Abs(cfg.Dir); err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	n := cfg.Net.Nodes()
	c := &Cluster{
		cfg:   cfg,
		n:     n,
		procs: make([]*proc, n+1),
	}
	if cfg.TLSDir != "" {
		if c.tls, err = tlsutil.ClientConfig(filepath.Join(cfg.TLSDir, "ca.pem"), "", ""); err != nil {
			return nil, fmt.Errorf("nodes: %w", err)
		}
	}
	c.client = &http.Client{Transport: &http.Transport{
		Proxy:               nil, // never send node traffic to a proxy
		DialContext:         (&net.Dialer{Timeout: probeTimeout}).DialContext,
		TLSClientConfig:     c.tls,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     10 * time.Second,
	}}
	for i := 1; i <= n; i++ {
		for _, d := range []string{c.DataDir(i), filepath.Dir(c.LogPath(i))} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("nodes: %w", err)
			}
		}
	}
	if cfg.Storage != "" {
		if err := c.mountDisks(); err != nil {
			return nil, errors.Join(err, c.unmountDisks())
		}
	}
	for i := 1; i <= n; i++ {
		var join []string
		if i > 1 {
			join = []string{c.gossipAddr(1)}
		}
		if err := c.spawn(i, join); err != nil {
			return nil, errors.Join(err, c.Close())
		}
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("nodes: start: %w", err), c.Close())
	}
	return c, nil
}

// Nodes is the number of nodes.
func (c *Cluster) Nodes() int { return c.n }

// Name is node i's ID, "n<i>".
func Name(i int) string { return "n" + strconv.Itoa(i) }

// Index parses a node ID "n<i>" back into i; it returns 0 for anything
// else.
func Index(id string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(id, "n"))
	if err != nil || !strings.HasPrefix(id, "n") || i < 1 {
		return 0
	}
	return i
}

// HTTPAddr is node i's HTTP address, e.g. "10.213.0.11:8100".
func (c *Cluster) HTTPAddr(i int) string {
	return net.JoinHostPort(c.cfg.Net.NodeIP(i), strconv.Itoa(HTTPPort))
}

// URL is node i's API base URL: http://10.213.0.11:8100, or https:// with
// TLSDir.
func (c *Cluster) URL(i int) string {
	if c.tls != nil {
		return "https://" + c.HTTPAddr(i)
	}
	return "http://" + c.HTTPAddr(i)
}

// ClientTLS is the TLS configuration a client of the nodes needs (it
// trusts the node CA), nil when they run without TLS.
func (c *Cluster) ClientTLS() *tls.Config { return c.tls }

// RaftAddr is node i's Raft address (the one its peers dial: a relay's,
// for relayed nodes).
func (c *Cluster) RaftAddr(i int) string {
	return net.JoinHostPort(c.cfg.Net.NodeIP(i), strconv.Itoa(RaftPort))
}

// GossipAddr is node i's gossip address (the one its peers reach: a
// relay's, for relayed nodes).
func (c *Cluster) GossipAddr(i int) string { return c.gossipAddr(i) }

func (c *Cluster) gossipAddr(i int) string {
	return net.JoinHostPort(c.cfg.Net.NodeIP(i), strconv.Itoa(GossipPort))
}

// DataDir is node i's data directory.
func (c *Cluster) DataDir(i int) string { return filepath.Join(c.cfg.Dir, "data", Name(i)) }

// LogPath is node i's log file.
func (c *Cluster) LogPath(i int) string { return filepath.Join(c.cfg.Dir, "logs", Name(i)+".log") }

// ElectionTimeout is the Raft heartbeat and election timeout the nodes run
// with: a node paused for longer than a few of these loses leadership.
func (c *Cluster) ElectionTimeout() time.Duration { return c.cfg.RaftHeartbeat }

func (c *Cluster) args(i int, join []string) []string {
	ip := c.cfg.Net.NodeIP(i)
	beat := c.cfg.RaftHeartbeat.String()
	hostPort := func(port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }
	expect := c.n
	if c.cfg.BootstrapExpect > 0 {
		expect = c.cfg.BootstrapExpect
	}
	a := []string{
		"--id", Name(i),
		"--data-dir", c.DataDir(i),
		"--http-addr", hostPort(HTTPPort),
	}
	if c.cfg.Relayed {
		a = append(a,
			"--http-advertise", hostPort(HTTPPeerPort),
			"--raft-addr", hostPort(RaftBackendPort), "--raft-advertise", hostPort(RaftPort),
			"--gossip-addr", hostPort(GossipBackendPort), "--gossip-advertise", hostPort(GossipPort))
	} else {
		a = append(a, "--raft-addr", hostPort(RaftPort), "--gossip-addr", hostPort(GossipPort))
	}
	a = append(a, "--bootstrap-expect", strconv.Itoa(expect))
	if len(join) > 0 {
		a = append(a, "--join", strings.Join(join, ","))
	}
	// --leave-on-terminate: a SIGTERM is a decommission (the membership
	// nemesis exercises the leader's removal at the node's request; the
	// product default keeps a stopped node a voter).
	a = append(a, "--auth=off", "--log-format", "json", "--leave-on-terminate")
	if !c.cfg.ProfileTimeouts {
		a = append(a, "--raft-heartbeat-timeout", beat, "--raft-election-timeout", beat)
	}
	if c.cfg.GossipKey != "" {
		a = append(a, "--gossip-key", c.cfg.GossipKey)
	}
	if d := c.cfg.TLSDir; d != "" {
		a = append(a, "--tls-cert", filepath.Join(d, Name(i)+".pem"), "--tls-key", filepath.Join(d, Name(i)+"-key.pem"),
			"--tls-ca", filepath.Join(d, "ca.pem"))
	}
	a = append(a, c.cfg.ExtraArgs...)
	if c.cfg.NodeArgs != nil {
		a = append(a, c.cfg.NodeArgs(i)...)
	}
	return a
}

// spawn starts node i's process. Its lifetime is the Cluster's, not a
// caller's context: Close (or Kill, Stop) ends it.
func (c *Cluster) spawn(i int, join []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("nodes: cluster closed")
	}
	if p := c.procs[i]; p != nil && !p.exited() {
		return fmt.Errorf("nodes: %s is already running (pid %d)", Name(i), p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(c.LogPath(i), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	args := c.args(i, join)
	note(logf, Name(i), "start", map[string]any{"args": args})
	cmd := c.cfg.Net.Command(context.Background(), i, c.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = environ()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // a terminal's Ctrl-C reaches the harness, which stops the nodes in order
		Pdeathsig: syscall.SIGKILL, // a crashed harness leaves no node behind
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("nodes: starting %s: %w", Name(i), err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.procs[i] = p
	return nil
}

// environ is this process's environment without INTENTD_* variables, which
// intentd would read as flags.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "INTENTD_") {
			env = append(env, kv)
		}
	}
	return env
}

// note appends a harness event to a node's log as a JSON line like
// intentd's own (--log-format json).
func note(w io.Writer, node, event string, attrs map[string]any) {
	m := map[string]any{"time": time.Now().Format(time.RFC3339Nano), "level": "INFO",
		"msg": "jepsen: " + event, "node": node}
	for k, v := range attrs {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	_, _ = w.Write(append(b, '\n'))
}

func (c *Cluster) noteLog(i int, event string) {
	f, err := os.OpenFile(c.LogPath(i), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	note(f, Name(i), event, nil)
}

func (c *Cluster) check(i int) error {
	if i < 1 || i > c.n {
		return fmt.Errorf("nodes: node %d out of range 1..%d", i, c.n)
	}
	return nil
}

// running returns node i's live process, or an error.
func (c *Cluster) running(i int) (*proc, error) {
	if err := c.check(i); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("nodes: cluster closed")
	}
	p := c.procs[i]
	if p == nil || p.exited() {
		return nil, fmt.Errorf("nodes: %s is not running", Name(i))
	}
	return p, nil
}

// Running reports whether node i's process is alive (paused counts).
func (c *Cluster) Running(i int) bool {
	_, err := c.running(i)
	return err == nil
}

// Paused reports whether node i is stopped with SIGSTOP.
func (c *Cluster) Paused(i int) bool {
	if c.check(i) != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[i]
	return p != nil && p.paused && !p.exited()
}

// wait waits for p to exit, bounded by ctx.
func wait(ctx context.Context, p *proc) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Kill sends SIGKILL to node i and waits for it to exit.
func (c *Cluster) Kill(i int) error {
	p, err := c.running(i)
	if err != nil {
		return err
	}
	c.noteLog(i, "SIGKILL")
	if err := c.kill(p); err != nil {
		return fmt.Errorf("nodes: kill %s: %w", Name(i), err)
	}
	return nil
}

func (c *Cluster) kill(p *proc) error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	if err := wait(ctx, p); err != nil {
		return fmt.Errorf("no exit %v after SIGKILL: %w", killTimeout, err)
	}
	c.mu.Lock()
	p.paused = false
	c.mu.Unlock()
	return nil
}

// Restart starts node i again on the same data directory, joining through
// the other nodes' gossip addresses, and waits (bounded by ctx and
// StartTimeout) until it is ready. The node must not be running.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if err := c.check(i); err != nil {
		return err
	}
	var join []string
	for j := 1; j <= c.n; j++ {
		if j != i {
			join = append(join, c.gossipAddr(j))
		}
	}
	if err := c.spawn(i, join); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if err := c.WaitReady(ctx, i); err != nil {
		return fmt.Errorf("nodes: restart: %w", err)
	}
	return nil
}

// Pause stops node i with SIGSTOP.
func (c *Cluster) Pause(i int) error {
	p, err := c.running(i)
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("nodes: pause %s: %w", Name(i), err)
	}
	c.mu.Lock()
	p.paused = true
	c.mu.Unlock()
	c.noteLog(i, "SIGSTOP")
	return nil
}

// Resume continues node i with SIGCONT.
func (c *Cluster) Resume(i int) error {
	p, err := c.running(i)
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("nodes: resume %s: %w", Name(i), err)
	}
	c.mu.Lock()
	p.paused = false
	c.mu.Unlock()
	c.noteLog(i, "SIGCONT")
	return nil
}

// Stop sends SIGTERM to node i (a graceful shutdown: with the
// --leave-on-terminate the harness sets it also asks the leader to remove
// it from the voters) and waits for it to
// exit, bounded by ctx and StopTimeout; past the bound it keeps the
// evidence (SIGQUIT: the Go runtime prints every goroutine's stack into the
// node log), then kills the node and reports the timeout. A paused node is
// continued first.
func (c *Cluster) Stop(ctx context.Context, i int) error {
	p, err := c.running(i)
	if err != nil {
		return err
	}
	c.noteLog(i, "SIGTERM")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("nodes: stop %s: %w", Name(i), err)
	}
	if c.Paused(i) {
		if err := c.Resume(i); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, StopTimeout)
	defer cancel()
	if err := wait(ctx, p); err != nil {
		c.quit(i, p)
		kerr := c.kill(p)
		return errors.Join(fmt.Errorf("nodes: stop %s: no exit after SIGTERM (goroutine dump in its log), killed: %w", Name(i), err), kerr)
	}
	return nil
}

// quit sends SIGQUIT to a node that did not stop in time and waits up to
// quitTimeout for the Go runtime to dump its goroutines and exit.
func (c *Cluster) quit(i int, p *proc) {
	c.noteLog(i, "SIGQUIT (stop timed out: goroutine dump follows)")
	if err := p.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), quitTimeout)
	defer cancel()
	_ = wait(ctx, p)
}

// Recover brings every node back after a harness failure: a paused node is
// continued, one not running is started again on its data (and waited for,
// bounded by ctx), and every running node's clock offset is set to zero.
func (c *Cluster) Recover(ctx context.Context) error {
	var errs []error
	for i := 1; i <= c.n; i++ {
		if c.Paused(i) {
			if err := c.Resume(i); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := c.running(i); err != nil {
			c.noteLog(i, "recover: starting it again")
			if err := c.Restart(ctx, i); err != nil {
				errs = append(errs, fmt.Errorf("nodes: recover %s: %w", Name(i), err))
				continue
			}
		}
		if err := c.SetClockOffset(ctx, i, 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close continues paused nodes, kills every process and waits for them to
// exit. It is idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	var errs []error
	for i, p := range procs {
		if p == nil || p.exited() {
			continue
		}
		c.noteLog(i, "SIGKILL (close)")
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		if err := c.kill(p); err != nil {
			errs = append(errs, fmt.Errorf("nodes: close %s: %w", Name(i), err))
		}
	}
	c.client.CloseIdleConnections()
	if len(errs) == 0 {
		errs = append(errs, c.unmountDisks())
	}
	return errors.Join(errs...)
}

// Status is the part of a node's GET /v1/cluster the harness reads.
type Status struct {
	NodeID       string `json:"node_id"`
	State        string `json:"state"` // leader, follower, candidate, shutdown
	LeaderID     string `json:"leader_id"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Ready        bool   `json:"ready"`
	// Members are the nodes this node knows (configuration and gossip).
	Members []Member `json:"nodes"`
}

// Member is one node as another sees it.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	Suffrage string `json:"suffrage"`
	Gossip   string `json:"gossip"`
}

// Status asks node i for GET /v1/cluster (bounded by ctx and one second).
func (c *Cluster) Status(ctx context.Context, i int) (Status, error) {
	var st Status
	if err := c.check(i); err != nil {
		return st, err
	}
	code, body, err := c.get(ctx, i, "/v1/cluster")
	switch {
	case err != nil:
		return st, fmt.Errorf("nodes: %s: %w", Name(i), err)
	case code != http.StatusOK:
		return st, fmt.Errorf("nodes: %s: /v1/cluster status %d: %s", Name(i), code, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("nodes: %s: /v1/cluster: %w", Name(i), err)
	}
	return st, nil
}

// ErrUnknownPeer is RemovePeer's answer for a node that is not a server of
// the configuration (already removed).
var ErrUnknownPeer = errors.New("nodes: not a server of the configuration")

// RemovePeer asks node leader to remove server id from the Raft
// configuration: POST /v1/cluster/peers/ID/remove, what intentctl peer
// remove sends (bounded by ctx and ten seconds).
func (c *Cluster) RemovePeer(ctx context.Context, leader int, id string) error {
	if err := c.check(leader); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL(leader)+"/v1/cluster/peers/"+url.PathEscape(id)+"/remove",
		strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("nodes: remove %s through %s: %w", id, Name(leader), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s: %s", ErrUnknownPeer, id, strings.TrimSpace(string(body)))
	}
	return fmt.Errorf("nodes: remove %s through %s: status %d: %s", id, Name(leader), resp.StatusCode, strings.TrimSpace(string(body)))
}

// get fetches <node i's URL>/path with a short per-request bound.
func (c *Cluster) get(ctx context.Context, i int, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL(i)+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

// reachable lists the nodes that are running and not paused.
func (c *Cluster) reachable() []int {
	var ids []int
	for i := 1; i <= c.n; i++ {
		if c.Running(i) && !c.Paused(i) {
			ids = append(ids, i)
		}
	}
	return ids
}

// Leader asks every running, unpaused node for GET /v1/cluster and returns
// the node that all the nodes that answered name as leader, provided that
// node answered too and reports itself leader. It fails when none answers,
// one names no leader, they disagree, or the named leader is dead, paused
// or has stepped down. Callers poll it (WaitLeader).
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	ids := c.reachable()
	type answer struct {
		i   int
		st  Status
		err error
	}
	answers := make([]answer, len(ids))
	var wg sync.WaitGroup
	for k, i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := c.Status(ctx, i)
			answers[k] = answer{i: i, st: st, err: err}
		}()
	}
	wg.Wait()
	leader, seen := "", 0
	var views []string
	for _, a := range answers {
		if a.err != nil {
			views = append(views, a.err.Error())
			continue
		}
		seen++
		views = append(views, fmt.Sprintf("%s: %s, leader %q, term %d", Name(a.i), a.st.State, a.st.LeaderID, a.st.Term))
		if a.st.LeaderID == "" {
			leader = "-"
		} else if leader == "" {
			leader = a.st.LeaderID
		} else if leader != a.st.LeaderID {
			leader = "-"
		}
	}
	// The leader must itself answer and say it leads: right after a leader
	// dies or stops, its followers still name it for a while.
	selfLed := false
	for _, a := range answers {
		if a.err == nil && a.st.NodeID == leader && a.st.State == "leader" {
			selfLed = true
		}
	}
	if seen == 0 || leader == "-" || !selfLed || Index(leader) == 0 || Index(leader) > c.n {
		return 0, fmt.Errorf("nodes: no agreed leader (%s)", strings.Join(views, "; "))
	}
	return Index(leader), nil
}

// WaitLeader polls Leader until it answers, bounded by ctx.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	var last error
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		l, err := c.Leader(ctx)
		if err == nil {
			return l, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("nodes: waiting for a leader: %w (last: %w)", ctx.Err(), last)
		case <-t.C:
		}
	}
}

// WaitReady polls GET /readyz on the given nodes (none: every running,
// unpaused node) until each answers 200, bounded by ctx. It fails early
// when a node's process exits, with the tail of its log.
func (c *Cluster) WaitReady(ctx context.Context, ids ...int) error {
	if len(ids) == 0 {
		ids = c.reachable()
	}
	pending := make(map[int]string, len(ids))
	for _, i := range ids {
		if err := c.check(i); err != nil {
			return err
		}
		pending[i] = "not asked yet"
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for len(pending) > 0 {
		for i := range pending {
			if !c.Running(i) {
				return fmt.Errorf("%s is not running (%s); log %s ends:\n%s", Name(i), c.exitStatus(i), c.LogPath(i), c.tail(i))
			}
			code, body, err := c.get(ctx, i, "/readyz")
			switch {
			case err != nil:
				pending[i] = err.Error()
			case code != http.StatusOK:
				pending[i] = fmt.Sprintf("readyz %d: %s", code, strings.TrimSpace(string(body)))
			default:
				delete(pending, i)
			}
		}
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			var why []string
			for i := 1; i <= c.n; i++ {
				if p, ok := pending[i]; ok {
					why = append(why, fmt.Sprintf("%s: %s", Name(i), p))
				}
			}
			return fmt.Errorf("nodes not ready: %w (%s)", ctx.Err(), strings.Join(why, "; "))
		case <-t.C:
		}
	}
	return nil
}

func (c *Cluster) exitStatus(i int) string {
	c.mu.Lock()
	p := c.procs[i]
	c.mu.Unlock()
	if p == nil {
		return "never started"
	}
	if !p.exited() {
		return "running"
	}
	if p.err == nil {
		return "exited 0"
	}
	return p.err.Error()
}

// tail returns the last lines of node i's log.
func (c *Cluster) tail(i int) string {
	b, err := os.ReadFile(c.LogPath(i))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "\n")
}

// SetClockOffset skews node i's clock through its test hooks (the node must
// run with --test-hooks).
func (c *Cluster) SetClockOffset(ctx context.Context, i int, offset time.Duration) error {
	body := strings.NewReader(fmt.Sprintf(`{"offset_ms":%d}`, offset.Milliseconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.URL(i)+"/debug/clock-offset", body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("nodes: clock offset of %s: %w", Name(i), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("nodes: clock offset of %s: HTTP %d (is --test-hooks set?)", Name(i), resp.StatusCode)
	}
	c.noteLog(i, fmt.Sprintf("clock offset %v", offset))
	return nil
}

// Panics returns the lines of the node logs that contain "panic:",
// "fatal error:" or "DATA RACE", each prefixed with the node's name.
func (c *Cluster) Panics() ([]string, error) {
	var found []string
	for i := 1; i <= c.n; i++ {
		f, err := os.Open(c.LogPath(i))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return found, fmt.Errorf("nodes: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64*1024), panicScanLine)
		for sc.Scan() {
			l := sc.Text()
			if strings.Contains(l, "panic:") || strings.Contains(l, "fatal error:") || strings.Contains(l, "DATA RACE") {
				found = append(found, Name(i)+": "+l)
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return found, fmt.Errorf("nodes: reading %s: %w", c.LogPath(i), err)
		}
	}
	return found, nil
}
