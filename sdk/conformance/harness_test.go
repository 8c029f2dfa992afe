package conformance

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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

// The namespace and key names of the harness's cluster.
const (
	namespace    = "conformance"
	agentName    = "conformance-agent"
	approverName = "conformance-approver"
	adminName    = "conformance-admin"
	// approvalPolicy holds tools conformance.approve.* for one approval.
	approvalPolicy = "conformance-approval"
)

// startLimit bounds how long the cluster may take to form or recover: a
// hang guard, not a performance threshold.
const startLimit = 60 * time.Second

// harness is a three-node cluster of real intentd processes with auth on,
// and the control server runners use to kill and restart its leader.
type harness struct {
	t                     *testing.T
	procs                 []*nodetest.Proc
	addrs                 []string // http://host:port
	agentKey, approverKey string
	adminKey              string
	control               *httptest.Server
	mu                    sync.Mutex
	killed                []*nodetest.Proc
}

// startHarness builds intentd, starts the cluster and waits until it is
// ready, then installs the approval policy and starts the control server.
func startHarness(t *testing.T) *harness {
	t.Helper()
	bin := nodetest.IntentdBinary(t)
	h := &harness{t: t}
	dir := t.TempDir()
	keysFile := filepath.Join(dir, "keys.json")
	var keys []auth.KeyConfig
	for _, k := range []struct {
		name string
		role auth.Role
		dst  *string
	}{{agentName, auth.RoleAgent, &h.agentKey}, {approverName, auth.RoleApprover, &h.approverKey}, {adminName, auth.RoleAdmin, &h.adminKey}} {
		plain, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		*k.dst = plain
		keys = append(keys, auth.KeyConfig{Name: k.name, Namespace: namespace, Roles: []auth.Role{k.role}, SHA256: sum})
	}
	b, err := json.Marshal(auth.FileConfig{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keysFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	gossipKey := make([]byte, 32)
	if _, err := rand.Read(gossipKey); err != nil {
		t.Fatal(err)
	}
	common := []string{"--bootstrap-expect", "3", "--api-keys-file", keysFile,
		"--gossip-key", base64.StdEncoding.EncodeToString(gossipKey),
		"--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms", "--shutdown-timeout", "5s"}
	first := nodetest.StartProc(t, bin, dir, "n1", common...)
	h.procs = append(h.procs, first)
	for _, id := range []string{"n2", "n3"} {
		h.procs = append(h.procs, nodetest.StartProc(t, bin, dir, id, append(common, "--join", first.Gossip)...))
	}
	for _, p := range h.procs {
		h.addrs = append(h.addrs, "http://"+p.HTTP)
	}
	h.waitReady()
	admin, err := client.New(h.addrs, client.WithAPIKey(h.adminKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startLimit)
	defer cancel()
	if _, err := admin.PutPolicy(ctx, client.Policy{Name: approvalPolicy, Tools: []string{"conformance.approve.*"},
		RequireApproval: true, ApprovalsRequired: 1, Approvers: []string{approverName}}, 0); err != nil {
		t.Fatalf("approval policy: %v", err)
	}
	h.control = httptest.NewServer(h.controlHandler())
	t.Cleanup(h.control.Close)
	return h
}

// waitReady waits until every running node is ready and one leads.
func (h *harness) waitReady() {
	h.t.Helper()
	nodetest.WaitFor(h.t, startLimit, "every node ready", func() bool {
		for _, p := range h.procs {
			if !nodetest.Ready(p.HTTP) {
				return false
			}
		}
		return nodetest.LeaderHTTP(h.procs[0].HTTP, h.agentKey) != ""
	})
}

// controlHandler serves the calls of README.md's control server.
func (h *harness) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /kill-leader", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		leader := h.leader()
		if leader == nil {
			http.Error(w, "no leader known", http.StatusServiceUnavailable)
			return
		}
		leader.Kill()
		h.killed = append(h.killed, leader)
		writeJSON(w, map[string]string{"killed": leader.ID})
	})
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, p := range h.killed {
			p.Start(h.t)
		}
		h.killed = nil
		deadline := time.Now().Add(startLimit)
		for !h.allReady() {
			if time.Now().After(deadline) {
				http.Error(w, "the cluster did not recover", http.StatusServiceUnavailable)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		writeJSON(w, map[string]bool{"ready": true})
	})
	mux.HandleFunc("GET /rate-limited", func(w http.ResponseWriter, r *http.Request) {
		total := 0.0
		for _, p := range h.procs {
			if n := nodetest.MetricSum(p.HTTP, "intentd_http_rate_limited_total"); n > 0 {
				total += n
			}
		}
		writeJSON(w, map[string]int{"count": int(total)})
	})
	return mux
}

// leader returns the process that leads now, as a live node sees it.
func (h *harness) leader() *nodetest.Proc {
	for _, p := range h.procs {
		if l := nodetest.LeaderHTTP(p.HTTP, h.agentKey); l != "" {
			for _, q := range h.procs {
				if q.HTTP == l {
					return q
				}
			}
		}
	}
	return nil
}

func (h *harness) allReady() bool {
	for _, p := range h.procs {
		if !nodetest.Ready(p.HTTP) {
			return false
		}
	}
	return h.leader() != nil
}

// env is what a runner gets (README.md, "What a runner gets").
func (h *harness) env(run string) []string {
	abs := func(name string) string {
		p, err := filepath.Abs(name)
		if err != nil {
			h.t.Fatal(err)
		}
		return p
	}
	return []string{
		"INTENTD_ADDRS=" + strings.Join(h.addrs, ","),
		"INTENTD_API_KEY=" + h.agentKey,
		"INTENTD_APPROVER_KEY=" + h.approverKey,
		"INTENTD_CONTROL=" + h.control.URL,
		"INTENTD_RUN=" + run,
		"INTENTD_SCENARIOS=" + abs("scenarios.json"),
		"INTENTD_KEY_VECTORS=" + abs("key-vectors.json"),
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// runID is a prefix no other run shares.
func runID(sdk string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%x", sdk, b)
}
