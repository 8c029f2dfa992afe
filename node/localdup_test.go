package node

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// claimAt sends a claim to one node and returns its status code, the
// answer and the local-answer header.
func claimAt(t *testing.T, addr string, body map[string]any) (int, map[string]any, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post("http://"+addr+"/v1/intents", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("claim at %s: %v", addr, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, resp.Header.Get(httpapi.HeaderLocalAnswer)
}

func TestFollowerAnswersDuplicatesLocallyAndNotesThem(t *testing.T) {
	tn := newTestNodes(t)
	local := func(c *Config) { c.LocalDuplicates = true }
	tn.startThree(local)
	tn.waitReady()
	leader := tn.leader()
	var follower *Node
	for _, m := range tn.mains {
		if m != leader {
			follower = m
			break
		}
	}
	claim := func(key, owner string, amount int) map[string]any {
		return map[string]any{"key": key, "tool": "pay.charge", "owner": owner, "payload": map[string]any{"amount": amount}}
	}

	// The effect runs once, through the leader.
	code, body, _ := claimAt(t, leader.HTTPAddr(), claim("k1", "a", 5))
	if code != http.StatusCreated {
		t.Fatalf("first claim: %d %v", code, body)
	}
	done := postUntilDefinite(t, []string{leader.HTTPAddr()}, "/v1/intents/k1/complete",
		map[string]any{"owner": "a", "fencing_token": body["fencing_token"], "outcome": "executed", "result": map[string]any{"charge": "ch_1"}})
	if done.Code != http.StatusOK {
		t.Fatalf("complete: %d %v", done.Code, done.Body)
	}
	nodetest.WaitFor(t, 30*time.Second, "the follower to apply the report", func() bool {
		a, err := nodetest.Get(follower.HTTPAddr(), "/v1/intents/k1?consistency=stale")
		return err == nil && a.Code == http.StatusOK && nodetest.IntentOf(a.Body)["state"] == "executed"
	})

	// The retry reaches the follower: answered there, with the result.
	code, body, by := claimAt(t, follower.HTTPAddr(), claim("k1", "b", 5))
	if code != http.StatusOK || body["status"] != "duplicate" || by != follower.cfg.ID {
		t.Fatalf("duplicate at the follower: %d %v, answered by %q", code, body, by)
	}
	if res, _ := nodetest.IntentOf(body)["result"].(map[string]any); res["charge"] != "ch_1" {
		t.Fatalf("the local answer lacks the recorded result: %v", body)
	}
	if n := nodetest.MetricSum(follower.HTTPAddr(), `intentd_local_duplicate_claims_total{outcome="answered"}`); n != 1 {
		t.Errorf("answered metric %v, want 1", n)
	}

	// Its note reaches the leader: the key's trail records the duplicate.
	nodetest.WaitFor(t, 30*time.Second, "the note in the key's audit trail", func() bool {
		a, err := nodetest.Get(leader.HTTPAddr(), "/v1/intents/k1")
		if err != nil || a.Code != http.StatusOK || nodetest.IntentOf(a.Body)["duplicates"] != 1.0 {
			return false
		}
		tr, err := nodetest.Get(leader.HTTPAddr(), "/v1/intents/k1/audit")
		if err != nil || tr.Code != http.StatusOK {
			return false
		}
		audit, _ := tr.Body["events"].([]any)
		if len(audit) == 0 {
			return false
		}
		last, _ := audit[len(audit)-1].(map[string]any)
		reason, _ := last["reason"].(string)
		return last["status"] == "duplicate" && last["owner"] == "b" && strings.Contains(reason, "node "+follower.cfg.ID)
	})

	// Everything else goes to the leader: another payload (divergent),
	// a key still running, and any claim sent to the leader itself.
	if code, body, by := claimAt(t, follower.HTTPAddr(), claim("k1", "b", 6)); by != "" || body["code"] != "divergent" && body["status"] != "divergent" {
		t.Errorf("divergent at the follower: %d %v, answered by %q", code, body, by)
	}
	if code, body, _ := claimAt(t, leader.HTTPAddr(), claim("k2", "a", 1)); code != http.StatusCreated {
		t.Fatalf("claim k2: %d %v", code, body)
	}
	nodetest.WaitFor(t, 30*time.Second, "the follower to apply k2", func() bool {
		a, err := nodetest.Get(follower.HTTPAddr(), "/v1/intents/k2?consistency=stale")
		return err == nil && a.Code == http.StatusOK
	})
	if code, body, by := claimAt(t, follower.HTTPAddr(), claim("k2", "b", 1)); by != "" || code == http.StatusOK {
		t.Errorf("a claim of a running key at the follower: %d %v, answered by %q", code, body, by)
	}
	if code, body, by := claimAt(t, leader.HTTPAddr(), claim("k1", "c", 5)); code != http.StatusOK || body["status"] != "duplicate" || by != "" {
		t.Errorf("duplicate at the leader: %d %v, answered by %q", code, body, by)
	}
	// The leader has the note; the follower counts it once its proposal returns.
	nodetest.WaitFor(t, 30*time.Second, "the noted metric", func() bool {
		return nodetest.MetricSum(follower.HTTPAddr(), `intentd_local_duplicate_notes_total{outcome="noted"}`) == 1
	})
}
