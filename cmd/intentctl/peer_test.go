package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// peerCluster is fakeCluster that removes "n2", refuses the leader n1, and
// moves leadership to n2.
type peerCluster struct {
	fakeCluster
	removed, to []string
}

func (p *peerCluster) RemovePeer(_ context.Context, id string) error {
	switch id {
	case "n2":
		p.removed = append(p.removed, id)
		return nil
	case "n1":
		return fmt.Errorf("%w (n1 leads)", cluster.ErrRemoveLeader)
	}
	return fmt.Errorf("%w: %q", cluster.ErrUnknownPeer, id)
}

func (p *peerCluster) TransferLeadership(_ context.Context, to string) (string, error) {
	p.to = append(p.to, to)
	return "n2", nil
}

func TestPeerRemoveAndLeaderTransfer(t *testing.T) {
	pc := &peerCluster{}
	e := newEnv(t, clienttest.WithCluster(pc))
	expect(t, e.run(t, "peer", "remove", "n2"), exitOK, "removed n2")
	if r := e.run(t, "peer", "remove", "n1"); r.code == exitOK || !strings.Contains(r.stderr, "transfer leadership first") {
		t.Fatalf("removing the leader: %s", r)
	}
	if r := e.run(t, "peer", "remove", "n9"); r.code == exitOK || !strings.Contains(r.stderr, "unknown_peer") {
		t.Fatalf("removing an unknown node: %s", r)
	}
	expect(t, e.run(t, "peer", "remove"), exitUsage)
	expect(t, e.run(t, "leader", "transfer", "--to", "n2"), exitOK, "the leader is n2")
	expect(t, e.run(t, "leader", "transfer", "--output", "json"), exitOK, `"leader_id": "n2"`)
	if fmt.Sprint(pc.removed) != "[n2]" || fmt.Sprint(pc.to) != "[n2 ]" {
		t.Fatalf("removed %q, transferred to %q", pc.removed, pc.to)
	}
}
