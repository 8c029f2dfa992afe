package fsm_test

import (
	"reflect"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// as returns a copy of cmd made by the API key principal, with override
// when the key's roles let it settle other keys' grants. Commands that
// carry no caller are returned as they are.
func as(principal string, override bool, cmd fsm.Command) fsm.Command {
	switch c := cmd.(type) {
	case *fsm.Claim:
		cp := *c
		cp.Principal = principal
		return &cp
	case *fsm.Complete:
		cp := *c
		cp.Principal, cp.Override = principal, override
		return &cp
	case *fsm.Renew:
		cp := *c
		cp.Principal, cp.Override = principal, override
		return &cp
	case *fsm.Commit:
		cp := *c
		cp.Principal, cp.Override = principal, override
		return &cp
	}
	return cmd
}

// withoutTrail is in without what every audited attempt changes (its
// version and audit trail), to compare a record before and after a
// refusal.
func withoutTrail(in *fsm.Intent) fsm.Intent {
	cp := *in
	cp.Version, cp.Audit = 0, nil
	return cp
}

// TestGrantIsBoundToItsPrincipal: complete, renew and commit of a grant
// bound to API key "alice" are refused for another key (nothing changes
// but the audit trail, which names the key that tried), accepted for
// alice, for a key with the override (a reconciler; the trail names it)
// and for a caller that names no key (an entry of an encoding before
// EncodingBinary2). A grant bound to no key takes them from anyone.
func TestGrantIsBoundToItsPrincipal(t *testing.T) {
	ops := []struct {
		name  string
		setup []step // after the claim, whose fencing token is 1
		cmd   fsm.Command
		from  fsm.State
		to    fsm.State
	}{
		{"complete", nil, complete("k", "A", 1, fsm.OutcomeExecuted, resultOK), fsm.StateDeclared, fsm.StateExecuted},
		{"renew", nil, renew("k", "A", 1, 5000), fsm.StateDeclared, fsm.StateDeclared},
		{"complete after the lease", []step{{advance: ms(leaseMS) + 1, cmd: expire("k"), want: fsm.StatusOK}},
			complete("k", "A", 1, fsm.OutcomeFailed, resultNo), fsm.StateInDoubt, fsm.StateFailed},
		{"commit", []step{{cmd: as("alice", false, complete("k", "A", 1, fsm.OutcomeExecuted, resultOK)), want: fsm.StatusOK}},
			commit("k", "A"), fsm.StateExecuted, fsm.StateCommitted},
	}
	callers := []struct {
		name      string
		bound     string // the principal of the claim
		principal string
		override  bool
		want      fsm.Status
		actor     string // the audit event's actor
	}{
		{"another key", "alice", "bob", false, fsm.StatusNotGrantHolder, "bob"},
		{"the key that claimed", "alice", "alice", false, fsm.StatusOK, ""},
		{"another key with the override", "alice", "bob", true, fsm.StatusOK, "bob"},
		{"a caller naming no key", "alice", "", false, fsm.StatusOK, ""},
		{"another key, grant bound to none", "", "bob", false, fsm.StatusOK, "bob"},
	}
	for _, op := range ops {
		for _, c := range callers {
			t.Run(op.name+"/"+c.name, func(t *testing.T) {
				h := newHarness(t)
				h.must(as(c.bound, false, claim("k", "A", payloadA)), fsm.StatusGranted)
				h.run(op.setup)
				before := h.get("k")
				eq(t, "state before", before.State, op.from)
				eq(t, "principal", before.Principal, c.bound)
				r := h.must(as(c.principal, c.override, op.cmd), c.want)
				after := h.get("k")
				ev := lastEvent(t, after)
				eq(t, "audit status", ev.Status, c.want)
				eq(t, "audit actor", ev.Actor, c.actor)
				eq(t, "audit index", ev.Index, r.Index)
				if c.want == fsm.StatusOK {
					eq(t, "state", after.State, op.to)
					eq(t, "principal after", after.Principal, c.bound)
					return
				}
				eq(t, "audit owner", ev.Owner, "A")
				if b, a := withoutTrail(before), withoutTrail(after); !reflect.DeepEqual(a, b) {
					t.Fatalf("a refused %s changed the record\nbefore %+v\n after %+v", op.name, b, a)
				}
				eq(t, "audit events", len(after.Audit), len(before.Audit)+1)
				// The same refusal again: refused again, recorded again.
				h.must(as(c.principal, c.override, op.cmd), c.want)
				eq(t, "state", h.get("k").State, op.from)
			})
		}
	}
}

// TestRepeatedClaimIsBound: a claim naming the owner of a grant bound to
// another key does not get the grant (and its execution token) again.
func TestRepeatedClaimIsBound(t *testing.T) {
	h := newHarness(t)
	g := h.must(as("alice", false, claim("k", "A", payloadA)), fsm.StatusGranted)
	r := h.must(as("bob", false, claim("k", "A", payloadA)), fsm.StatusNotGrantHolder)
	eq(t, "Created", r.Created, false)
	eq(t, "audit actor", lastEvent(t, r.Intent).Actor, "bob")
	again := h.must(as("alice", false, claim("k", "A", payloadA)), fsm.StatusGranted)
	eq(t, "fencing token", again.Intent.FencingToken, g.Intent.FencingToken)
	h.must(claim("k", "A", payloadA), fsm.StatusGranted) // names no key
	// Another owner is in flight, whichever key asks.
	h.must(as("alice", false, claim("k", "B", payloadA)), fsm.StatusInFlight)
}

// TestPrincipalChangesOnlyAtANewGrant: the principal is the claimant's
// from the pending intent on, and the granting key's from each grant on.
func TestPrincipalChangesOnlyAtANewGrant(t *testing.T) {
	h := newHarness(t)
	eq(t, "pending", h.must(as("alice", false, claimApproval("k", "A", payloadA)), fsm.StatusPendingApproval).Intent.Principal, "alice")
	eq(t, "approved", h.must(approveBy("k", "carol", ""), fsm.StatusOK).Intent.Principal, "alice")
	h.must(as("bob", false, claim("k", "B", payloadA)), fsm.StatusNotGrantHolder) // alice's approval
	g := h.must(as("alice", false, claim("k", "A", payloadA)), fsm.StatusGranted)
	eq(t, "granted", g.Intent.Principal, "alice")
	h.must(as("alice", false, complete("k", "A", g.Intent.FencingToken, fsm.OutcomeFailed, resultNo)), fsm.StatusOK)
	eq(t, "failed", h.get("k").Principal, "alice")
	g2 := h.must(as("dave", false, claim("k", "D", payloadA)), fsm.StatusGranted)
	eq(t, "granted again", g2.Intent.Principal, "dave")
	h.must(as("alice", false, complete("k", "A", g.Intent.FencingToken, fsm.OutcomeExecuted, resultOK)), fsm.StatusFenced)
	h.must(as("alice", false, complete("k", "D", g2.Intent.FencingToken, fsm.OutcomeExecuted, resultOK)), fsm.StatusNotGrantHolder)
	h.must(as("dave", false, complete("k", "D", g2.Intent.FencingToken, fsm.OutcomeExecuted, resultOK)), fsm.StatusOK)
}

// TestClaimRefusesAnOverlongPrincipal: apply records no principal that
// Restore would refuse.
func TestClaimRefusesAnOverlongPrincipal(t *testing.T) {
	h := newHarness(t)
	long := make([]byte, fsm.MaxPrincipalBytes+1)
	for i := range long {
		long[i] = 'a'
	}
	h.must(as(string(long), false, claim("k", "A", payloadA)), fsm.StatusMalformed)
	h.must(as("\xff", false, claim("k", "A", payloadA)), fsm.StatusMalformed)
	h.must(as(string(long[1:]), false, claim("k", "A", payloadA)), fsm.StatusGranted)
}

// TestSelfApproval: the key that claimed an intent may not approve it
// unless its policy, as it stands, sets allow_self_approval; it may reject
// it, and other approvers approve as before.
func TestSelfApproval(t *testing.T) {
	allowing := putPolicy(fsm.Policy{Name: "p", Tools: []string{"payments.*"}, RequireApproval: true, AllowSelfApproval: true})
	strict := putPolicy(fsm.Policy{Name: "p", Tools: []string{"payments.*"}, RequireApproval: true})
	for _, tc := range []struct {
		name    string
		policy  []fsm.Command // before the claim
		claimer string
		later   []fsm.Command // between the claim and the decision
		decide  fsm.Command
		want    fsm.Status
		state   fsm.State
	}{
		{"the claimant approves", []fsm.Command{strict}, "alice", nil, approveBy("k", "alice", ""), fsm.StatusSelfApproval, fsm.StatePendingApproval},
		{"the claimant approves under the default policy", nil, "alice", nil, approveBy("k", "alice", ""), fsm.StatusSelfApproval, fsm.StatePendingApproval},
		{"another approver", []fsm.Command{strict}, "alice", nil, approveBy("k", "carol", ""), fsm.StatusOK, fsm.StateApproved},
		{"the claimant, allowed", []fsm.Command{allowing}, "alice", nil, approveBy("k", "alice", ""), fsm.StatusOK, fsm.StateApproved},
		{"the claimant, allowance withdrawn", []fsm.Command{allowing}, "alice", []fsm.Command{strict}, approveBy("k", "alice", ""), fsm.StatusSelfApproval, fsm.StatePendingApproval},
		{"the claimant, allowance added", []fsm.Command{strict}, "alice", []fsm.Command{allowing}, approveBy("k", "alice", ""), fsm.StatusOK, fsm.StateApproved},
		{"the claimant, policy deleted", []fsm.Command{allowing}, "alice", []fsm.Command{&fsm.DeletePolicy{Name: "p"}}, approveBy("k", "alice", ""), fsm.StatusSelfApproval, fsm.StatePendingApproval},
		{"the claimant rejects", []fsm.Command{strict}, "alice", nil, &fsm.Reject{Namespace: ns, Key: "k", Actor: "alice"}, fsm.StatusOK, fsm.StateRejected},
		{"an intent bound to no key", []fsm.Command{strict}, "", nil, approveBy("k", "alice", ""), fsm.StatusOK, fsm.StateApproved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for _, c := range tc.policy {
				h.must(c, fsm.StatusOK)
			}
			h.must(as(tc.claimer, false, claimApproval("k", "A", payloadA)), fsm.StatusPendingApproval)
			for _, c := range tc.later {
				h.must(c, fsm.StatusOK)
			}
			before := h.get("k")
			r := h.must(tc.decide, tc.want)
			after := h.get("k")
			eq(t, "state", after.State, tc.state)
			ev := lastEvent(t, after)
			eq(t, "audit status", ev.Status, tc.want)
			if tc.want == fsm.StatusSelfApproval {
				eq(t, "audit actor", ev.Actor, "alice")
				eq(t, "approvals", len(after.Approvals), 0)
				if b, a := withoutTrail(before), withoutTrail(after); !reflect.DeepEqual(a, b) {
					t.Fatalf("a refused approval changed the record\nbefore %+v\n after %+v", b, a)
				}
				eq(t, "error", r.Err() != nil, true)
			}
		})
	}
}

// An approval is given to one key's request: once approved, that key
// claims the grant; another key with the same payload is refused, and an
// intent bound to no key (auth off) stays open to any claimant.
func TestApprovalIsRedeemedOnlyByTheClaimingKey(t *testing.T) {
	strict := putPolicy(fsm.Policy{Name: "p", Tools: []string{"payments.*"}, RequireApproval: true})
	for _, tc := range []struct {
		name, claimer, redeemer string
		want                    fsm.Status
	}{
		{"the claiming key", "alice", "alice", fsm.StatusGranted},
		{"another key", "alice", "mallory", fsm.StatusNotGrantHolder},
		{"bound to no key", "", "mallory", fsm.StatusGranted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.must(strict, fsm.StatusOK)
			h.must(as(tc.claimer, false, claimApproval("k", "A", payloadA)), fsm.StatusPendingApproval)
			h.must(approveBy("k", "carol", ""), fsm.StatusOK)
			h.must(as(tc.redeemer, false, claimApproval("k", "B", payloadA)), tc.want)
			want := fsm.StateDeclared
			if tc.want != fsm.StatusGranted {
				want = fsm.StateApproved
			}
			eq(t, "state", h.get("k").State, want)
		})
	}
}
