package node

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// startAddrs are the addresses a node under test binds, by name.
type startAddrs struct{ http, raft, gossip, pprof string }

// startTestConfig is a single-node configuration on fixed loopback ports
// (so a test can check they are released) with pprof on.
func startTestConfig(t *testing.T) (Config, startAddrs) {
	t.Helper()
	a := startAddrs{http: nodetest.FreePort(t), raft: nodetest.FreePort(t), gossip: nodetest.FreePort(t), pprof: nodetest.FreePort(t)}
	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir = "n1", filepath.Join(t.TempDir(), "n1")
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr, cfg.PprofAddr = a.http, a.raft, a.gossip, a.pprof
	cfg.BootstrapExpect = 1
	cfg.Auth = AuthOff
	cfg.LocalDuplicates = true // the ledger's note loop is started too
	cfg.Logger = quietLogger()
	cfg.Timings = cluster.FastTimings()
	return cfg, a
}

// taken lists the node's addresses that cannot be bound now (the gossip
// port on TCP and on UDP, as memberlist binds both).
func (a startAddrs) taken() []string {
	var out []string
	for name, addr := range map[string]string{"http": a.http, "raft": a.raft, "gossip/tcp": a.gossip, "pprof": a.pprof} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			out = append(out, name)
			continue
		}
		_ = ln.Close()
	}
	pc, err := net.ListenPacket("udp", a.gossip)
	if err != nil {
		return append(out, "gossip/udp")
	}
	_ = pc.Close()
	return out
}

// openFiles counts the process's open file descriptors (listeners,
// connections, the log store's files); -1 where /proc is not there.
func openFiles() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(fds)
}

// released waits until every address is free again and the process has no
// more open files and goroutines than before (baseline), failing t if
// that does not happen.
func released(t *testing.T, a startAddrs, files, goroutines int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		held := a.taken()
		f, g := openFiles(), runtime.NumGoroutine()
		if len(held) == 0 && f <= files && g <= goroutines {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still held after the failed start: addresses %v, %d open files (%d before), %d goroutines (%d before)",
				held, f, files, g, goroutines)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFailedStartReleasesEverything makes Start fail at each of its steps,
// with a bad input or a taken address or by ending its ctx after the step,
// and checks that it returns the step's error and leaves nothing behind:
// its addresses can be bound again, and the open files and goroutines are
// back to what they were. The last case is the positive control: a node
// that started holds every address, until Shutdown.
func TestFailedStartReleasesEverything(t *testing.T) {
	occupy := func(addr func(startAddrs) string) func(*testing.T, *Config, startAddrs) func() {
		return func(t *testing.T, _ *Config, a startAddrs) func() {
			ln, err := net.Listen("tcp", addr(a))
			if err != nil {
				t.Fatal(err)
			}
			return func() { _ = ln.Close() }
		}
	}
	for _, tc := range []struct {
		name string
		// setup breaks the configuration or the machine; what it returns
		// undoes the machine's part.
		setup func(*testing.T, *Config, startAddrs) func()
		// cancelAfter ends Start's ctx after that step.
		cancelAfter string
		// want is in the error; "" for the control, which starts.
		want string
	}{
		{name: "invalid configuration", want: "--log-store must be",
			setup: func(_ *testing.T, c *Config, _ startAddrs) func() { c.LogStore = "tape"; return nil }},
		{name: "a TLS file that is not there", want: "no such file",
			setup: func(t *testing.T, c *Config, _ startAddrs) func() {
				missing := filepath.Join(t.TempDir(), "missing.pem")
				c.Security.TLSCert, c.Security.TLSKey, c.Security.TLSCA = missing, missing, missing
				c.Security.GossipKey = testGossipKey
				return nil
			}},
		{name: "an API keys file that is not there", want: "API keys",
			setup: func(t *testing.T, c *Config, _ startAddrs) func() {
				c.Auth, c.APIKeysFile = AuthRequired, filepath.Join(t.TempDir(), "keys.json")
				c.Security.GossipKey = testGossipKey
				return nil
			}},
		{name: "HTTP address taken", want: "--http-addr", setup: occupy(func(a startAddrs) string { return a.http })},
		{name: "data dir cannot be made", want: "data dir",
			setup: func(t *testing.T, c *Config, _ startAddrs) func() {
				file := filepath.Join(t.TempDir(), "a-file")
				if err := os.WriteFile(file, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				c.DataDir = filepath.Join(file, "n1")
				return nil
			}},
		{name: "Raft address taken", want: "address already in use", setup: occupy(func(a startAddrs) string { return a.raft })},
		{name: "gossip address taken", want: "address already in use", setup: occupy(func(a startAddrs) string { return a.gossip })},
		{name: "pprof address taken", want: "--pprof", setup: occupy(func(a startAddrs) string { return a.pprof })},
		{name: "ctx ended after loading", cancelAfter: "loading"},
		{name: "ctx ended after listening", cancelAfter: "listening"},
		{name: "ctx ended after the cluster started", cancelAfter: "cluster"},
		{name: "ctx ended after the ledger started", cancelAfter: "ledger"},
		{name: "ctx ended after pprof started", cancelAfter: "pprof"},
		// The OTLP exporter's goroutines stop too, although the SDK skips
		// stopping them when its Shutdown is handed the ended ctx.
		{name: "ctx ended after the cluster started, with traces exported", cancelAfter: "cluster",
			setup: func(t *testing.T, c *Config, _ startAddrs) func() {
				c.OTLPEndpoint = "http://" + nodetest.FreePort(t)
				return nil
			}},
		{name: "control: a node that starts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, addrs := startTestConfig(t)
			cfg.ShutdownTimeout = 0 // WithDefaults fills it in
			files, goroutines := openFiles(), runtime.NumGoroutine()
			var unblock func()
			if tc.setup != nil {
				unblock = tc.setup(t, &cfg, addrs)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := New(cfg)
			stepped := map[string]bool{}
			n.afterStep = func(step string) {
				stepped[step] = true
				if step == tc.cancelAfter {
					cancel()
				}
			}
			err := n.Start(ctx)
			if unblock != nil {
				unblock()
			}
			control := tc.want == "" && tc.cancelAfter == ""
			switch {
			case control:
				if err != nil {
					t.Fatalf("start: %v", err)
				}
				if n.cfg.ShutdownTimeout != DefaultConfig().ShutdownTimeout {
					t.Errorf("started with ShutdownTimeout %v, want the default", n.cfg.ShutdownTimeout)
				}
				if held := addrs.taken(); len(held) != 5 {
					t.Fatalf("a started node holds %v, want all five addresses (the check cannot see them)", held)
				}
				// Shutdown, the graceful stop (TestKillReleasesEverything
				// checks Kill).
				shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), time.Minute)
				defer cancelShutdown()
				if err := n.Shutdown(shutdownCtx); err != nil {
					t.Fatalf("shutdown: %v", err)
				}
			case tc.cancelAfter != "":
				if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "after "+tc.cancelAfter) {
					t.Fatalf("start: %v, want it stopped by ctx after %s", err, tc.cancelAfter)
				}
				if !stepped[tc.cancelAfter] {
					t.Fatalf("step %s never ran", tc.cancelAfter)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("start: %v, want an error with %q", err, tc.want)
				}
			}
			released(t, addrs, files, goroutines)
			// Until here: a listener the node dropped without closing must
			// not be closed by its finalizer before the check.
			runtime.KeepAlive(n)
		})
	}
}

// validConfig is a configuration Validate accepts.
func validConfig() Config {
	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir = "n1", "data/n1"
	cfg.Join = []string{"127.0.0.1:8301"}
	cfg.Security.GossipKey = testGossipKey
	return cfg
}

// TestValidateReportsProblems: each configuration that does not fit
// together is refused with the message naming its flags; the valid one
// (the control) is accepted.
func TestValidateReportsProblems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"valid", func(*Config) {}, ""},
		{"no id", func(c *Config) { c.ID = "" }, "--id must not be empty"},
		{"no data dir", func(c *Config) { c.DataDir = "" }, "--data-dir must not be empty"},
		{"unknown log store", func(c *Config) { c.LogStore = "tape" }, `--log-store must be wal or boltdb, not "tape"`},
		{"unknown network", func(c *Config) { c.Network = "moon" }, "--network must be"},
		{"replica without join", func(c *Config) { c.Replica, c.Join = true, nil }, "needs --join"},
		{"replica that bootstraps", func(c *Config) { c.Replica, c.BootstrapExpect = true, 3 }, "--bootstrap-expect is for voters"},
		{"seeded bug without hooks", func(c *Config) { c.TestBug = "x" }, "--test-bug needs --test-hooks"},
		{"unknown seeded bug", func(c *Config) { c.TestBug, c.TestHooks = "no-such-bug", true }, "--test-bug"},
		{"limits over the ledger's", func(c *Config) { c.Limits.MaxPayloadBytes = fsm.MaxBlobBytes + 1 }, "--max-payload-bytes"},
		{"unknown auth", func(c *Config) { c.Auth = "maybe" }, `--auth must be required or off, not "maybe"`},
		{"no gossip key with auth", func(c *Config) { c.Security.GossipKey = "" }, "--gossip-key is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			tc.mutate(&cfg)
			err := cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestValidateChangesNothing: Validate leaves every configuration as it
// found it, valid or not, including a zero ShutdownTimeout (which it used
// to fill in); WithDefaults is what fills it, in a copy. That the copy
// differs shows the comparison sees the field (the positive control).
func TestValidateChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
	}{
		{"valid", func(*Config) {}},
		{"zero shutdown timeout", func(c *Config) { c.ShutdownTimeout = 0 }},
		{"invalid", func(c *Config) { c.ShutdownTimeout, c.LogStore = 0, "tape" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			tc.tweak(&cfg)
			before := cfg
			before.Join = append([]string(nil), cfg.Join...)
			_ = cfg.Validate()
			if !reflect.DeepEqual(cfg, before) {
				t.Fatalf("Validate changed the configuration:\n got %+v\nwant %+v", cfg, before)
			}
			filled := cfg.WithDefaults()
			if !reflect.DeepEqual(cfg, before) {
				t.Fatal("WithDefaults changed its receiver")
			}
			if filled.ShutdownTimeout <= 0 {
				t.Fatalf("WithDefaults left ShutdownTimeout %v", filled.ShutdownTimeout)
			}
			if before.ShutdownTimeout == 0 && reflect.DeepEqual(filled, before) {
				t.Fatal("the copy with the default equals the configuration without it: the comparison sees nothing")
			}
		})
	}
}

// TestWithDefaults: a zero ShutdownTimeout takes DefaultConfig's, a set
// one stays.
func TestWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set, want time.Duration
	}{
		{"zero", 0, DefaultConfig().ShutdownTimeout},
		{"negative", -time.Second, DefaultConfig().ShutdownTimeout},
		{"set", 3 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.ShutdownTimeout = tc.set
			if got := cfg.WithDefaults().ShutdownTimeout; got != tc.want {
				t.Fatalf("ShutdownTimeout %v, want %v", got, tc.want)
			}
		})
	}
}
