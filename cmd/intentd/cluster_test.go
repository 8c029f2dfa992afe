package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"
)

// testNodes runs Mains in-process on loopback with ports chosen by the OS.
type testNodes struct {
	t     *testing.T
	dir   string
	mains map[string]*Main
}

func newTestNodes(t *testing.T) *testNodes {
	tn := &testNodes{t: t, dir: t.TempDir(), mains: map[string]*Main{}}
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

func (tn *testNodes) start(id string, expect int, join ...string) *Main {
	tn.t.Helper()
	return tn.startCfg(id, expect, anyAddrs, nil, join...)
}

func (tn *testNodes) startN(n int) []*Main {
	first := tn.start("n1", n)
	out := []*Main{first}
	for i := 2; i <= n; i++ {
		out = append(out, tn.start(fmt.Sprintf("n%d", i), n, first.Node().GossipAddr()))
	}
	tn.waitReady()
	return out
}

// waitReady waits until every running node answers /readyz with 200.
func (tn *testNodes) waitReady() {
	tn.t.Helper()
	waitFor(tn.t, 30*time.Second, "all nodes ready", func() bool {
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

func (tn *testNodes) leader() *Main {
	for _, m := range tn.mains {
		if m.Node().IsLeader() {
			return m
		}
	}
	return nil
}

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type answer struct {
	code int
	body map[string]any
}

// send makes one request (a JSON body unless body is nil) and decodes the
// JSON answer.
func send(method, addr, path string, body any) (answer, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		return answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return answer{resp.StatusCode, out}, nil
}

func post(addr, path string, body any) (answer, error) {
	return send(http.MethodPost, addr, path, body)
}
func get(addr, path string) (answer, error) { return send(http.MethodGet, addr, path, nil) }

// untilDefinite sends the same request (safe: every command is
// idempotent) while the answer is 503 or the connection fails, rotating
// through addrs from start, and reports whether an answer came.
func untilDefinite(method string, addrs []string, start int, path string, body any) (answer, bool) {
	for attempt := 0; attempt < 200; attempt++ {
		a, err := send(method, addrs[(start+attempt)%len(addrs)], path, body)
		if err == nil && a.code != http.StatusServiceUnavailable {
			return a, true
		}
		time.Sleep(50 * time.Millisecond) // client backoff between retries
	}
	return answer{}, false
}

// claimUntilDefinite claims until the answer is definite. It may run on
// another goroutine than the test's, so it only marks the test failed.
func claimUntilDefinite(t *testing.T, addrs []string, start int, key, owner string) answer {
	a, ok := untilDefinite(http.MethodPost, addrs, start, "/v1/intents", map[string]any{
		"key": key, "tool": "test.tool", "owner": owner, "payload": map[string]any{"key": key, "n": 1}})
	if !ok {
		t.Errorf("claim %s by %s: no definite answer", key, owner)
	}
	return a
}

// getUntilDefinite retries a read while the node answers 503.
func getUntilDefinite(t *testing.T, addr, path string) answer {
	a, ok := untilDefinite(http.MethodGet, []string{addr}, 0, path, nil)
	if !ok {
		t.Errorf("GET %s: no definite answer", path)
	}
	return a
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
				a := claimUntilDefinite(t, addrs, c+k, key, owner)
				mu.Lock()
				statuses[a.code]++
				if a.code == http.StatusCreated {
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
		a, err := get(addrs[k%3], "/v1/intents/"+key)
		if err != nil || a.code != 200 || intentOf(a.body)["owner"] != grants[key][0] {
			t.Errorf("%s read back %d %v, want owner %s", key, a.code, a.body, grants[key][0])
		}
	}
	if statuses[http.StatusCreated] != keys || statuses[http.StatusConflict] == 0 {
		t.Errorf("statuses = %v", statuses)
	}
	t.Logf("statuses: %v", statuses)
}

// intentOf returns the intent of an answer: GET answers are the intent,
// write answers wrap it under "intent".
func intentOf(body map[string]any) map[string]any {
	if in, ok := body["intent"].(map[string]any); ok {
		return in
	}
	return body
}

func TestKillLeaderNewLeaderServesAcknowledgedWrites(t *testing.T) {
	tn := newTestNodes(t)
	tn.startN(3)
	leader := tn.leader()
	var others []string
	for _, m := range tn.mains {
		if m != leader {
			others = append(others, m.HTTPAddr())
		}
	}
	acked := map[string]float64{}
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("ack:%d", i)
		a := claimUntilDefinite(t, others, i, key, "owner-a")
		if a.code != http.StatusCreated {
			t.Fatalf("claim %s: %d %v", key, a.code, a.body)
		}
		acked[key] = a.body["fencing_token"].(float64)
		if i%2 == 0 {
			c, err := post(others[i%2], "/v1/intents/"+key+"/complete", map[string]any{
				"owner": "owner-a", "fencing_token": acked[key], "outcome": "executed", "result": map[string]any{"ok": i}})
			if err != nil || c.code != 200 {
				t.Fatalf("complete %s: %v %v", key, c, err)
			}
		}
	}
	leader.Kill()
	delete(tn.mains, leader.cfg.ID)
	waitFor(t, 30*time.Second, "a new leader", func() bool { return tn.leader() != nil })
	tn.waitReady()
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("ack:%d", i)
		a := getUntilDefinite(t, others[i%2], "/v1/intents/"+key)
		if a.code != 200 {
			t.Fatalf("get %s after failover: %v", key, a)
		}
		wantState := "declared"
		if i%2 == 0 {
			wantState = "executed"
		}
		if in := intentOf(a.body); in["state"] != wantState || in["fencing_token"] != acked[key] {
			t.Errorf("%s after failover = %v, want state %s fencing token %v", key, a.body, wantState, acked[key])
		}
		// A duplicate delivery gets the recorded result; nothing runs again.
		if i%2 == 0 {
			d := claimUntilDefinite(t, others, i, key, "owner-b")
			if d.code != 200 || d.body["status"] != "duplicate" {
				t.Errorf("duplicate of %s after failover: %d %v", key, d.code, d.body)
			}
		}
	}
}

func TestTestHooksDigestsAgreeAndClockOffsetSkewsStamps(t *testing.T) {
	tn := newTestNodes(t)
	nodes := tn.startN(3)
	addrs := []string{nodes[0].HTTPAddr(), nodes[1].HTTPAddr(), nodes[2].HTTPAddr()}
	for i := 0; i < 10; i++ {
		claimUntilDefinite(t, addrs, i, fmt.Sprintf("digest:%d", i), "o")
	}
	waitFor(t, 30*time.Second, "equal replica digests", func() bool {
		var first string
		for _, a := range addrs {
			d, err := get(a, "/debug/digest")
			if err != nil || d.code != 200 {
				return false
			}
			if first == "" {
				first = d.body["digest"].(string)
			} else if d.body["digest"] != first {
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
	a := claimUntilDefinite(t, []string{leader}, 0, "skewed", "o")
	created, err := time.Parse(time.RFC3339Nano, intentOf(a.body)["created_at"].(string))
	if err != nil || time.Until(created) < 30*time.Minute {
		t.Fatalf("created_at %v with a +1h clock offset (err %v)", created, err)
	}
}
