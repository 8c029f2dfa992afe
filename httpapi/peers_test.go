package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/intentledger/intentd/clusterview"
	"github.com/intentledger/intentd/ledger"
)

// fakePeers is a cluster that answers the membership calls: as a leader
// (notLeader nil) that removes "dead" and refuses the rest as
// cluster.Node does, or as a follower naming the leader notLeader.
type fakePeers struct {
	fakeCluster
	notLeader *ledger.NotLeaderError
	mu        sync.Mutex
	removed   []string
	to        []string
}

func (f *fakePeers) RemovePeer(_ context.Context, id string) error {
	if f.notLeader != nil {
		return f.notLeader
	}
	switch id {
	case "n1":
		return fmt.Errorf("%w (n1 leads)", clusterview.ErrRemoveLeader)
	case "live":
		return fmt.Errorf("%w: without live, 1 of 2 voters answer", clusterview.ErrNoLiveMajority)
	case "dead":
		f.mu.Lock()
		defer f.mu.Unlock()
		f.removed = append(f.removed, id)
		return nil
	}
	return fmt.Errorf("%w: %q", clusterview.ErrUnknownPeer, id)
}

func (f *fakePeers) TransferLeadership(_ context.Context, to string) (string, error) {
	if f.notLeader != nil {
		return "", f.notLeader
	}
	switch to {
	case "", "n2":
		f.mu.Lock()
		defer f.mu.Unlock()
		f.to = append(f.to, to)
		return "n2", nil
	case "replica":
		return "", fmt.Errorf("%w: %q is a Nonvoter", clusterview.ErrNotVoter, to)
	}
	return "", fmt.Errorf("%w: %q", clusterview.ErrUnknownPeer, to)
}

func withPeers(f *fakePeers) envOption { return func(c *Config) { c.Cluster = f } }

// The leader removes a server and refuses the leader itself (409), an
// unknown node (404) and a removal without a live majority (409); it
// transfers leadership to a named voter or any voter, and refuses an
// unknown target or a nonvoter. A follower forwards both to the leader.
func TestPeerEndpoints(t *testing.T) {
	leader := &fakePeers{}
	le := newEnv(t, withPeers(leader))
	for _, tc := range []struct {
		path   string
		body   any
		status int
		code   string
	}{
		{"/v1/cluster/peers/dead/remove", nil, http.StatusOK, ""},
		{"/v1/cluster/peers/n1/remove", nil, http.StatusConflict, CodePeerIsLeader},
		{"/v1/cluster/peers/nope/remove", nil, http.StatusNotFound, CodeUnknownPeer},
		{"/v1/cluster/peers/live/remove", nil, http.StatusConflict, CodeNoLiveMajority},
		{"/v1/cluster/leader/transfer", nil, http.StatusOK, ""},
		{"/v1/cluster/leader/transfer", map[string]string{"to": "n2"}, http.StatusOK, ""},
		{"/v1/cluster/leader/transfer", map[string]string{"to": "nope"}, http.StatusNotFound, CodeUnknownPeer},
		{"/v1/cluster/leader/transfer", map[string]string{"to": "replica"}, http.StatusConflict, CodeNotVoter},
		{"/v1/cluster/leader/transfer", map[string]string{"too": "n2"}, http.StatusBadRequest, CodeBadRequest},
	} {
		r := le.do(t, http.MethodPost, tc.path, tc.body)
		if tc.code == "" {
			if r.status != tc.status {
				t.Errorf("POST %s %v = %s, want %d", tc.path, tc.body, r, tc.status)
			}
			continue
		}
		problemOf(t, r, tc.status, tc.code)
	}
	if fmt.Sprint(leader.removed) != "[dead]" || fmt.Sprint(leader.to) != "[ n2]" {
		t.Fatalf("removed %q, transferred to %q", leader.removed, leader.to)
	}
	r := le.do(t, http.MethodPost, "/v1/cluster/leader/transfer", map[string]string{"to": "n2"})
	var out map[string]string
	if err := json.Unmarshal(r.body, &out); err != nil || out["leader_id"] != "n2" {
		t.Fatalf("transfer answer %s (%v), want leader_id n2", r, err)
	}

	follower := &fakePeers{notLeader: &ledger.NotLeaderError{LeaderID: "n1", LeaderHTTP: le.srv.URL}}
	fe := newEnv(t, withPeers(follower))
	if r := fe.do(t, http.MethodPost, "/v1/cluster/peers/dead/remove", nil); r.status != http.StatusOK {
		t.Fatalf("removal through a follower = %s, want the leader's 200", r)
	}
	if r := fe.do(t, http.MethodPost, "/v1/cluster/leader/transfer", map[string]string{"to": "n2"}); r.status != http.StatusOK {
		t.Fatalf("transfer through a follower = %s, want the leader's 200", r)
	}
	if len(leader.removed) != 2 || len(leader.to) != 4 {
		t.Fatalf("the leader saw removals %q, transfers %q: the follower did not forward", leader.removed, leader.to)
	}
	// A follower that knows no leader address answers 503, never forwards.
	lost := &fakePeers{notLeader: &ledger.NotLeaderError{LeaderID: "n1"}}
	problemOf(t, newEnv(t, withPeers(lost)).do(t, http.MethodPost, "/v1/cluster/peers/dead/remove", nil),
		http.StatusServiceUnavailable, CodeNoLeader)
}
