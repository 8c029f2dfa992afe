package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// fakeCluster is a few in-memory nodes that answer GET /v1/cluster with a
// leader the test chooses; a node that does not lead refuses every other
// call with 503 not_leader (as a node that could not forward would).
type fakeCluster struct {
	mu     sync.Mutex
	leader string // node ID; "" for no leader
	ids    []string
	nodes  map[string]*clienttest.Memory
}

func newFakeCluster(t *testing.T, leader string, ids ...string) *fakeCluster {
	fc := &fakeCluster{leader: leader, ids: ids, nodes: map[string]*clienttest.Memory{}}
	for _, id := range ids {
		fc.nodes[id] = clienttest.NewMemory(t, clienttest.WithMiddleware(fc.middleware(id)))
	}
	return fc
}

func (fc *fakeCluster) setLeader(id string) {
	fc.mu.Lock()
	fc.leader = id
	fc.mu.Unlock()
}

func hostPort(u string) string { return strings.TrimPrefix(u, "http://") }

func (fc *fakeCluster) middleware(id string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fc.mu.Lock()
			leader := fc.leader
			fc.mu.Unlock()
			if r.URL.Path == "/v1/cluster" {
				st := client.ClusterStatus{NodeID: id, State: "follower", LeaderID: leader, Ready: leader != ""}
				if id == leader {
					st.State = "leader"
				}
				for _, nid := range fc.ids {
					addr := hostPort(fc.nodes[nid].URL)
					if nid == leader {
						st.LeaderHTTP = addr
					}
					st.Nodes = append(st.Nodes, client.NodeStatus{ID: nid, HTTPAddr: addr, Gossip: "alive", Leader: nid == leader})
				}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(st)
				return
			}
			if leader != "" && id != leader {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"title":"t","status":503,"code":"not_leader"}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func (fc *fakeCluster) url(id string) string { return fc.nodes[id].URL }

func (fc *fakeCluster) requests(id, op string) int { return fc.nodes[id].Requests(op) }

func TestDiscoveryPutsTheLeaderFirst(t *testing.T) {
	fc := newFakeCluster(t, "a", "a", "b", "c")
	// Configured with one follower only: the client learns the rest.
	c := newClient(t, []string{fc.url("b")})
	if _, err := c.Claim(testCtx(t), claimReq("k1", "o")); err != nil {
		t.Fatal(err)
	}
	if fc.requests("a", "claim") != 1 || fc.requests("b", "claim") != 0 || fc.requests("c", "claim") != 0 {
		t.Errorf("claims a/b/c = %d/%d/%d, want 1/0/0", fc.requests("a", "claim"), fc.requests("b", "claim"), fc.requests("c", "claim"))
	}
	if fc.requests("b", "cluster") != 1 {
		t.Errorf("b answered %d discoveries, want 1", fc.requests("b", "cluster"))
	}
	want := []string{fc.url("a"), fc.url("b"), fc.url("c")}
	if got := c.Endpoints(); !slices.Equal(got, want) || c.Leader() != fc.url("a") {
		t.Errorf("endpoints %v leader %q, want %v leader %q", got, c.Leader(), want, fc.url("a"))
	}
	if got := c.Addrs(); !slices.Equal(got, []string{fc.url("b")}) {
		t.Errorf("configured addresses changed: %v", got)
	}
}

func TestDiscoveryFollowsTheLeaderAfterNotLeader(t *testing.T) {
	fc := newFakeCluster(t, "a", "a", "b", "c")
	c := newClient(t, []string{fc.url("b"), fc.url("c"), fc.url("a")})
	ctx := testCtx(t)
	if _, err := c.Claim(ctx, claimReq("k1", "o")); err != nil {
		t.Fatal(err)
	}
	fc.setLeader("c")
	if _, err := c.Claim(ctx, claimReq("k2", "o")); err != nil {
		t.Fatal(err)
	}
	// a refused k2 (not_leader), the client asked again and went to c.
	if fc.requests("a", "claim") != 2 || fc.requests("c", "claim") != 1 || fc.requests("b", "claim") != 0 {
		t.Errorf("claims a/b/c = %d/%d/%d, want 2/0/1", fc.requests("a", "claim"), fc.requests("b", "claim"), fc.requests("c", "claim"))
	}
	if c.Leader() != fc.url("c") || c.Endpoints()[0] != fc.url("c") {
		t.Errorf("leader %q endpoints %v", c.Leader(), c.Endpoints())
	}
	if _, err := c.Get(ctx, "k2", client.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if fc.requests("c", "get") != 1 {
		t.Errorf("the read went elsewhere than the new leader")
	}
}

func TestDiscoveryFailureFallsBackToTheConfiguredOrder(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	fc := newFakeCluster(t, "", "a") // a node that knows no leader but serves
	c := newClient(t, []string{dead.URL, fc.url("a")})
	ctx := testCtx(t)
	if _, err := c.Claim(ctx, claimReq("k", "o")); err != nil {
		t.Fatal(err)
	}
	if c.Leader() != "" || fc.requests("a", "claim") != 1 {
		t.Errorf("leader %q, claims on a %d", c.Leader(), fc.requests("a", "claim"))
	}
	if _, err := c.Discover(ctx); !errors.Is(err, client.ErrNoLeader) {
		t.Errorf("Discover = %v, want ErrNoLeader", err)
	}
	// Once a leader is known, Discover names it.
	fc.setLeader("a")
	if got, err := c.Discover(ctx); err != nil || got != fc.url("a") {
		t.Errorf("Discover = %q, %v", got, err)
	}
}

func TestDiscoveryOfAnUnreachableLeaderMovesOn(t *testing.T) {
	// The status names a leader whose advertised address does not answer
	// (a dead node, or one only reachable inside its network).
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	mem := clienttest.NewMemory(t, clienttest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/cluster" {
				_ = json.NewEncoder(w).Encode(client.ClusterStatus{NodeID: "b", LeaderID: "a", LeaderHTTP: hostPort(gone.URL), Ready: true})
				return
			}
			next.ServeHTTP(w, r)
		})
	}))
	c := newClient(t, []string{mem.URL})
	if _, err := c.Claim(testCtx(t), claimReq("k", "o")); err != nil {
		t.Fatal(err)
	}
	if c.Endpoints()[0] != mem.URL {
		t.Errorf("endpoints %v: the node that answered should come first", c.Endpoints())
	}
}

func TestDiscoveryRunsOnceForConcurrentFirstCalls(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := c.Get(ctx, "k", client.GetOptions{}); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("get: %v", err)
			}
		})
	}
	wg.Wait()
	if n := mem.Requests("cluster"); n != 1 {
		t.Errorf("%d discoveries, want 1", n)
	}
}

func TestDiscoveryOff(t *testing.T) {
	fc := newFakeCluster(t, "a", "a", "b")
	c := newClient(t, []string{fc.url("a"), fc.url("b")}, client.WithDiscovery(false))
	if _, err := c.Claim(testCtx(t), claimReq("k", "o")); err != nil {
		t.Fatal(err)
	}
	if fc.requests("a", "cluster")+fc.requests("b", "cluster") != 0 || c.Leader() != "" {
		t.Error("discovery ran although off")
	}
}
