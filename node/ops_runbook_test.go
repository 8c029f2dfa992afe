package node

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestDashboardForwardedPanelPlotsReadsAndWrites: the dashboard's
// "Forwarded to leader/s" panel plots both kinds of forwarding, reads
// (intentd_http_forwarded_total) and writes
// (intentd_forwarded_commands_total), as two series with their own
// legends. TestMetricsExportOperationalSeries checks both are exported.
func TestDashboardForwardedPanelPlotsReadsAndWrites(t *testing.T) {
	raw, err := os.ReadFile("../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr   string `json:"expr"`
				Legend string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	for _, p := range dash.Panels {
		if p.Title != "Forwarded to leader/s" {
			continue
		}
		for _, series := range []string{"intentd_http_forwarded_total", "intentd_forwarded_commands_total"} {
			n := 0
			for _, tg := range p.Targets {
				if strings.Contains(tg.Expr, series) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("the panel has %d targets on %s, want 1: %+v", n, series, p.Targets)
			}
		}
		legends := map[string]bool{}
		for _, tg := range p.Targets {
			legends[tg.Legend] = true
		}
		if len(legends) != len(p.Targets) {
			t.Errorf("two series of the panel share a legend: %+v", p.Targets)
		}
		return
	}
	t.Fatal(`no "Forwarded to leader/s" panel`)
}

// ackedClaim is a claim the cluster acknowledged (a grant).
type ackedClaim struct {
	key, owner string
	token      uint64
	at         time.Time
}

// claimLoad claims a new key every loadPeriod through a client, each one
// retried (same key, owner and payload) until it is answered definitely,
// and records every acknowledgement with its time.
type claimLoad struct {
	mu   sync.Mutex
	cl   *client.Client
	acks []ackedClaim
	err  error
	stop chan struct{}
	done chan struct{}
}

// loadPeriod spaces the claims of the load: a light load, about 50
// claims/s when the cluster keeps up.
const loadPeriod = 20 * time.Millisecond

func startClaimLoad(cl *client.Client) *claimLoad {
	l := &claimLoad{cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *claimLoad) run() {
	defer close(l.done)
	tick := time.NewTicker(loadPeriod)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		key, owner := fmt.Sprintf("runbook:%d", i), fmt.Sprintf("agent-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var r *client.ClaimResponse
		var err error
		for ctx.Err() == nil {
			r, err = l.client().Claim(ctx, client.ClaimRequest{Key: key, Tool: "runbook.step", Owner: owner,
				Payload: json.RawMessage(`{"n":1}`)})
			if err == nil || !(errors.Is(err, client.ErrOutcomeUnknown) || errors.Is(err, client.ErrUnavailable) ||
				errors.Is(err, client.ErrNoLeader)) {
				break
			}
		}
		cancel()
		l.mu.Lock()
		if err != nil {
			l.err = fmt.Errorf("claim %s never succeeded within the retry budget: %w", key, err)
			l.mu.Unlock()
			return
		}
		l.acks = append(l.acks, ackedClaim{key: key, owner: owner, token: r.FencingToken, at: time.Now()})
		l.mu.Unlock()
	}
}

func (l *claimLoad) client() *client.Client { l.mu.Lock(); defer l.mu.Unlock(); return l.cl }

// use makes the load's next claims go through cl (a caller moving to a
// new API key).
func (l *claimLoad) use(cl *client.Client) { l.mu.Lock(); l.cl = cl; l.mu.Unlock() }

func (l *claimLoad) acked() int    { l.mu.Lock(); defer l.mu.Unlock(); return len(l.acks) }
func (l *claimLoad) failed() error { l.mu.Lock(); defer l.mu.Unlock(); return l.err }
func (l *claimLoad) halt() []ackedClaim {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]ackedClaim(nil), l.acks...)
}

// waitMore waits until n more claims were acknowledged (or the load
// failed, which fails the test).
func (l *claimLoad) waitMore(t *testing.T, n int, what string) {
	t.Helper()
	before := l.acked()
	nodetest.WaitFor(t, 60*time.Second, fmt.Sprintf("%d claims acknowledged %s", n, what), func() bool {
		return l.acked() >= before+n || l.failed() != nil
	})
	if err := l.failed(); err != nil {
		t.Fatal(err)
	}
}

// longestGap is the longest time in [from, to] without an acknowledged
// claim: from the start to the first acknowledgement, between two, and
// from the last one to the end.
func (l *claimLoad) longestGap(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var gap time.Duration
	prev := from
	for _, a := range l.acks {
		if a.at.Before(from) || a.at.After(to) {
			continue
		}
		gap = max(gap, a.at.Sub(prev))
		prev = a.at
	}
	return max(gap, to.Sub(prev))
}

// runbookCluster is the cluster the operations test runs the runbooks of
// docs/operations.md on: in-process nodes with auth, a gossip key, a keys
// file per node reloaded on a signal (SIGHUP in cmd/intentd), on fixed
// ports so that a restarted node comes back on its addresses.
type runbookCluster struct {
	t      *testing.T
	tn     *testNodes
	addrs  map[string][3]string // id -> HTTP, Raft, gossip
	files  map[string]string    // id -> keys file
	hups   map[string]chan os.Signal
	opsKey string // admin key of the operator, never rotated
}

func (rc *runbookCluster) tune(id string) func(*Config) {
	return func(c *Config) {
		c.Auth = AuthRequired
		c.APIKeysFile = rc.files[id]
		c.APIKeysPoll = 0 // the signal only
		c.Reload = rc.hups[id]
		c.Security.GossipKey = testGossipKey
		c.LeaveOnTerminate = false
	}
}

// start starts id on its addresses, joining the gossip of the others
// that run (the same flags at every start, as a service unit has them).
func (rc *runbookCluster) start(id string, expect int) *Node {
	rc.t.Helper()
	if _, ok := rc.addrs[id]; !ok {
		rc.addrs[id] = [3]string{nodetest.FreePort(rc.t), nodetest.FreePort(rc.t), nodetest.FreePort(rc.t)}
		rc.files[id] = filepath.Join(rc.tn.dir, id+"-keys.json")
		rc.hups[id] = make(chan os.Signal, 1)
	}
	var join []string
	for other, m := range rc.tn.mains {
		if other != id {
			join = append(join, m.Cluster().GossipAddr())
		}
	}
	return rc.tn.startCfg(id, expect, rc.addrs[id], rc.tune(id), join...)
}

// writeKeys writes every node's keys file (entries are JSON key entries)
// and signals each running node to reload it.
func (rc *runbookCluster) writeKeys(entries ...string) {
	rc.t.Helper()
	for id, f := range rc.files {
		writeKeysFile(rc.t, f, entries...)
		if _, running := rc.tn.mains[id]; running {
			select {
			case rc.hups[id] <- os.Interrupt: // any value: cmd/intentd sends SIGHUP
			default: // a reload is pending already
			}
		}
	}
}

// admin is a client of one node (addr) or, with none, of every running
// node, under the operator's key.
func (rc *runbookCluster) admin(addr ...string) *client.Client {
	rc.t.Helper()
	opts := []client.Option{client.WithAPIKey(rc.opsKey), client.WithBackoff(20*time.Millisecond, 250*time.Millisecond)}
	if len(addr) == 0 {
		for _, m := range rc.tn.mains {
			addr = append(addr, m.HTTPAddr())
		}
	} else {
		opts = append(opts, client.WithDiscovery(false), client.WithRetries(0))
	}
	cl, err := client.New(addr, opts...)
	if err != nil {
		rc.t.Fatal(err)
	}
	return cl
}

// status is GET /v1/cluster on the node at addr (nil when it does not
// answer).
func (rc *runbookCluster) status(addr string) *client.ClusterStatus {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := rc.admin(addr).Cluster(ctx)
	if err != nil {
		return nil
	}
	return st
}

// caughtUp is the runbook's check that a restarted node is back: its
// /readyz answers 200, and the applied_index it reports in GET
// /v1/cluster is at least the commit_index its leader reported just
// before.
func (rc *runbookCluster) caughtUp(id string) {
	rc.t.Helper()
	addr := rc.addrs[id][0]
	nodetest.WaitFor(rc.t, 30*time.Second, id+" ready and caught up with the leader", func() bool {
		if !nodetest.Ready(addr) {
			return false
		}
		me := rc.status(addr)
		if me == nil || me.LeaderHTTP == "" {
			return false
		}
		lead := rc.status(strings.TrimPrefix(me.LeaderHTTP, "http://"))
		if lead == nil {
			return false
		}
		me = rc.status(addr)
		return me != nil && me.AppliedIndex >= lead.CommitIndex
	})
}

// leaderID is the ID of the running node that leads ("" when none does).
func (rc *runbookCluster) leaderID() string {
	for id, m := range rc.tn.mains {
		if m.Cluster().IsLeader() {
			return id
		}
	}
	return ""
}

// suffrage is id's suffrage in the leader's configuration ("" when it is
// not a server of it, or no leader answers).
func (rc *runbookCluster) suffrage(id string) (string, bool) {
	lid := rc.leaderID()
	if lid == "" {
		return "", false
	}
	st := rc.status(rc.addrs[lid][0])
	if st == nil {
		return "", false
	}
	for _, n := range st.Nodes {
		if n.ID == id {
			return n.Suffrage, true
		}
	}
	return "", true
}

// newKey makes an API key: its plaintext and SHA-256.
func newKey(t *testing.T) (plaintext, sum string) {
	t.Helper()
	p, s, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return p, s
}

// TestRunbooksOnALiveCluster performs the runbooks of docs/operations.md
// on a three-node cluster under a light claim load (a claim every 20 ms,
// each retried until answered): adding a node (n4 joins), removing a dead
// one (n4 killed, then removed through the API as intentctl peer remove
// does), a rolling restart (followers first, each back and caught up
// before the next; then leadership moved away with intentctl leader
// transfer's call and the old leader restarted) and rotating the load's
// API key under the same name (previous_sha256, reloaded by signal on
// every node). For each it logs how long it took and the longest stretch
// without an acknowledged claim (the load's unavailability; docs/
// operations.md quotes one run). At the end every acknowledged claim is
// read back, linearizably, with the token and owner it was granted: none
// is lost. Its only time bounds are hang guards (30-60 s per wait).
func TestRunbooksOnALiveCluster(t *testing.T) {
	tn := newTestNodes(t)
	opsKey, opsSum := newKey(t)
	agentsOld, agentsOldSum := newKey(t)
	opsEntry := fmt.Sprintf(`{"name":"ops","namespace":"default","roles":["admin"],"sha256":%q}`, opsSum)
	agentsEntry := func(sum string, previous ...string) string {
		prev, _ := json.Marshal(previous)
		if len(previous) == 0 {
			return fmt.Sprintf(`{"name":"agents","namespace":"default","roles":["agent"],"sha256":%q}`, sum)
		}
		return fmt.Sprintf(`{"name":"agents","namespace":"default","roles":["agent"],"sha256":%q,"previous_sha256":%s}`, sum, prev)
	}
	rc := &runbookCluster{t: t, tn: tn, addrs: map[string][3]string{}, files: map[string]string{},
		hups: map[string]chan os.Signal{}, opsKey: opsKey}
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		rc.addrs[id] = [3]string{nodetest.FreePort(t), nodetest.FreePort(t), nodetest.FreePort(t)}
		rc.files[id] = filepath.Join(tn.dir, id+"-keys.json")
		rc.hups[id] = make(chan os.Signal, 1)
		writeKeysFile(t, rc.files[id], opsEntry, agentsEntry(agentsOldSum))
	}
	rc.start("n1", 3)
	rc.start("n2", 3)
	rc.start("n3", 3)
	tn.waitReady()

	loadClient := func(key string) *client.Client {
		var urls []string
		for _, id := range []string{"n1", "n2", "n3"} {
			urls = append(urls, rc.addrs[id][0])
		}
		cl, err := client.New(urls, client.WithAPIKey(key), client.WithBackoff(20*time.Millisecond, 250*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	load := startClaimLoad(loadClient(agentsOld))
	defer func() {
		select {
		case <-load.done:
		default:
			load.halt()
		}
	}()
	load.waitMore(t, 10, "before the first procedure")

	type figure struct {
		name      string
		took, gap time.Duration
	}
	var figures []figure
	// procedure runs one step of a runbook, then waits for 10 more
	// acknowledged claims, and records how long the step took and the
	// longest stretch without an acknowledged claim from its start.
	procedure := func(name string, do func()) {
		t.Helper()
		from := time.Now()
		do()
		took := time.Since(from)
		load.waitMore(t, 10, "after "+name)
		gap := load.longestGap(from, time.Now())
		figures = append(figures, figure{name, took, gap})
		t.Logf("%s: took %v; longest time without an acknowledged claim %v", name, took.Round(time.Millisecond), gap.Round(time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	procedure("steady load (reference, nothing done)", func() { load.waitMore(t, 25, "under steady load") })

	// Adding a node: n4 starts with --join; the leader adds it as a voter
	// once its Raft address proved its ID; it catches up.
	procedure("add n4 (join, voter, caught up)", func() {
		rc.start("n4", 0)
		nodetest.WaitFor(t, 30*time.Second, "n4 a voter in the leader's configuration", func() bool {
			s, _ := rc.suffrage("n4")
			return s == "voter"
		})
		rc.caughtUp("n4")
	})

	// Removing a dead node: n4 is killed (it stays a voter: 4 voters, 3
	// alive), then removed through the leader.
	if rc.leaderID() == "n4" {
		if _, err := rc.admin().TransferLeadership(ctx, "n1"); err != nil {
			t.Fatalf("moving leadership off n4: %v", err)
		}
		nodetest.WaitFor(t, 30*time.Second, "a leader other than n4", func() bool { l := rc.leaderID(); return l != "" && l != "n4" })
	}
	procedure("remove dead n4 (kill -9, peer remove)", func() {
		tn.mains["n4"].Kill()
		delete(tn.mains, "n4")
		if s, _ := rc.suffrage("n4"); s != "voter" {
			t.Fatalf("killed n4 is no longer a voter by itself (%q): nothing left to remove", s)
		}
		nodetest.WaitFor(t, 30*time.Second, "n4 removed", func() bool {
			err := rc.admin().RemovePeer(ctx, "n4")
			if err != nil && !errors.Is(err, client.ErrNotFound) {
				t.Logf("peer remove n4: %v (retrying)", err)
				return false
			}
			s, answered := rc.suffrage("n4")
			return answered && s == ""
		})
	})
	if st := rc.status(rc.addrs[rc.leaderID()][0]); st != nil {
		voters := 0
		for _, n := range st.Nodes {
			if n.Suffrage == "voter" {
				voters++
			}
		}
		if voters != 3 {
			t.Fatalf("after removing n4: %d voters, want 3: %+v", voters, st.Nodes)
		}
	}

	// Rolling restart: followers first, each back and caught up before
	// the next; then leadership moves and the old leader restarts.
	restart := func(id string) {
		old := tn.mains[id]
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		if err := old.Shutdown(sctx); err != nil {
			t.Errorf("graceful shutdown of %s: %v", id, err)
		}
		scancel()
		delete(tn.mains, id)
		rc.start(id, 3)
		rc.caughtUp(id)
	}
	leader := rc.leaderID()
	if leader == "" {
		t.Fatal("no leader before the rolling restart")
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		if id != leader {
			procedure("restart follower "+id, func() { restart(id) })
		}
	}
	procedure("leader transfer away from "+leader, func() {
		if _, err := rc.admin().TransferLeadership(ctx, ""); err != nil {
			t.Fatalf("leader transfer: %v", err)
		}
		nodetest.WaitFor(t, 30*time.Second, "a leader other than "+leader, func() bool {
			l := rc.leaderID()
			return l != "" && l != leader
		})
		rc.caughtUp(leader)
	})
	procedure("restart old leader "+leader, func() { restart(leader) })

	// Rotating the load's key under the same name: the new secret beside
	// the old one (previous_sha256) on every node, the caller moves, the
	// old secret goes.
	agentsNew, agentsNewSum := newKey(t)
	procedure("API key rotation, previous_sha256 (reload by signal)", func() {
		rc.writeKeys(opsEntry, agentsEntry(agentsNewSum, agentsOldSum))
		nodetest.WaitFor(t, 30*time.Second, "every node to take both secrets, with one digest", func() bool {
			for id := range tn.mains {
				addr := rc.addrs[id][0]
				if status(addr, agentsNew) != http.StatusOK || status(addr, agentsOld) != http.StatusOK ||
					digestLabel(t, addr) != fileDigest(t, rc.files[id]) {
					return false
				}
			}
			return true
		})
		load.use(loadClient(agentsNew))
		load.waitMore(t, 10, "under the new secret")
		rc.writeKeys(opsEntry, agentsEntry(agentsNewSum))
		nodetest.WaitFor(t, 30*time.Second, "every node to refuse the old secret", func() bool {
			for id := range tn.mains {
				addr := rc.addrs[id][0]
				if status(addr, agentsOld) != http.StatusUnauthorized || status(addr, agentsNew) != http.StatusOK {
					return false
				}
			}
			return true
		})
	})

	acks := load.halt()
	if err := load.failed(); err != nil {
		t.Fatal(err)
	}
	reader := rc.admin()
	for _, a := range acks {
		in, err := reader.Get(ctx, a.key, client.GetOptions{})
		if err != nil {
			t.Fatalf("acknowledged claim %s lost: %v", a.key, err)
		}
		if in.FencingToken != a.token || in.Owner != a.owner {
			t.Fatalf("acknowledged claim %s: token %d owner %q, acknowledged token %d owner %q", a.key, in.FencingToken, in.Owner, a.token, a.owner)
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%d claims acknowledged, every one read back; per procedure (took / longest time without an acknowledged claim):\n", len(acks))
	for _, f := range figures {
		fmt.Fprintf(&table, "| %s | %v | %v |\n", f.name, f.took.Round(time.Millisecond), f.gap.Round(time.Millisecond))
	}
	t.Log(table.String())
}
