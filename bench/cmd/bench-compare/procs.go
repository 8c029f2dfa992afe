package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// proc is one server process the benchmark started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// startProc starts bin in its own process group (so a signal to the
// benchmark's group does not race its own cleanup), killed if the
// benchmark dies, with output in logPath. Its pid is appended to pidFile
// so bench/scripts/bench-compare.sh can kill leftovers by id.
func startProc(name, bin, logPath, pidFile string, args ...string) (*proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("log for %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if f, err := os.OpenFile(pidFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintln(f, cmd.Process.Pid)
		f.Close()
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: lf}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.log.Close()
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// cluster is a running 3-node cluster of one system.
type cluster struct {
	system  string
	procs   []*proc
	dataDir string
	// leader is the leader's client address: an HTTP base URL for
	// intentd, host:port for etcd.
	leader   string
	leaderIx int
	// addrs are every node's client addresses, in node order, as leader
	// is written.
	addrs []string
	// etcdCli is a gRPC client connected to the etcd leader.
	etcdCli *clientv3.Client
	// pprofs are the intentd nodes' debug addresses (they serve pprof
	// when --profile is set), in node order.
	pprofs []string
}

func (c *cluster) pids() []int {
	out := make([]int, len(c.procs))
	for i, p := range c.procs {
		out[i] = p.cmd.Process.Pid
	}
	return out
}

// stop stops every process; the data directory is removed unless keep.
func (c *cluster) stop(keep bool) {
	if c.etcdCli != nil {
		_ = c.etcdCli.Close()
	}
	done := make(chan struct{}, len(c.procs))
	for _, p := range c.procs {
		go func(p *proc) { p.stop(10 * time.Second); done <- struct{}{} }(p)
	}
	for range c.procs {
		<-done
	}
	if !keep {
		_ = os.RemoveAll(c.dataDir)
	}
}

func (c *cluster) checkAlive() error {
	for _, p := range c.procs {
		if p.exited() {
			return fmt.Errorf("%s exited; see %s", p.name, p.log.Name())
		}
	}
	return nil
}

func portFree(port int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

func checkPorts(ports ...int) error {
	for _, p := range ports {
		if !portFree(p) {
			return fmt.Errorf("port %d on 127.0.0.1 is in use (choose another --port-base)", p)
		}
	}
	return nil
}

// startIntentd starts a fresh 3-node intentd cluster under dir and waits
// until every node is ready and the leader is known.
func startIntentd(ctx context.Context, cfg config, dir, pidFile string) (*cluster, error) {
	c := &cluster{system: "intentd", dataDir: dir}
	b := cfg.portBase
	var ports []int
	for i := 1; i <= 3; i++ {
		ports = append(ports, b+i, b+10+i, b+20+i, b+50+i)
	}
	if err := checkPorts(ports...); err != nil {
		return nil, err
	}
	for i := 1; i <= 3; i++ {
		args := []string{
			"--id", fmt.Sprintf("n%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("n%d", i)),
			"--http-addr", fmt.Sprintf("127.0.0.1:%d", b+i),
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", b+10+i),
			"--gossip-addr", fmt.Sprintf("127.0.0.1:%d", b+20+i),
			"--bootstrap-expect", "3", "--auth=off", "--rate-limit-client=0", "--rate-limit-key=0",
			"--log-level", "warn", "--leave-on-terminate=false",
		}
		if i > 1 {
			args = append(args, "--join", fmt.Sprintf("127.0.0.1:%d", b+21))
		}
		args = append(args, cfg.intentdArgs...)
		if cfg.profile != "" {
			args = append(args, "--pprof", fmt.Sprintf("127.0.0.1:%d", b+50+i))
		}
		p, err := startProc(fmt.Sprintf("intentd-n%d", i), cfg.intentdBin, filepath.Join(dir, fmt.Sprintf("n%d.log", i)), pidFile, args...)
		if err != nil {
			c.stop(true)
			return nil, err
		}
		c.procs = append(c.procs, p)
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := c.checkAlive(); err != nil {
			c.stop(true)
			return nil, err
		}
		if leader, ok := intentdReady(ctx, hc, b); ok {
			c.leader = leader
			port, _ := strconv.Atoi(leader[strings.LastIndexByte(leader, ':')+1:])
			c.leaderIx = port - b - 1
			for i := 1; i <= 3; i++ {
				c.addrs = append(c.addrs, fmt.Sprintf("http://127.0.0.1:%d", b+i))
				c.pprofs = append(c.pprofs, fmt.Sprintf("127.0.0.1:%d", b+50+i))
			}
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.stop(true)
			return nil, fmt.Errorf("intentd cluster not ready after 60s (logs in %s)", dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// intentdReady reports the leader's base URL once all three nodes are
// ready and agree on it.
func intentdReady(ctx context.Context, hc *http.Client, base int) (string, bool) {
	leader := ""
	for i := 1; i <= 3; i++ {
		addr := fmt.Sprintf("http://127.0.0.1:%d", base+i)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/readyz", nil)
		resp, err := hc.Do(req)
		if err != nil {
			return "", false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", false
		}
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, addr+"/v1/cluster", nil)
		resp, err = hc.Do(req)
		if err != nil {
			return "", false
		}
		var st struct {
			LeaderHTTP string `json:"leader_http"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || st.LeaderHTTP == "" || (leader != "" && leader != st.LeaderHTTP) {
			return "", false
		}
		leader = st.LeaderHTTP
	}
	return "http://" + leader, true
}

// startEtcd starts a fresh 3-member etcd cluster under dir with etcd's
// default Raft and durability settings and waits for a leader.
func startEtcd(ctx context.Context, cfg config, dir, pidFile string) (*cluster, error) {
	c := &cluster{system: "etcd", dataDir: dir}
	b := cfg.portBase
	client := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", b+30+i) }
	peer := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", b+40+i) }
	var ports []int
	for i := 1; i <= 3; i++ {
		ports = append(ports, b+30+i, b+40+i)
	}
	if err := checkPorts(ports...); err != nil {
		return nil, err
	}
	var initial []string
	for i := 1; i <= 3; i++ {
		initial = append(initial, fmt.Sprintf("e%d=%s", i, peer(i)))
	}
	token := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	for i := 1; i <= 3; i++ {
		args := []string{
			"--name", fmt.Sprintf("e%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("e%d", i)),
			"--listen-client-urls", "http://" + client(i), "--advertise-client-urls", "http://" + client(i),
			"--listen-peer-urls", peer(i), "--initial-advertise-peer-urls", peer(i),
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", token, "--log-level", "warn",
		}
		p, err := startProc(fmt.Sprintf("etcd-e%d", i), cfg.etcdBin, filepath.Join(dir, fmt.Sprintf("e%d.log", i)), pidFile, args...)
		if err != nil {
			c.stop(true)
			return nil, err
		}
		c.procs = append(c.procs, p)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := c.checkAlive(); err != nil {
			c.stop(true)
			return nil, err
		}
		if ix, ok := etcdLeader(ctx, []string{client(1), client(2), client(3)}); ok {
			c.leaderIx = ix
			c.leader = client(ix + 1)
			c.addrs = []string{client(1), client(2), client(3)}
			cli, err := newEtcdClient([]string{c.leader})
			if err != nil {
				c.stop(true)
				return nil, err
			}
			c.etcdCli = cli
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.stop(true)
			return nil, fmt.Errorf("etcd cluster has no leader after 60s (logs in %s)", dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// newEtcdClient is one gRPC client over endpoints: clientv3 balances its
// requests round-robin over them.
func newEtcdClient(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}

// etcdLeader returns the index of the member that reports itself leader,
// once all three answer and agree.
func etcdLeader(ctx context.Context, eps []string) (int, bool) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return 0, false
	}
	defer cli.Close()
	leaderIx, leaderID := -1, uint64(0)
	for i, ep := range eps {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err != nil || st.Leader == 0 || (leaderID != 0 && st.Leader != leaderID) {
			return 0, false
		}
		leaderID = st.Leader
		if st.Header.MemberId == st.Leader {
			leaderIx = i
		}
	}
	return leaderIx, leaderIx >= 0
}

// cpuTicks returns the summed utime+stime (clock ticks, 100 per second on
// Linux) of the processes.
func cpuTicks(pids []int) (int64, error) {
	var total int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("cpu of %d: %w", pid, err)
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			return 0, errors.New("cpu: bad /proc stat")
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 {
			return 0, errors.New("cpu: short /proc stat")
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += u + st
	}
	return total, nil
}

// loadAvg returns the 1-minute load average.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
