// Package netns builds the fault suite's private network: one Linux network
// namespace per node, all joined by a bridge that lives in a namespace of
// its own, plus one veth from the root namespace into the bridge so the
// controller (this process) reaches every node. Faults are iptables rules
// inside the node namespaces, in chains the package owns, so the controller
// is never cut off and healing is a flush.
//
// Addresses come from 10.213.0.0/24 and exist only inside the namespaces
// the package creates (and on the root namespace's end of the host veth):
// the host side is 10.213.0.1, node i is 10.213.0.(10+i). Because the
// subnet is fixed, only one Net can exist on a machine at a time: Create
// takes a machine-wide lock (a flock on /run/intentd-jepsen-netns.lock)
// that Close releases, so concurrent test packages wait for each other.
//
// Everything needs root, iproute2 (`ip`) and iptables; Available reports
// what is missing.
package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Subnet is the only address range the package uses.
const Subnet = "10.213.0.0/24"

const (
	hostIP    = "10.213.0.1"
	maxNodes  = 200
	lockPath  = "/run/intentd-jepsen-netns.lock"
	cmdBound  = 20 * time.Second // bound on one ip/iptables invocation
	gcBound   = 30 * time.Second // bound on removing everything in Close
	partChain = "INTENTD-PART"   // partition rules
	lossChain = "INTENTD-LOSS"   // packet loss rules
)

// Chains are the iptables chains (filter table, jumped to from INPUT and
// OUTPUT) that hold every fault rule inside a node namespace.
var Chains = []string{partChain, lossChain}

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,10}$`)

// Net is a running private network. Its methods are safe for concurrent
// use.
type Net struct {
	prefix string
	nodes  int

	mu     sync.Mutex // serializes fault changes and Close
	lock   *os.File   // the machine-wide flock, nil once released
	closed bool
}

// Available reports, with a clear error, why the suite cannot run here:
// not root, `ip`, `iptables` or `iptables-restore` missing, or network
// namespaces cannot be created. It creates and removes one probe
// namespace.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("netns: the fault suite needs root (network namespaces, veth, iptables); running as uid %d", os.Geteuid())
	}
	for _, tool := range []string{"ip", "iptables", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("netns: %s not found (install iproute2 and iptables): %w", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), gcBound)
	defer cancel()
	probe := fmt.Sprintf("intentd-probe-%d", os.Getpid())
	if _, err := run(ctx, nil, "ip", "netns", "add", probe); err != nil {
		return fmt.Errorf("netns: cannot create a network namespace: %w", err)
	}
	defer func() { _, _ = run(ctx, nil, "ip", "netns", "delete", probe) }()
	if _, err := run(ctx, nil, "ip", "netns", "exec", probe, "iptables", "-w", "5", "-S"); err != nil {
		return fmt.Errorf("netns: iptables does not work inside a network namespace: %w", err)
	}
	return nil
}

// Create builds the network for nodes nodes (1-based) under the name
// prefix (1-11 characters: a lower-case letter, then lower-case letters,
// digits or dashes): a namespace "<prefix>br" holding bridge br0; a
// namespace "<prefix>n<i>" per node with a veth into br0, address
// 10.213.0.(10+i)/24 and lo up; and a veth "<prefix>h" from the root
// namespace into br0 with 10.213.0.1/24. It first waits (bounded by ctx)
// for the machine-wide lock and removes leftovers of earlier runs: those
// with the same prefix, and any harness network (of any prefix) a crashed
// run left holding the subnet. On failure everything it made is removed.
func Create(ctx context.Context, prefix string, nodes int) (*Net, error) {
	if !prefixRE.MatchString(prefix) {
		return nil, fmt.Errorf("netns: prefix %q must be 1-11 characters: a lower-case letter, then lower-case letters, digits or dashes", prefix)
	}
	if nodes < 1 || nodes > maxNodes {
		return nil, fmt.Errorf("netns: %d nodes: must be 1..%d", nodes, maxNodes)
	}
	lock, err := acquireLock(ctx)
	if err != nil {
		return nil, err
	}
	n := &Net{prefix: prefix, nodes: nodes, lock: lock}
	if err := n.removeAll(); err != nil {
		_ = n.Close()
		return nil, fmt.Errorf("netns: removing leftovers of an earlier run: %w", err)
	}
	if err := removeCrashedNets(ctx); err != nil {
		_ = n.Close()
		return nil, err
	}
	if err := checkSubnetFree(ctx); err != nil {
		_ = n.Close()
		return nil, err
	}
	if err := n.build(ctx); err != nil {
		if cerr := n.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		return nil, err
	}
	return n, nil
}

func (n *Net) build(ctx context.Context) error {
	br := n.bridgeNS()
	steps := [][]string{
		{"ip", "netns", "add", br},
		{"ip", "-n", br, "link", "set", "lo", "up"},
		{"ip", "-n", br, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", br, "link", "set", "br0", "up"},
	}
	for i := 1; i <= n.nodes; i++ {
		ns, port := n.Namespace(i), fmt.Sprintf("v%d", i)
		steps = append(steps,
			[]string{"ip", "netns", "add", ns},
			[]string{"ip", "-n", ns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", br, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"ip", "-n", br, "link", "set", port, "master", "br0", "up"},
			[]string{"ip", "-n", ns, "addr", "add", n.NodeIP(i) + "/24", "dev", "eth0"},
			[]string{"ip", "-n", ns, "link", "set", "eth0", "up"},
		)
	}
	host := n.hostLink()
	steps = append(steps,
		[]string{"ip", "link", "add", host, "type", "veth", "peer", "name", "vh", "netns", br},
		[]string{"ip", "-n", br, "link", "set", "vh", "master", "br0", "up"},
		[]string{"ip", "addr", "add", hostIP + "/24", "dev", host},
		[]string{"ip", "link", "set", host, "up"},
	)
	for _, s := range steps {
		if _, err := run(ctx, nil, s[0], s[1:]...); err != nil {
			return fmt.Errorf("netns: create: %w", err)
		}
	}
	for i := 1; i <= n.nodes; i++ {
		if err := n.restore(ctx, i, chainSetup()); err != nil {
			return fmt.Errorf("netns: create: iptables chains in %s: %w", n.Namespace(i), err)
		}
	}
	return nil
}

// chainSetup is the iptables-restore input that creates the fault chains
// and jumps to them from INPUT and OUTPUT.
func chainSetup() string {
	var b strings.Builder
	b.WriteString("*filter\n")
	for _, c := range Chains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for _, c := range Chains {
		fmt.Fprintf(&b, "-A INPUT -j %s\n-A OUTPUT -j %s\n", c, c)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Nodes is the number of nodes.
func (n *Net) Nodes() int { return n.nodes }

// NodeIP is node i's address, 10.213.0.(10+i).
func (n *Net) NodeIP(i int) string { return fmt.Sprintf("10.213.0.%d", 10+i) }

// HostIP is the root namespace's address on the bridge, 10.213.0.1.
func (n *Net) HostIP() string { return hostIP }

// Namespace is the name of node i's network namespace, "<prefix>n<i>".
func (n *Net) Namespace(i int) string { return fmt.Sprintf("%sn%d", n.prefix, i) }

// Prefix is the name prefix of everything the Net made.
func (n *Net) Prefix() string { return n.prefix }

func (n *Net) bridgeNS() string { return n.prefix + "br" }
func (n *Net) hostLink() string { return n.prefix + "h" }

// Command returns a command that runs name with args inside node i's
// namespace (`ip netns exec`, which execs name directly, so the process's
// PID is name's own). ctx kills it as exec.CommandContext does.
func (n *Net) Command(ctx context.Context, i int, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Namespace(i), name}, args...)...)
}

// Do runs fn on a locked OS thread that has entered node i's network
// namespace: sockets fn opens (listeners, dials) belong to that namespace
// and stay there after Do returns. fn must not start goroutines that open
// sockets themselves.
func (n *Net) Do(i int, fn func() error) error {
	if err := n.checkNode(i); err != nil {
		return err
	}
	target, err := os.Open("/run/netns/" + n.Namespace(i))
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", syscall.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: %w", err)
	}
	defer self.Close()
	if err := setns(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("netns: entering %s: %w", n.Namespace(i), err)
	}
	ferr := fn()
	if err := setns(self); err != nil {
		// The thread is stuck in the node namespace: leave it locked so
		// the runtime discards it when this goroutine ends.
		return errors.Join(ferr, fmt.Errorf("netns: leaving %s: %w", n.Namespace(i), err))
	}
	runtime.UnlockOSThread()
	return ferr
}

func setns(f *os.File) error {
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

func (n *Net) checkNode(i int) error {
	if i < 1 || i > n.nodes {
		return fmt.Errorf("netns: node %d out of range 1..%d", i, n.nodes)
	}
	return nil
}

// Partition drops all traffic between nodes in different groups: iptables
// rules in INPUT and OUTPUT (through the INTENTD-PART chain) inside each
// node namespace that match the other side's node addresses. The host
// address is never dropped, so the controller reaches every node. Nodes
// not listed in any group form a group of their own each. It replaces any
// previous partition (or Block); loss rules stay.
func (n *Net) Partition(groups [][]int) error {
	group := make(map[int]int, n.nodes)
	for g, members := range groups {
		for _, i := range members {
			if err := n.checkNode(i); err != nil {
				return err
			}
			if prev, ok := group[i]; ok && prev != g {
				return fmt.Errorf("netns: node %d is in two groups", i)
			}
			group[i] = g
		}
	}
	next := len(groups)
	for i := 1; i <= n.nodes; i++ {
		if _, ok := group[i]; !ok {
			group[i] = next
			next++
		}
	}
	var pairs [][2]int
	for i := 1; i <= n.nodes; i++ {
		for j := i + 1; j <= n.nodes; j++ {
			if group[i] != group[j] {
				pairs = append(pairs, [2]int{i, j})
			}
		}
	}
	return n.Block(pairs)
}

// Block drops all traffic, both ways, between the two nodes of every pair
// and lets everything else through; it expresses partitions that are not
// a division into groups (Jepsen's majorities ring and bridge). It
// replaces any previous partition; loss rules stay.
func (n *Net) Block(pairs [][2]int) error {
	peers := make(map[int][]int)
	for _, p := range pairs {
		for _, i := range p {
			if err := n.checkNode(i); err != nil {
				return err
			}
		}
		if p[0] == p[1] {
			return fmt.Errorf("netns: cannot block node %d from itself", p[0])
		}
		peers[p[0]] = append(peers[p[0]], p[1])
		peers[p[1]] = append(peers[p[1]], p[0])
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("netns: closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), gcBound)
	defer cancel()
	for i := 1; i <= n.nodes; i++ {
		if err := n.restore(ctx, i, rules(partChain, peers[i], "")); err != nil {
			return fmt.Errorf("netns: partition %s: %w", n.Namespace(i), err)
		}
	}
	return nil
}

// Deafen drops every packet node i receives from the other nodes while
// letting its own packets out: the node keeps sending (a leader's entries
// reach the followers) but hears no answer (it never learns they were
// stored). It replaces any previous partition; loss rules stay.
func (n *Net) Deafen(i int) error {
	if err := n.checkNode(i); err != nil {
		return err
	}
	var peers []int
	for j := 1; j <= n.nodes; j++ {
		if j != i {
			peers = append(peers, j)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("netns: closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), gcBound)
	defer cancel()
	for j := 1; j <= n.nodes; j++ {
		input := rules(partChain, nil, "")
		if j == i {
			input = inboundRules(partChain, peers)
		}
		if err := n.restore(ctx, j, input); err != nil {
			return fmt.Errorf("netns: deafen %s: %w", n.Namespace(i), err)
		}
	}
	return nil
}

// Loss drops fraction p (0..1) of node i's packets to and from the other
// nodes (never the host), chosen at random by iptables' statistic match.
// It replaces node i's previous loss; p = 0 removes it.
func (n *Net) Loss(i int, p float64) error {
	if err := n.checkNode(i); err != nil {
		return err
	}
	if p < 0 || p > 1 || p != p {
		return fmt.Errorf("netns: loss %v out of range 0..1", p)
	}
	var peers []int
	if p > 0 {
		for j := 1; j <= n.nodes; j++ {
			if j != i {
				peers = append(peers, j)
			}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("netns: closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), gcBound)
	defer cancel()
	match := "-m statistic --mode random --probability " + strconv.FormatFloat(p, 'f', 6, 64) + " "
	if err := n.restore(ctx, i, rules(lossChain, peers, match)); err != nil {
		return fmt.Errorf("netns: loss on %s: %w", n.Namespace(i), err)
	}
	return nil
}

// Heal removes every fault rule from every node (flushes the chains).
func (n *Net) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("netns: closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), gcBound)
	defer cancel()
	var b strings.Builder
	b.WriteString("*filter\n")
	for _, c := range Chains {
		fmt.Fprintf(&b, "-F %s\n", c)
	}
	b.WriteString("COMMIT\n")
	var errs []error
	for i := 1; i <= n.nodes; i++ {
		if err := n.restore(ctx, i, b.String()); err != nil {
			errs = append(errs, fmt.Errorf("netns: heal %s: %w", n.Namespace(i), err))
		}
	}
	return errors.Join(errs...)
}

// Rules lists node i's fault rules (iptables -S of the fault chains), for
// logs and tests.
func (n *Net) Rules(ctx context.Context, i int) ([]string, error) {
	if err := n.checkNode(i); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range Chains {
		b, err := run(ctx, nil, "ip", "netns", "exec", n.Namespace(i), "iptables", "-w", "5", "-S", c)
		if err != nil {
			return nil, fmt.Errorf("netns: rules of %s: %w", n.Namespace(i), err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(l, "-A ") {
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// rules is the iptables-restore input that replaces chain's rules with
// drops (filtered by match) of traffic from and to each peer node.
func rules(chain string, peers []int, match string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*filter\n-F %s\n", chain)
	for _, j := range peers {
		ip := fmt.Sprintf("10.213.0.%d/32", 10+j)
		fmt.Fprintf(&b, "-A %s -s %s %s-j DROP\n", chain, ip, match)
		fmt.Fprintf(&b, "-A %s -d %s %s-j DROP\n", chain, ip, match)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// inboundRules drops packets from peers only: the node's own packets to
// them still leave.
func inboundRules(chain string, peers []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*filter\n-F %s\n", chain)
	for _, j := range peers {
		fmt.Fprintf(&b, "-A %s -s 10.213.0.%d/32 -j DROP\n", chain, 10+j)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// restore feeds input to iptables-restore --noflush inside node i's
// namespace: one atomic change per node.
func (n *Net) restore(ctx context.Context, i int, input string) error {
	_, err := run(ctx, strings.NewReader(input), "ip", "netns", "exec", n.Namespace(i), "iptables-restore", "-w", "5", "--noflush")
	return err
}

// Close removes every namespace, veth and rule the Net made, killing any
// process still inside its namespaces, and releases the machine-wide lock.
// It is idempotent and safe after a partial Create.
func (n *Net) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	err := n.removeAll()
	if n.lock != nil {
		_ = n.lock.Close() // releases the flock
		n.lock = nil
	}
	return err
}

// removeAll deletes, by name, everything a Net with this prefix makes:
// namespaces "<prefix>br" and "<prefix>n<digits>" (after killing the
// processes inside) and the root namespace's link "<prefix>h", then waits
// (bounded) until the kernel has let them go.
func (n *Net) removeAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), gcBound)
	defer cancel()
	var errs []error
	names, err := n.leftoverNamespaces(ctx)
	if err != nil {
		return err
	}
	for _, ns := range names {
		if err := killInside(ctx, ns); err != nil {
			errs = append(errs, err)
		}
		if _, err := run(ctx, nil, "ip", "netns", "delete", ns); err != nil && !notFound(err) {
			errs = append(errs, err)
		}
	}
	if linkExists(ctx, n.hostLink()) {
		if _, err := run(ctx, nil, "ip", "link", "delete", n.hostLink()); err != nil && !notFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Namespaces die asynchronously in the kernel; the host veth dies with
	// its peer. Wait until both are gone so the next Create starts clean.
	return poll(ctx, 50*time.Millisecond, func() (bool, error) {
		left, err := n.leftoverNamespaces(ctx)
		if err != nil {
			return false, err
		}
		return len(left) == 0 && !linkExists(ctx, n.hostLink()), nil
	}, func() error {
		return fmt.Errorf("netns: %s* namespaces or link %s still present after %v", n.prefix, n.hostLink(), gcBound)
	})
}

// leftoverNamespaces lists the namespaces named like this Net's.
func (n *Net) leftoverNamespaces(ctx context.Context) ([]string, error) {
	out, err := run(ctx, nil, "ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(n.prefix) + `(br|n[0-9]+)$`)
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && re.MatchString(f[0]) {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// killInside SIGKILLs every process in namespace ns: only the harness
// starts processes there (ours, or those of a crashed earlier run).
func killInside(ctx context.Context, ns string) error {
	out, err := run(ctx, nil, "ip", "netns", "pids", ns)
	if err != nil {
		if notFound(err) {
			return nil
		}
		return err
	}
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 1 || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("netns: killing pid %d in %s: %w", pid, ns, err)
		}
	}
	return nil
}

func linkExists(ctx context.Context, name string) bool {
	_, err := run(ctx, nil, "ip", "link", "show", "dev", name)
	return err == nil
}

// hostLinkRE matches the root namespace's end of a harness network's host
// veth ("<prefix>h") and captures the prefix.
var hostLinkRE = regexp.MustCompile(`^([a-z][a-z0-9-]{0,10})h$`)

// removeCrashedNets removes the harness networks, of any prefix, that a
// crashed or killed run left behind: a root-namespace link named like a
// host veth that holds the harness's host address. The caller holds the
// machine-wide lock, so no live run owns such a network: every run that
// builds one holds the lock until it has removed it (or died, which
// releases the flock).
func removeCrashedNets(ctx context.Context) error {
	out, err := run(ctx, nil, "ip", "-o", "-4", "addr", "show", "to", Subnet)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[3], hostIP+"/") {
			continue
		}
		m := hostLinkRE.FindStringSubmatch(strings.TrimSuffix(strings.SplitN(f[1], "@", 2)[0], ":"))
		if m == nil {
			continue
		}
		if err := (&Net{prefix: m[1]}).removeAll(); err != nil {
			return fmt.Errorf("netns: removing the network a crashed run left with prefix %q: %w", m[1], err)
		}
	}
	return nil
}

// checkSubnetFree fails when the root namespace already has an address in
// the subnet: another harness network (a leftover with another prefix)
// would steal the routes to the nodes.
func checkSubnetFree(ctx context.Context) error {
	out, err := run(ctx, nil, "ip", "-o", "-4", "addr", "show", "to", Subnet)
	if err != nil {
		return fmt.Errorf("netns: %w", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		link := strings.TrimSuffix(strings.Fields(s)[1], ":")
		return fmt.Errorf("netns: %s is already in use in the root namespace (link %s, probably left by a crashed run with another prefix; remove it with `ip link delete %s`)", Subnet, link, link)
	}
	return nil
}

// acquireLock takes the machine-wide flock, polling until ctx ends.
func acquireLock(ctx context.Context) (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("netns: lock: %w", err)
	}
	try := func() (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	}
	err = poll(ctx, 100*time.Millisecond, try, func() error {
		return fmt.Errorf("netns: another harness network holds %s (only one can use %s at a time): %w", lockPath, Subnet, ctx.Err())
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// poll calls cond every interval until it reports true or an error, or ctx
// ends (then the error from timeout).
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error), timeout func() error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return timeout()
		case <-t.C:
		}
	}
}

// cmdError is a failed command with its output.
type cmdError struct {
	args   []string
	output string
	err    error
}

func (e *cmdError) Error() string {
	return fmt.Sprintf("%s: %v: %s", strings.Join(e.args, " "), e.err, strings.TrimSpace(e.output))
}

func (e *cmdError) Unwrap() error { return e.err }

func notFound(err error) bool {
	var ce *cmdError
	if !errors.As(err, &ce) {
		return false
	}
	o := ce.output
	return strings.Contains(o, "No such file") || strings.Contains(o, "Cannot find device") ||
		strings.Contains(o, "No such device") ||
		strings.Contains(o, "does not exist") || strings.Contains(o, "Invalid argument")
}

// run runs one command, bounded by ctx and cmdBound, and returns its
// standard output; a failure carries the combined output.
func run(ctx context.Context, stdin *strings.Reader, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if err := cmd.Run(); err != nil {
		return nil, &cmdError{args: append([]string{name}, args...), output: stderr.String() + stdout.String(), err: err}
	}
	return stdout.Bytes(), nil
}
