package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// TestCallerReachesTheStateMachine: the service hands the caller of a
// claim, complete, renew and commit to the state machine, which binds the
// grant to the claiming key and refuses another key's reports unless it
// may settle any grant. A caller with an impossible principal is bad
// input, refused before anything is proposed.
func TestCallerReachesTheStateMachine(t *testing.T) {
	ctx := context.Background()
	s, m := newService(t, ledger.Limits{})
	req := claimReq(key, owner, `{"order":"ord_98231"}`)
	req.Principal = "agents-a"
	g := mustClaim(t, s, req, fsm.StatusGranted)
	eq(t, "Principal", g.Intent.Principal, "agents-a")
	token := g.Intent.FencingToken
	bob := ledger.Caller{Principal: "agents-b"}
	reconciler := ledger.Caller{Principal: "ops", Override: true}
	alice := ledger.Caller{Principal: "agents-a"}

	for _, tc := range []struct {
		name string
		call func() (*fsm.Result, error)
		want fsm.Status
	}{
		{"renew by another key", func() (*fsm.Result, error) {
			return s.Renew(ctx, ledger.RenewRequest{Key: key, Owner: owner, FencingToken: token, Lease: 5e9, Caller: bob})
		}, fsm.StatusNotGrantHolder},
		{"renew by a reconciler", func() (*fsm.Result, error) {
			return s.Renew(ctx, ledger.RenewRequest{Key: key, Owner: owner, FencingToken: token, Lease: 5e9, Caller: reconciler})
		}, fsm.StatusOK},
		{"complete by another key", func() (*fsm.Result, error) {
			return s.Complete(ctx, ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: token,
				Outcome: fsm.OutcomeFailed, Caller: bob})
		}, fsm.StatusNotGrantHolder},
		{"complete by the claiming key", func() (*fsm.Result, error) {
			return s.Complete(ctx, ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: token,
				Outcome: fsm.OutcomeExecuted, Caller: alice})
		}, fsm.StatusOK},
		{"commit by another key", func() (*fsm.Result, error) {
			return s.Commit(ctx, ledger.CommitRequest{Key: key, Owner: owner, Caller: bob})
		}, fsm.StatusNotGrantHolder},
		{"commit by a reconciler", func() (*fsm.Result, error) {
			return s.Commit(ctx, ledger.CommitRequest{Key: key, Owner: owner, Caller: reconciler})
		}, fsm.StatusOK},
	} {
		r, err := tc.call()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Status != tc.want {
			t.Fatalf("%s: %s (%s), want %s", tc.name, r.Status, r.Detail, tc.want)
		}
		if tc.want == fsm.StatusNotGrantHolder && !errors.Is(r.Err(), fsm.ErrNotGrantHolder) {
			t.Fatalf("%s: Err() = %v", tc.name, r.Err())
		}
	}

	before := m.Proposed()
	long := ledger.Caller{Principal: strings.Repeat("k", fsm.MaxPrincipalBytes+1)}
	for name, call := range map[string]func() error{
		"claim": func() error {
			r := claimReq("other", owner, `{}`)
			r.Principal = long.Principal
			_, err := s.Claim(ctx, r)
			return err
		},
		"complete": func() error {
			_, err := s.Complete(ctx, ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: token,
				Outcome: fsm.OutcomeExecuted, Caller: long})
			return err
		},
		"renew": func() error {
			_, err := s.Renew(ctx, ledger.RenewRequest{Key: key, Owner: owner, FencingToken: token, Lease: 5e9, Caller: long})
			return err
		},
		"commit": func() error {
			_, err := s.Commit(ctx, ledger.CommitRequest{Key: key, Owner: owner, Caller: ledger.Caller{Principal: "\xff"}})
			return err
		},
	} {
		var fe *ledger.FieldError
		if err := call(); !errors.Is(err, ledger.ErrBadRequest) || !errors.As(err, &fe) || fe.Field != "principal" {
			t.Fatalf("%s with a bad principal: %v", name, err)
		}
	}
	eq(t, "proposed", m.Proposed(), before)
}

// TestDecideRefusesSelfApproval: an approval whose actor is the key that
// claimed the intent is refused unless its policy allows it.
func TestDecideRefusesSelfApproval(t *testing.T) {
	ctx := context.Background()
	for _, allow := range []bool{false, true} {
		s, _ := newService(t, ledger.Limits{})
		if _, err := s.PutPolicy(ctx, fsm.Policy{Name: "refunds", Tools: []string{tool}, RequireApproval: true,
			AllowSelfApproval: allow}, 0, "admin"); err != nil {
			t.Fatal(err)
		}
		req := claimReq(key, owner, `{"order":"ord_98231"}`)
		req.Principal = "agent-approver"
		mustClaim(t, s, req, fsm.StatusPendingApproval)
		r, err := s.Decide(ctx, ledger.Decision{Key: key, Actor: "agent-approver", Approve: true})
		if err != nil {
			t.Fatal(err)
		}
		want := fsm.StatusSelfApproval
		if allow {
			want = fsm.StatusOK
		}
		if r.Status != want {
			t.Fatalf("allow_self_approval %t: %s (%s), want %s", allow, r.Status, r.Detail, want)
		}
	}
}
