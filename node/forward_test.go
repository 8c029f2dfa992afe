package node

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestExecutionTokenIsTheSameWhereverItIsSigned: the node a claim reaches
// signs its execution token (a follower forwards only the command), with
// the replicated key the grant names, so the same grant answered by any
// node carries the same token, byte for byte: for the cluster's first
// grant (its first key added through a follower) and for a grant right
// after a key rotation (a follower may not have applied the new key when
// the leader answers).
func TestExecutionTokenIsTheSameWhereverItIsSigned(t *testing.T) {
	tn := newTestNodes(t)
	tn.startN(3)
	leader := tn.leader()
	var followers []*Node
	for _, m := range tn.mains {
		if m != leader {
			followers = append(followers, m)
		}
	}
	order := []*Node{followers[0], leader, followers[1]}
	claimEverywhere := func(key string) string {
		t.Helper()
		var first string
		for i, m := range order {
			a, err := nodetest.Post(m.HTTPAddr(), "/v1/intents", map[string]any{
				"key": key, "tool": "test.tool", "owner": "o", "payload": map[string]any{"key": key}})
			want := http.StatusOK // the grant again, to its owner
			if i == 0 {
				want = http.StatusCreated
			}
			if err != nil || a.Code != want {
				t.Fatalf("claim %s on %s: %d %v (%v)", key, m.cfg.ID, a.Code, a.Body, err)
			}
			tok, _ := a.Body["execution_token"].(string)
			if tok == "" {
				t.Fatalf("claim %s on %s: no token in %v", key, m.cfg.ID, a.Body)
			}
			if i == 0 {
				first = tok
			} else if tok != first {
				t.Fatalf("claim %s: %s signed\n%s\n%s signed\n%s", key, order[0].cfg.ID, first, m.cfg.ID, tok)
			}
		}
		return first
	}

	claimEverywhere("first-grant")
	if n := followers[0].Cluster().Stats().Forwarded; n == 0 {
		t.Fatal("the follower forwarded no command: its claim did not take the forwarding path")
	}

	a, err := nodetest.Post(followers[1].HTTPAddr(), "/v1/keys/rotate", map[string]any{})
	if err != nil || a.Code != http.StatusOK {
		t.Fatalf("rotate through a follower: %d %v (%v)", a.Code, a.Body, err)
	}
	kid, _ := a.Body["kid"].(string)
	tok := claimEverywhere("after-rotation")
	if got := kidOf(t, tok); got != kid {
		t.Fatalf("token signed by %q, want the rotated key %q", got, kid)
	}
}

// kidOf returns the key id in an execution token's header.
func kidOf(t *testing.T, tok string) string {
	t.Helper()
	head, _, _ := strings.Cut(strings.TrimPrefix(tok, "gex_"), ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		t.Fatalf("token header: %v", err)
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatalf("token header: %v", err)
	}
	return h.Kid
}
