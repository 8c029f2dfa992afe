package netns

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

const testPrefix = "ijtest-" // shared by the suite's tests: each run removes any crashed one's leftovers

// requireAvailable is netnstest.Require for this package's own tests
// (which that package cannot serve without an import cycle): a skip under
// -short, and when the machine cannot run the suite except in CI.
func requireAvailable(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("network namespaces: integration tier")
	}
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the fault suite cannot run in CI: %v", err)
		}
		t.Skipf("skipping (set CI=true to make this a failure): %v", err)
	}
}

// testContext ends with the test, on Ctrl-C, or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, stop := signal.NotifyContext(t.Context(), os.Interrupt, syscall.SIGTERM)
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return ctx
}

func TestValidation(t *testing.T) {
	ctx := t.Context()
	for _, p := range []string{"", "Upper", "1abc", "way-too-long-prefix", "a b"} {
		if _, err := Create(ctx, p, 3); err == nil {
			t.Errorf("Create(%q) succeeded, want an error", p)
		}
	}
	if _, err := Create(ctx, "ok-", 0); err == nil {
		t.Error("Create with 0 nodes succeeded")
	}
	want := "*filter\n-F INTENTD-PART\n" +
		"-A INTENTD-PART -s 10.213.0.12/32 -j DROP\n-A INTENTD-PART -d 10.213.0.12/32 -j DROP\nCOMMIT\n"
	if got := rules(partChain, []int{2}, ""); got != want {
		t.Errorf("rules:\n%s\nwant:\n%s", got, want)
	}
}

// listen serves TCP on every node's address (port 9000) from inside its
// namespace, accepting and closing connections, until the test ends.
func listen(t *testing.T, n *Net) {
	t.Helper()
	for i := 1; i <= n.Nodes(); i++ {
		var ln net.Listener
		err := n.Do(i, func() error {
			var err error
			ln, err = net.Listen("tcp", n.NodeIP(i)+":9000")
			return err
		})
		if err != nil {
			t.Fatalf("listen in node %d: %v", i, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
}

// dial connects from node from (0: the root namespace) to node to.
func dial(n *Net, from, to int, timeout time.Duration) error {
	d := func() error {
		c, err := net.DialTimeout("tcp", n.NodeIP(to)+":9000", timeout)
		if err != nil {
			return err
		}
		return c.Close()
	}
	if from == 0 {
		return d()
	}
	return n.Do(from, d)
}

// connectivity checks which node pairs (0 is the host) can talk: reach
// reports whether a pair is expected to connect.
func connectivity(t *testing.T, n *Net, reach func(a, b int) bool) {
	t.Helper()
	for from := 0; from <= n.Nodes(); from++ {
		for to := 1; to <= n.Nodes(); to++ {
			if from == to {
				continue
			}
			want := reach(from, to)
			timeout := 300 * time.Millisecond
			if want {
				timeout = 5 * time.Second
			}
			err := dial(n, from, to, timeout)
			if want && err != nil {
				t.Errorf("%d -> %d: %v, want a connection", from, to, err)
			}
			if !want && err == nil {
				t.Errorf("%d -> %d connected, want it blocked", from, to)
			}
		}
	}
}

func TestNetwork(t *testing.T) {
	requireAvailable(t)
	ctx := testContext(t, 50*time.Second)

	// A leftover of a crashed run with the same prefix is removed.
	if out, err := exec.CommandContext(ctx, "ip", "netns", "add", testPrefix+"n9").CombinedOutput(); err != nil {
		t.Fatalf("making a leftover namespace: %v: %s", err, out)
	}
	n, err := Create(ctx, testPrefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	if contains(leftovers(t), testPrefix+"n9") {
		t.Error("the leftover namespace n9 survived Create")
	}
	if n.HostIP() != "10.213.0.1" || n.NodeIP(2) != "10.213.0.12" || n.Namespace(3) != testPrefix+"n3" {
		t.Errorf("addresses: host %s node2 %s ns3 %s", n.HostIP(), n.NodeIP(2), n.Namespace(3))
	}
	out, err := n.Command(ctx, 2, "ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "10.213.0.12/24") {
		t.Errorf("Command in node 2: %v: %s", err, out)
	}
	listen(t, n)

	all := func(a, b int) bool { return true }
	t.Run("connected", func(t *testing.T) { connectivity(t, n, all) })

	t.Run("partition", func(t *testing.T) {
		if err := n.Partition([][]int{{2, 3}}); err != nil { // node 1 is alone
			t.Fatal(err)
		}
		connectivity(t, n, func(a, b int) bool { return a == 0 || (a != 1 && b != 1) })
		// A new partition replaces the previous one.
		if err := n.Partition([][]int{{1, 2}, {3}}); err != nil {
			t.Fatal(err)
		}
		connectivity(t, n, func(a, b int) bool { return a == 0 || (a != 3 && b != 3) })
	})

	t.Run("heal", func(t *testing.T) {
		if err := n.Heal(); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			if r, err := n.Rules(ctx, i); err != nil || len(r) != 0 {
				t.Errorf("rules of node %d after Heal: %v %v", i, r, err)
			}
		}
		connectivity(t, n, all)
	})

	t.Run("block", func(t *testing.T) {
		if err := n.Block([][2]int{{1, 2}}); err != nil {
			t.Fatal(err)
		}
		connectivity(t, n, func(a, b int) bool { return !(a == 1 && b == 2 || a == 2 && b == 1) })
		if err := n.Heal(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("loss", func(t *testing.T) {
		// Loss 1 drops every packet, so the test is deterministic.
		if err := n.Loss(3, 1); err != nil {
			t.Fatal(err)
		}
		r, err := n.Rules(ctx, 3)
		if err != nil || len(r) != 4 || !strings.Contains(r[0], "statistic") {
			t.Errorf("loss rules of node 3: %q %v", r, err)
		}
		connectivity(t, n, func(a, b int) bool { return a == 0 || (a != 3 && b != 3) })
		if err := n.Loss(3, 0); err != nil {
			t.Fatal(err)
		}
		connectivity(t, n, all)
		if err := n.Loss(1, 1.5); err == nil {
			t.Error("loss 1.5 accepted")
		}
	})

	t.Run("close", func(t *testing.T) {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if got := leftoversAfterClose(t); len(got) != 0 {
			t.Errorf("after Close: %v", got)
		}
		if err := n.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := n.Heal(); err == nil {
			t.Error("Heal after Close succeeded")
		}
	})
}

func TestCreateCancelled(t *testing.T) {
	requireAvailable(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Create(ctx, testPrefix, 2); err == nil || !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("Create with a cancelled context: %v", err)
	}
	if got := leftoversAfterClose(t); len(got) != 0 {
		t.Errorf("after a cancelled Create: %v", got)
	}
}

// leftoversAfterClose is leftovers taken under the machine-wide lock, for
// a test that holds no Net: another package's test that holds the lock
// (and has its own namespaces up) is then not mistaken for leftovers.
func leftoversAfterClose(t *testing.T) []string {
	t.Helper()
	lock, err := acquireLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	return leftovers(t)
}

// leftovers lists namespaces and root-namespace links named with the test
// prefix.
func leftovers(t *testing.T) []string {
	t.Helper()
	var found []string
	for _, args := range [][]string{{"netns", "list"}, {"-o", "link"}} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, testPrefix) {
				found = append(found, strings.TrimSuffix(strings.SplitN(f, "@", 2)[0], ":"))
			}
		}
	}
	return found
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestCrashedNetworkOfAnotherPrefixIsRemoved leaves a whole network of
// another prefix behind, as a killed run would (its lock released, nothing
// removed), and sees the next Create remove it instead of refusing the
// subnet.
func TestCrashedNetworkOfAnotherPrefixIsRemoved(t *testing.T) {
	requireAvailable(t)
	ctx := testContext(t, 50*time.Second)
	const crashed = testPrefix + "x" // "ijtest-x": another prefix the test's leftovers() still sees
	dead, err := Create(ctx, crashed, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dead.Close() })
	dead.mu.Lock()
	_ = dead.lock.Close() // the run dies: the kernel releases its flock, its network stays
	dead.lock = nil
	dead.mu.Unlock()
	if !contains(leftovers(t), crashed+"h") {
		t.Fatalf("the crashed network's host link is missing: %v", leftovers(t))
	}

	n, err := Create(ctx, testPrefix, 2)
	if err != nil {
		t.Fatalf("Create over a crashed run's network: %v", err)
	}
	for _, name := range []string{crashed + "h", crashed + "br", crashed + "n1", crashed + "n2"} {
		if contains(leftovers(t), name) {
			t.Errorf("%s of the crashed run is still there", name)
		}
	}
	listen(t, n)
	if err := dial(n, 0, 1, 5*time.Second); err != nil {
		t.Errorf("the host cannot reach node 1 of the new network: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
}
