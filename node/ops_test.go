package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// startCfg starts a node like testNodes.start, on the given addresses
// ("127.0.0.1:0" picks), after tune adjusted its configuration.
func (tn *testNodes) startCfg(id string, expect int, addrs [3]string, tune func(*Config), join ...string) *Node {
	tn.t.Helper()
	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir = id, filepath.Join(tn.dir, id)
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr = addrs[0], addrs[1], addrs[2]
	cfg.Join, cfg.BootstrapExpect = join, expect
	cfg.Auth = AuthOff
	cfg.TestHooks = true
	cfg.Logger = quietLogger()
	cfg.Timings = cluster.FastTimings()
	if tune != nil {
		tune(&cfg)
	}
	m := New(cfg)
	if err := m.Start(context.Background()); err != nil {
		tn.t.Fatalf("start %s: %v", id, err)
	}
	tn.mains[id] = m
	return m
}

var anyAddrs = [3]string{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"}

// startThree starts n1, n2 and n3 (which join n1) on any addresses, each
// after tune adjusted its configuration; it does not wait for readiness.
func (tn *testNodes) startThree(tune func(*Config)) {
	tn.t.Helper()
	n1 := tn.startCfg("n1", 3, anyAddrs, tune)
	tn.startCfg("n2", 3, anyAddrs, tune, n1.Cluster().GossipAddr())
	tn.startCfg("n3", 3, anyAddrs, tune, n1.Cluster().GossipAddr())
}

// pki is a development PKI for nodes n1..n3 and a client.
type pki struct{ files tlsutil.Files }

func newPKI(t *testing.T) pki {
	t.Helper()
	f, err := tlsutil.DevPKI{Dir: filepath.Join(t.TempDir(), "pki"), Nodes: []string{"n1", "n2", "n3"}}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return pki{f}
}

// httpsClient trusts ca and presents cert/key (when set).
func httpsClient(t *testing.T, ca, cert, key string) *http.Client {
	t.Helper()
	conf, err := tlsutil.ClientConfig(ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf}}
}

func doJSON(hc *http.Client, method, url string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}

func TestHTTPSClusterServesForwardsAndRefusesStrangers(t *testing.T) {
	good, other := newPKI(t), newPKI(t)
	tn := newTestNodes(t)
	secure := func(c *Config) {
		c.Security = SecurityConfig{ClusterName: tlsutil.DefaultCluster, TLSCert: good.files.Node[c.ID], TLSKey: good.files.NodeKey[c.ID],
			TLSCA: good.files.CA, TLSClientCA: good.files.ClientCA, GossipKey: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
	}
	tn.startThree(secure)
	hc := httpsClient(t, good.files.CA, good.files.Client, good.files.ClientKey)
	nodetest.WaitFor(t, 30*time.Second, "three ready nodes over HTTPS", func() bool {
		for _, m := range tn.mains {
			code, _, err := doJSON(hc, "GET", "https://"+m.HTTPAddr()+"/readyz", nil)
			if err != nil || code != 200 {
				return false
			}
		}
		return true
	})
	var followers []*Node
	for _, m := range tn.mains {
		if !m.Cluster().IsLeader() {
			followers = append(followers, m)
		}
	}
	if len(followers) != 2 {
		t.Fatalf("want 2 followers, have %d", len(followers))
	}
	if st := followers[0].Cluster().Status(); !strings.HasPrefix(st.LeaderHTTP, "https://") {
		t.Fatalf("the leader advertises %q, want an https address", st.LeaderHTTP)
	}
	// A claim through a follower is forwarded to the leader over HTTPS with
	// the follower's certificate; a read through the other follower too.
	claim := map[string]any{"key": "tls:order-1", "tool": "t", "owner": "o1", "payload": map[string]any{"a": 1}}
	code, body, err := doJSON(hc, "POST", "https://"+followers[0].HTTPAddr()+"/v1/intents", claim)
	if err != nil || code != http.StatusCreated {
		t.Fatalf("claim through a follower: %d %v %v", code, body, err)
	}
	code, body, err = doJSON(hc, "GET", "https://"+followers[1].HTTPAddr()+"/v1/intents/tls:order-1", nil)
	if err != nil || code != 200 || body["owner"] != "o1" {
		t.Fatalf("read through a follower: %d %v %v", code, body, err)
	}

	addr := followers[1].HTTPAddr()
	cases := []struct {
		name string
		hc   *http.Client
		url  string
		ok   bool
	}{
		{"client with the cluster CA and a client certificate (control)", hc, "https://" + addr, true},
		{"client without a certificate", httpsClient(t, good.files.CA, "", ""), "https://" + addr, false},
		{"client certificate from another CA", httpsClient(t, good.files.CA, other.files.Client, other.files.ClientKey), "https://" + addr, false},
		{"client trusting another CA", httpsClient(t, other.files.CA, good.files.Client, good.files.ClientKey), "https://" + addr, false},
		{"plaintext HTTP", &http.Client{Timeout: 5 * time.Second}, "http://" + addr, false},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			code, body, err := doJSON(tt.hc, "GET", tt.url+"/v1/intents/tls:order-1", nil)
			served := err == nil && code == 200
			if served != tt.ok {
				t.Fatalf("served=%v (code %d, %v, err %v), want %v", served, code, body, err, tt.ok)
			}
		})
	}
}

func TestMetricsExportOperationalSeries(t *testing.T) {
	tn := newTestNodes(t)
	tn.startN(3)
	leader := tn.leader()
	if a := nodetest.ClaimUntilDefinite(t, []string{leader.HTTPAddr()}, 0, "metrics:1", "o1"); a.Code != http.StatusCreated {
		t.Fatalf("claim: %+v", a)
	}
	var snapBuf bytes.Buffer
	if _, err := leader.Cluster().WriteSnapshot(context.Background(), &snapBuf); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + leader.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	text := string(raw)
	for _, series := range []string{
		`intentd_http_requests_total{code="201",method="POST",route="/v1/intents"}`,
		`intentd_http_request_duration_seconds_bucket{code="201",method="POST",route="/v1/intents",le=`,
		`intentd_claims_total{status="granted"}`,
		`intentd_intents{state="in_doubt"}`,
		`intentd_intents{state="pending_approval"}`,
		`intentd_intents{state="declared"} 1`,
		`intentd_namespace_intents{namespace="default",state="declared"} 1`,
		`intentd_namespace_claims_total{namespace="default",status="granted"} `,
		`intentd_namespace_stored_bytes{namespace="default"} `,
		`intentd_raft_leader 1`,
		`intentd_raft_state{state="leader"} 1`,
		`intentd_raft_state{state="follower"} 0`,
		`intentd_raft_term `,
		`intentd_raft_commit_index `,
		`intentd_raft_applied_index `,
		`intentd_raft_last_index `,
		`intentd_raft_apply_duration_seconds_bucket{outcome="applied",le=`,
		`intentd_raft_last_snapshot_index `,
		`intentd_raft_snapshot_size_bytes `,
		`intentd_raft_snapshots `,
		`intentd_gossip_members 3`,
		`intentd_cluster_members{gossip="alive"} 3`,
		`intentd_ready 1`,
		`intentd_raft_log_write_duration_seconds_bucket{le=`,
		`intentd_data_dir_free_bytes `,
		`intentd_data_dir_size_bytes `,
		`go_goroutines `,
	} {
		if !strings.Contains(text, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	// The log store's appends are timed: the claim and the bootstrap wrote
	// entries, so the histogram counted some (a zero count would mean the
	// hook is not wired).
	if m := regexp.MustCompile(`\nintentd_raft_log_write_duration_seconds_count (\d+)`).FindStringSubmatch(text); m == nil || m[1] == "0" {
		t.Errorf("log writes not counted: %v", m)
	}
	// Every intentd series the Grafana dashboard queries is exported.
	dash, err := os.ReadFile("../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`intentd_[a-z_]+`).FindAllString(string(dash), -1)
	if len(names) < 10 {
		t.Fatalf("the dashboard queries only %d intentd series", len(names))
	}
	for _, name := range names {
		if !strings.Contains(text, "\n"+name) {
			t.Errorf("the dashboard queries %s, which /metrics does not export", name)
		}
	}
}

// digestOf reads a node's replica digest through the test hooks.
func digestOf(t *testing.T, m *Node) string {
	t.Helper()
	a, err := nodetest.Get(m.HTTPAddr(), "/debug/digest")
	if err != nil || a.Code != 200 {
		t.Fatalf("digest of %s: %v %v", m.cfg.ID, a, err)
	}
	return a.Body["digest"].(string)
}

func TestSnapshotSaveAndRestoreOverHTTPGiveTheSameDigest(t *testing.T) {
	src := newTestNodes(t)
	src.startN(3)
	srcLeader := src.leader()
	for i := 0; i < 25; i++ {
		if a := nodetest.ClaimUntilDefinite(t, []string{srcLeader.HTTPAddr()}, 0, fmt.Sprintf("backup:%d", i), "o1"); a.Code != http.StatusCreated {
			t.Fatalf("claim: %+v", a)
		}
	}
	var follower *Node
	for _, m := range src.mains {
		if m != srcLeader {
			follower = m
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Through a follower without discovery: the node forwards to the leader.
	cl, err := client.New([]string{follower.HTTPAddr()}, client.WithDiscovery(false))
	if err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	info, err := cl.SaveSnapshot(ctx, &snap)
	if err != nil {
		t.Fatalf("save: %v", err)
	}
	want := digestOf(t, srcLeader)
	if info.Intents != 25 || info.Bytes != int64(snap.Len()) {
		t.Fatalf("save answered %+v for %d bytes", info, snap.Len())
	}

	dst := newTestNodes(t)
	dst.startN(3)
	var dstFollower *Node
	for _, m := range dst.mains {
		if !m.Cluster().IsLeader() {
			dstFollower = m
		}
	}
	dcl, err := client.New([]string{dstFollower.HTTPAddr()}, client.WithDiscovery(false))
	if err != nil {
		t.Fatal(err)
	}
	var p *client.Problem
	if _, err := dcl.RestoreSnapshot(ctx, []byte("{}\n"), false); !errors.As(err, &p) || p.Code != "bad_snapshot" || p.Status != 422 {
		t.Fatalf("garbage restore: %v", err)
	}
	got, err := dcl.RestoreSnapshot(ctx, snap.Bytes(), false)
	if err != nil {
		t.Fatalf("restore through a follower: %v", err)
	}
	if got.Digest != want || got.Intents != 25 {
		t.Fatalf("restore answered %+v, want digest %s", got, want)
	}
	nodetest.WaitFor(t, 30*time.Second, "every node of the new cluster to hold the source's digest", func() bool {
		for _, m := range dst.mains {
			if digestOf(t, m) != want {
				return false
			}
		}
		return true
	})
	for i := 0; i < 25; i += 8 {
		a := nodetest.GetUntilDefinite(t, dstFollower.HTTPAddr(), fmt.Sprintf("/v1/intents/backup:%d", i))
		if a.Code != 200 || a.Body["owner"] != "o1" {
			t.Fatalf("read backup:%d after restore: %+v", i, a)
		}
	}
	if _, err := dcl.RestoreSnapshot(ctx, snap.Bytes(), false); !errors.As(err, &p) || p.Code != "not_empty" || p.Status != 409 {
		t.Fatalf("second restore: %v", err)
	}
}

// TestRollingRestartLosesNoAcknowledgedWrite restarts every node in turn
// (graceful shutdown with leave-on-terminate off, then a start on the same
// addresses and data) while a client keeps claiming. Every claim must
// eventually be acknowledged within the retry budget, and every
// acknowledged claim must be readable afterwards. The longest stretch
// without an acknowledgement is reported, not asserted.
func TestRollingRestartLosesNoAcknowledgedWrite(t *testing.T) {
	tn := newTestNodes(t)
	keep := func(c *Config) { c.LeaveOnTerminate = false }
	tn.startThree(keep)
	tn.waitReady()
	var urls []string
	for _, id := range []string{"n1", "n2", "n3"} {
		urls = append(urls, tn.mains[id].HTTPAddr())
	}
	cl, err := client.New(urls, client.WithBackoff(20*time.Millisecond, 250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}

	type ack struct {
		key   string
		token uint64
	}
	var (
		mu       sync.Mutex
		acks     []ack
		lastAck  = time.Now()
		longest  time.Duration
		loadErr  error
		stop     = make(chan struct{})
		loadDone = make(chan struct{})
	)
	go func() {
		defer close(loadDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprintf("rolling:%d", i)
			// The retry budget: the same claim (same key, owner, payload)
			// is repeated until it is answered definitely.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			var r *client.ClaimResponse
			var err error
			for ctx.Err() == nil {
				r, err = cl.Claim(ctx, client.ClaimRequest{Key: key, Tool: "t", Owner: "o-" + key, Payload: json.RawMessage(`{"i":1}`)})
				if err == nil || !(errors.Is(err, client.ErrOutcomeUnknown) || errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrNoLeader)) {
					break
				}
			}
			cancel()
			if err != nil {
				mu.Lock()
				loadErr = fmt.Errorf("claim %s never succeeded within the retry budget: %w", key, err)
				mu.Unlock()
				return
			}
			mu.Lock()
			now := time.Now()
			longest = max(longest, now.Sub(lastAck))
			lastAck = now
			acks = append(acks, ack{key, r.FencingToken})
			mu.Unlock()
		}
	}()
	acked := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	loadFailed := func() error { mu.Lock(); defer mu.Unlock(); return loadErr }

	for _, id := range []string{"n1", "n2", "n3"} {
		before := acked()
		nodetest.WaitFor(t, 30*time.Second, "claims before restarting "+id, func() bool { return acked() >= before+10 || loadFailed() != nil })
		old := tn.mains[id]
		addrs := [3]string{old.HTTPAddr(), old.Cluster().RaftAddr(), old.Cluster().GossipAddr()}
		wasLeader := old.Cluster().IsLeader()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := old.Shutdown(ctx); err != nil {
			t.Errorf("graceful shutdown of %s: %v", id, err)
		}
		cancel()
		delete(tn.mains, id)
		restartedAt := time.Now()
		tn.startCfg(id, 3, addrs, keep)
		tn.waitReady()
		t.Logf("restarted %s (was leader: %v); cluster ready again %v after its start", id, wasLeader, time.Since(restartedAt).Round(time.Millisecond))
		if err := loadFailed(); err != nil {
			t.Fatal(err)
		}
	}
	after := acked()
	nodetest.WaitFor(t, 30*time.Second, "claims after the last restart", func() bool { return acked() >= after+10 || loadFailed() != nil })
	close(stop)
	<-loadDone
	if err := loadFailed(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	all := append([]ack(nil), acks...)
	gap := longest
	mu.Unlock()
	t.Logf("acknowledged %d claims across 3 rolling restarts; longest stretch without an acknowledgement: %v", len(all), gap.Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, a := range all {
		in, err := cl.Get(ctx, a.key, client.GetOptions{})
		if err != nil {
			t.Fatalf("acknowledged claim %s lost: %v", a.key, err)
		}
		if in.FencingToken != a.token || in.Owner != "o-"+a.key {
			t.Fatalf("acknowledged claim %s: token %d owner %q, acknowledged token %d", a.key, in.FencingToken, in.Owner, a.token)
		}
	}
}
