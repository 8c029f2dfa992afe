package node

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/testkit/nodetest"
)

// testNodes runs Mains in-process on loopback with ports chosen by the OS.
type testNodes struct {
	t     *testing.T
	dir   string
	mains map[string]*Node
}

// parallelTests records the tests newTestNodes already made parallel (a
// test may start two clusters; t.Parallel may be called once).
var parallelTests sync.Map

// newTestNodes runs the test in parallel with the other cluster tests
// (each node on its own ports and data directory) and skips it under
// -short: the unit tier starts no cluster.
func newTestNodes(t *testing.T) *testNodes {
	if testing.Short() {
		t.Skip("starts a cluster: integration tier")
	}
	if _, again := parallelTests.LoadOrStore(t, true); !again {
		t.Parallel()
	}
	tn := &testNodes{t: t, dir: t.TempDir(), mains: map[string]*Node{}}
	t.Cleanup(func() {
		for _, m := range tn.mains {
			m.Kill()
		}
	})
	return tn
}

func quietLogger() *slog.Logger {
	if os.Getenv("INTENTD_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (tn *testNodes) start(id string, expect int, join ...string) *Node {
	tn.t.Helper()
	return tn.startCfg(id, expect, anyAddrs, nil, join...)
}

func (tn *testNodes) startN(n int) []*Node {
	first := tn.start("n1", n)
	out := []*Node{first}
	for i := 2; i <= n; i++ {
		out = append(out, tn.start(fmt.Sprintf("n%d", i), n, first.Cluster().GossipAddr()))
	}
	tn.waitReady()
	return out
}

// waitReady waits until every running node answers /readyz with 200.
func (tn *testNodes) waitReady() {
	tn.t.Helper()
	nodetest.WaitFor(tn.t, 30*time.Second, "all nodes ready", func() bool {
		for _, m := range tn.mains {
			resp, err := http.Get("http://" + m.HTTPAddr() + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return false
			}
		}
		return true
	})
}

func (tn *testNodes) leader() *Node {
	for _, m := range tn.mains {
		if m.Cluster().IsLeader() {
			return m
		}
	}
	return nil
}

func TestConcurrentClaimersGetExactlyOneGrantPerKey(t *testing.T) {
	tn := newTestNodes(t)
	nodes := tn.startN(3)
	addrs := []string{nodes[0].HTTPAddr(), nodes[1].HTTPAddr(), nodes[2].HTTPAddr()}
	const claimers, keys = 50, 20
	var mu sync.Mutex
	grants := map[string][]string{} // key -> owners that got 201
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for c := 0; c < claimers; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			owner := fmt.Sprintf("claimer-%d", c)
			for k := 0; k < keys; k++ {
				key := fmt.Sprintf("contended:%d", k)
				a := nodetest.ClaimUntilDefinite(t, addrs, c+k, key, owner)
				mu.Lock()
				statuses[a.Code]++
				if a.Code == http.StatusCreated {
					grants[key] = append(grants[key], owner)
				}
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("contended:%d", k)
		if len(grants[key]) != 1 {
			t.Errorf("%s granted to %v, want exactly one owner", key, grants[key])
			continue
		}
		a, err := nodetest.Get(addrs[k%3], "/v1/intents/"+key)
		if err != nil || a.Code != 200 || nodetest.IntentOf(a.Body)["owner"] != grants[key][0] {
			t.Errorf("%s read back %d %v, want owner %s", key, a.Code, a.Body, grants[key][0])
		}
	}
	if statuses[http.StatusCreated] != keys || statuses[http.StatusConflict] == 0 {
		t.Errorf("statuses = %v", statuses)
	}
	t.Logf("statuses: %v", statuses)
}

func TestTestHooksDigestsAgreeAndClockOffsetSkewsStamps(t *testing.T) {
	tn := newTestNodes(t)
	nodes := tn.startN(3)
	addrs := []string{nodes[0].HTTPAddr(), nodes[1].HTTPAddr(), nodes[2].HTTPAddr()}
	for i := 0; i < 10; i++ {
		nodetest.ClaimUntilDefinite(t, addrs, i, fmt.Sprintf("digest:%d", i), "o")
	}
	nodetest.WaitFor(t, 30*time.Second, "equal replica digests", func() bool {
		var first string
		for _, a := range addrs {
			d, err := nodetest.Get(a, "/debug/digest")
			if err != nil || d.Code != 200 {
				return false
			}
			if first == "" {
				first = d.Body["digest"].(string)
			} else if d.Body["digest"] != first {
				return false
			}
		}
		return true
	})
	leader := tn.leader().HTTPAddr()
	req, _ := http.NewRequest(http.MethodPut, "http://"+leader+"/debug/clock-offset", bytes.NewReader([]byte(`{"offset_ms":3600000}`)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("set clock offset: %v %v", resp, err)
	}
	resp.Body.Close()
	a := nodetest.ClaimUntilDefinite(t, []string{leader}, 0, "skewed", "o")
	created, err := time.Parse(time.RFC3339Nano, nodetest.IntentOf(a.Body)["created_at"].(string))
	if err != nil || time.Until(created) < 30*time.Minute {
		t.Fatalf("created_at %v with a +1h clock offset (err %v)", created, err)
	}
}

// testGossipKey is a gossip key for configurations that require one.
const testGossipKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
