package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/intentledger/intentd/client"
)

func TestPolicies(t *testing.T) {
	n := newNode(t)
	c := newClient(t, []string{n.srv.URL}, client.WithRetries(0))
	ctx := context.Background()

	p, err := c.PutPolicy(ctx, client.Policy{Name: "refunds", Tools: []string{"payments.refund"}, RequireApproval: true,
		ApprovalsRequired: 2, Approvers: []string{"alice", "bob"}, LeaseMS: 60_000}, 0)
	if err != nil || p.Name != "refunds" || p.Version == 0 || p.ApprovalsRequired != 2 || p.LeaseMS != 60_000 {
		t.Fatalf("put policy = %+v, %v", p, err)
	}
	got, err := c.Policy(ctx, "refunds")
	if err != nil || got.Version != p.Version || !slices.Equal(got.Approvers, []string{"alice", "bob"}) {
		t.Fatalf("policy = %+v, %v", got, err)
	}
	all, err := c.Policies(ctx)
	if err != nil || !slices.ContainsFunc(all, func(q client.Policy) bool { return q.Name == "refunds" }) {
		t.Fatalf("policies = %+v, %v", all, err)
	}

	// Compare-and-set.
	if _, err := c.PutPolicy(ctx, client.Policy{Name: "refunds", Tools: []string{"payments.refund"}, Blocked: true}, p.Version+100); !errors.Is(err, client.ErrInvalidState) {
		t.Errorf("put at a stale version: %v, want ErrInvalidState", err)
	}
	blocked, err := c.PutPolicy(ctx, client.Policy{Name: "refunds", Tools: []string{"payments.refund"}, Blocked: true}, p.Version)
	if err != nil || !blocked.Blocked || blocked.Version <= p.Version {
		t.Fatalf("put at the current version = %+v, %v", blocked, err)
	}
	if _, err := c.Claim(ctx, client.ClaimRequest{Key: "refund:1", Tool: "payments.refund", Payload: []byte(`{}`)}); !errors.Is(err, client.ErrBlocked) {
		t.Errorf("claim under a blocked policy: %v, want ErrBlocked", err)
	}

	if err := c.DeletePolicy(ctx, "refunds"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Policy(ctx, "refunds"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleted policy: %v, want ErrNotFound", err)
	}
	if err := c.DeletePolicy(ctx, "refunds"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}

	before := n.hits.Load()
	if _, err := c.PutPolicy(ctx, client.Policy{Tools: []string{"x.*"}}, 0); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("policy without a name: %v, want ErrBadRequest", err)
	}
	if _, err := c.PutPolicy(ctx, client.Policy{Name: "bad", Tools: []string{"[x"}}, 0); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("bad tool pattern: %v, want ErrBadRequest", err)
	}
	if n.hits.Load() != before+1 {
		t.Errorf("%d requests, want 1: a policy without a name is refused before sending", n.hits.Load()-before)
	}
}
