package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/namespace"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	key   = "refund:ord_98231"
	tool  = "payments.refund"
	owner = "agent-7/host-a/41ab"
)

func newService(t *testing.T, limits ledger.Limits) (*ledger.Service, *ledgertest.Memory) {
	t.Helper()
	m := ledgertest.NewMemory(start)
	return ledgertest.NewService(t, m, ledger.Config{Limits: limits}), m
}

func claimReq(k, o, payload string) ledger.ClaimRequest {
	return ledger.ClaimRequest{Key: k, Tool: tool, Owner: o, Payload: json.RawMessage(payload)}
}

func mustClaim(t *testing.T, s *ledger.Service, req ledger.ClaimRequest, want fsm.Status) *fsm.Result {
	t.Helper()
	r, err := s.Claim(uncounted(), req)
	if err != nil {
		t.Fatalf("Claim(%s by %s): %v", req.Key, req.Owner, err)
	}
	if r.Status != want {
		t.Fatalf("Claim(%s by %s): %s (%s), want %s", req.Key, req.Owner, r.Status, r.Detail, want)
	}
	return r.Result
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

var requestKinds = []error{ledger.ErrBadRequest, ledger.ErrTooLarge, ledger.ErrUnprocessable}

func TestValidation(t *testing.T) {
	big := func(n int) string { return strings.Repeat("x", n) }
	bigJSON := func(n int) json.RawMessage { return json.RawMessage(`"` + big(n-2) + `"`) }
	// 64 KiB of input whose canonical form is far larger: 1e20 canonicalizes
	// to 100000000000000000000.
	expanding := json.RawMessage("[" + strings.Repeat("1e20,", 13000) + "1e20]")
	okClaim := func(mut func(*ledger.ClaimRequest)) func(*ledger.Service) error {
		return func(s *ledger.Service) error {
			req := claimReq(key, owner, `{"cents":1250}`)
			mut(&req)
			_, err := s.Claim(context.Background(), req)
			return err
		}
	}
	okComplete := func(mut func(*ledger.CompleteRequest)) func(*ledger.Service) error {
		return func(s *ledger.Service) error {
			req := ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: 1, Outcome: fsm.OutcomeExecuted,
				Result: json.RawMessage(`{"refund":"re_1"}`)}
			mut(&req)
			_, err := s.Complete(context.Background(), req)
			return err
		}
	}
	okRenew := func(mut func(*ledger.RenewRequest)) func(*ledger.Service) error {
		return func(s *ledger.Service) error {
			req := ledger.RenewRequest{Key: key, Owner: owner, FencingToken: 1, Lease: time.Minute}
			mut(&req)
			_, err := s.Renew(context.Background(), req)
			return err
		}
	}
	okResolve := func(mut func(*ledger.ResolveRequest)) func(*ledger.Service) error {
		return func(s *ledger.Service) error {
			req := ledger.ResolveRequest{Key: key, Outcome: fsm.OutcomeFailed, Actor: "ops", Reason: "checked"}
			mut(&req)
			_, err := s.Resolve(context.Background(), req)
			return err
		}
	}
	okDecide := func(mut func(*ledger.Decision)) func(*ledger.Service) error {
		return func(s *ledger.Service) error {
			d := ledger.Decision{Key: key, Actor: "lead", Reason: "fine", Approve: true}
			mut(&d)
			_, err := s.Decide(context.Background(), d)
			return err
		}
	}
	okList := func(mut func(*ledger.ListRequest)) func(*ledger.Service) error {
		return func(s *ledger.Service) error {
			req := ledger.ListRequest{}
			mut(&req)
			_, _, err := s.List(context.Background(), req, ledger.Linearizable)
			return err
		}
	}
	cases := []struct {
		name  string
		call  func(*ledger.Service) error
		want  error
		field string
	}{
		{"claim: empty key", okClaim(func(r *ledger.ClaimRequest) { r.Key = "" }), ledger.ErrBadRequest, "key"},
		{"claim: key over 256 bytes", okClaim(func(r *ledger.ClaimRequest) { r.Key = big(257) }), ledger.ErrBadRequest, "key"},
		{"claim: key with NUL", okClaim(func(r *ledger.ClaimRequest) { r.Key = "a\x00b" }), ledger.ErrBadRequest, "key"},
		{"claim: key with newline", okClaim(func(r *ledger.ClaimRequest) { r.Key = "a\nb" }), ledger.ErrBadRequest, "key"},
		{"claim: key with tab", okClaim(func(r *ledger.ClaimRequest) { r.Key = "a\tb" }), ledger.ErrBadRequest, "key"},
		{"claim: key not UTF-8", okClaim(func(r *ledger.ClaimRequest) { r.Key = "ord_\xff" }), ledger.ErrBadRequest, "key"},
		{"claim: key with DEL", okClaim(func(r *ledger.ClaimRequest) { r.Key = "a\x7f" }), ledger.ErrBadRequest, "key"},
		{"claim: key with a zero-width joiner", okClaim(func(r *ledger.ClaimRequest) { r.Key = "a\u200db" }), ledger.ErrBadRequest, "key"},
		{"claim: missing owner", okClaim(func(r *ledger.ClaimRequest) { r.Owner = "" }), ledger.ErrBadRequest, "owner"},
		{"claim: owner over 256 bytes", okClaim(func(r *ledger.ClaimRequest) { r.Owner = big(257) }), ledger.ErrBadRequest, "owner"},
		{"claim: missing tool", okClaim(func(r *ledger.ClaimRequest) { r.Tool = "" }), ledger.ErrBadRequest, "tool"},
		{"claim: tool not printable", okClaim(func(r *ledger.ClaimRequest) { r.Tool = "x\x1b[31m" }), ledger.ErrBadRequest, "tool"},
		{"claim: policy not printable", okClaim(func(r *ledger.ClaimRequest) { r.Policy = "p\n" }), ledger.ErrBadRequest, "policy"},
		{"claim: namespace not printable", okClaim(func(r *ledger.ClaimRequest) { r.Namespace = "n\x00" }), ledger.ErrBadRequest, "namespace"},
		{"claim: namespace upper case", okClaim(func(r *ledger.ClaimRequest) { r.Namespace = "Payments" }), ledger.ErrBadRequest, "namespace"},
		{"claim: namespace over 63 bytes", okClaim(func(r *ledger.ClaimRequest) { r.Namespace = strings.Repeat("n", 64) }), ledger.ErrBadRequest, "namespace"},
		{"claim: payload over 64 KiB", okClaim(func(r *ledger.ClaimRequest) { r.Payload = bigJSON(64<<10 + 1) }), ledger.ErrTooLarge, "payload"},
		{"claim: canonical payload over 64 KiB", okClaim(func(r *ledger.ClaimRequest) { r.Payload = expanding }), ledger.ErrTooLarge, "payload"},
		{"claim: payload not JSON", okClaim(func(r *ledger.ClaimRequest) { r.Payload = json.RawMessage(`{"cents":`) }), ledger.ErrBadRequest, "payload"},
		{"claim: payload with duplicate keys", okClaim(func(r *ledger.ClaimRequest) { r.Payload = json.RawMessage(`{"a":1,"a":2}`) }), ledger.ErrBadRequest, "payload"},
		{"claim: payload two documents", okClaim(func(r *ledger.ClaimRequest) { r.Payload = json.RawMessage(`{} {}`) }), ledger.ErrBadRequest, "payload"},
		{"claim: lease below 100ms", okClaim(func(r *ledger.ClaimRequest) { r.Lease = 99 * time.Millisecond }), ledger.ErrUnprocessable, "lease_ms"},
		{"claim: lease above 1h", okClaim(func(r *ledger.ClaimRequest) { r.Lease = time.Hour + time.Millisecond }), ledger.ErrUnprocessable, "lease_ms"},
		{"claim: negative lease", okClaim(func(r *ledger.ClaimRequest) { r.Lease = -time.Second }), ledger.ErrUnprocessable, "lease_ms"},

		{"complete: bad outcome", okComplete(func(r *ledger.CompleteRequest) { r.Outcome = "done" }), ledger.ErrUnprocessable, "outcome"},
		{"complete: empty outcome", okComplete(func(r *ledger.CompleteRequest) { r.Outcome = "" }), ledger.ErrUnprocessable, "outcome"},
		{"complete: result not JSON", okComplete(func(r *ledger.CompleteRequest) { r.Result = json.RawMessage(`{"refund":`) }), ledger.ErrBadRequest, "result"},
		{"complete: result over 64 KiB", okComplete(func(r *ledger.CompleteRequest) { r.Result = bigJSON(64<<10 + 1) }), ledger.ErrTooLarge, "result"},
		{"complete: fencing token 0", okComplete(func(r *ledger.CompleteRequest) { r.FencingToken = 0 }), ledger.ErrBadRequest, "fencing_token"},
		{"complete: missing owner", okComplete(func(r *ledger.CompleteRequest) { r.Owner = "" }), ledger.ErrBadRequest, "owner"},
		{"complete: empty key", okComplete(func(r *ledger.CompleteRequest) { r.Key = "" }), ledger.ErrBadRequest, "key"},
		{"complete: namespace too long", okComplete(func(r *ledger.CompleteRequest) { r.Namespace = big(257) }), ledger.ErrBadRequest, "namespace"},

		{"renew: fencing token 0", okRenew(func(r *ledger.RenewRequest) { r.FencingToken = 0 }), ledger.ErrBadRequest, "fencing_token"},
		{"renew: lease below 100ms", okRenew(func(r *ledger.RenewRequest) { r.Lease = 50 * time.Millisecond }), ledger.ErrUnprocessable, "lease_ms"},
		{"renew: lease above 1h", okRenew(func(r *ledger.RenewRequest) { r.Lease = 2 * time.Hour }), ledger.ErrUnprocessable, "lease_ms"},
		{"renew: missing owner", okRenew(func(r *ledger.RenewRequest) { r.Owner = "" }), ledger.ErrBadRequest, "owner"},
		{"renew: key too long", okRenew(func(r *ledger.RenewRequest) { r.Key = big(300) }), ledger.ErrBadRequest, "key"},

		{"commit: missing owner", func(s *ledger.Service) error {
			_, err := s.Commit(context.Background(), ledger.CommitRequest{Key: key})
			return err
		}, ledger.ErrBadRequest, "owner"},
		{"commit: empty key", func(s *ledger.Service) error {
			_, err := s.Commit(context.Background(), ledger.CommitRequest{Owner: owner})
			return err
		}, ledger.ErrBadRequest, "key"},

		{"resolve: bad outcome", okResolve(func(r *ledger.ResolveRequest) { r.Outcome = "maybe" }), ledger.ErrUnprocessable, "outcome"},
		{"resolve: missing actor", okResolve(func(r *ledger.ResolveRequest) { r.Actor = "" }), ledger.ErrBadRequest, "actor"},
		{"resolve: reason over 1 KiB", okResolve(func(r *ledger.ResolveRequest) { r.Reason = big(1025) }), ledger.ErrTooLarge, "reason"},
		{"resolve: result not JSON", okResolve(func(r *ledger.ResolveRequest) { r.Result = json.RawMessage(`nope`) }), ledger.ErrBadRequest, "result"},
		{"resolve: key not printable", okResolve(func(r *ledger.ResolveRequest) { r.Key = "\x01" }), ledger.ErrBadRequest, "key"},

		{"decide: missing actor", okDecide(func(d *ledger.Decision) { d.Actor = "" }), ledger.ErrBadRequest, "actor"},
		{"decide: reason over 1 KiB", okDecide(func(d *ledger.Decision) { d.Reason = big(2000) }), ledger.ErrTooLarge, "reason"},
		{"decide: empty key", okDecide(func(d *ledger.Decision) { d.Key = "" }), ledger.ErrBadRequest, "key"},

		{"get: empty key", func(s *ledger.Service) error {
			_, err := s.Get(context.Background(), "", "", ledger.Linearizable)
			return err
		}, ledger.ErrBadRequest, "key"},
		{"list: unknown state", okList(func(r *ledger.ListRequest) { r.State = "done" }), ledger.ErrUnprocessable, "state"},
		{"list: negative limit", okList(func(r *ledger.ListRequest) { r.Limit = -1 }), ledger.ErrUnprocessable, "limit"},
		{"list: prefix too long", okList(func(r *ledger.ListRequest) { r.Prefix = big(257) }), ledger.ErrBadRequest, "prefix"},
		{"list: cursor too long", okList(func(r *ledger.ListRequest) { r.Cursor = big(257) }), ledger.ErrBadRequest, "prefix"},
		{"list: namespace not printable", okList(func(r *ledger.ListRequest) { r.Namespace = "\u2028" }), ledger.ErrBadRequest, "namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, m := newService(t, ledger.Limits{})
			// One intent exists so a command that slipped through would change it.
			mustClaim(t, s, claimReq(key, owner, `{"cents":1250}`), fsm.StatusGranted)
			proposed, digest := m.Proposed(), m.Ledger().Digest()

			err := tc.call(s)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want errors.Is %v", err, tc.want)
			}
			for _, other := range requestKinds {
				if other != tc.want && errors.Is(err, other) {
					t.Fatalf("error %v also matches %v", err, other)
				}
			}
			var fe *ledger.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || fe.Detail == "" {
				t.Fatalf("error %#v, want a FieldError on %q", err, tc.field)
			}
			if !strings.HasPrefix(err.Error(), tc.field+": ") {
				t.Fatalf("message %q does not start with the field", err.Error())
			}
			eq(t, "Proposed", m.Proposed(), proposed)
			eq(t, "Digest", m.Ledger().Digest(), digest)
		})
	}
}

// Boundary values that must be accepted.
func TestValidationAcceptsLimits(t *testing.T) {
	ctx := context.Background()
	s, m := newService(t, ledger.Limits{})
	k256 := strings.Repeat("k", 256)
	req := claimReq(k256, strings.Repeat("o", 256), `"`+strings.Repeat("x", 64<<10-2)+`"`)
	req.Lease = 100 * time.Millisecond
	mustClaim(t, s, req, fsm.StatusGranted)
	req = claimReq("unicode: 注文/ä ß", owner, ``)
	req.Lease = time.Hour
	r := mustClaim(t, s, req, fsm.StatusGranted)
	eq(t, "payload of an empty request", string(r.Intent.Payload), "null")
	eq(t, "LeaseMS", r.Intent.LeaseMS, time.Hour.Milliseconds())
	if _, err := s.Resolve(ctx, ledger.ResolveRequest{Key: k256, Outcome: fsm.OutcomeFailed, Actor: "ops",
		Reason: strings.Repeat("r", 1024)}); err != nil {
		t.Fatalf("1 KiB reason refused: %v", err)
	}
	eq(t, "Proposed", m.Proposed(), 4) // the first grant adds the signing key its token needs
}

func TestLimitsDefaults(t *testing.T) {
	s, _ := newService(t, ledger.Limits{MaxListLimit: 5, MinLease: time.Second})
	l := s.Limits()
	eq(t, "MaxListLimit", l.MaxListLimit, 5)
	eq(t, "MinLease", l.MinLease, time.Second)
	eq(t, "MaxKeyBytes", l.MaxKeyBytes, 256)
	eq(t, "MaxPayloadBytes", l.MaxPayloadBytes, 64<<10)
	eq(t, "MaxLease", l.MaxLease, time.Hour)
	eq(t, "DefaultLease", l.DefaultLease, 30*time.Second)
	eq(t, "DedupeWindow", l.DedupeWindow, 24*time.Hour)
	req := claimReq(key, owner, `{}`)
	req.Lease = 500 * time.Millisecond
	if _, err := s.Claim(context.Background(), req); !errors.Is(err, ledger.ErrUnprocessable) {
		t.Fatalf("custom MinLease not applied: %v", err)
	}
}

// A lease shorter than a millisecond would reach the state machine as 0 ms.
func TestSubMillisecondLeaseRefused(t *testing.T) {
	s, m := newService(t, ledger.Limits{MinLease: time.Microsecond})
	eq(t, "MinLease", s.Limits().MinLease, time.Millisecond)
	req := claimReq(key, owner, `{}`)
	req.Lease = 500 * time.Microsecond
	if _, err := s.Claim(context.Background(), req); !errors.Is(err, ledger.ErrUnprocessable) {
		t.Fatalf("sub-millisecond lease: %v, want ErrUnprocessable", err)
	}
	eq(t, "Proposed", m.Proposed(), 0)
	req.Lease = time.Millisecond
	mustClaim(t, s, req, fsm.StatusGranted)
}

func TestClaimCompleteCommit(t *testing.T) {
	ctx := context.Background()
	s, m := newService(t, ledger.Limits{})
	canonical, fp, err := fsm.Fingerprint(tool, []byte(`{"order":"ord_98231","cents":1250,"memo":"<refund> & co"}`))
	if err != nil {
		t.Fatal(err)
	}

	r := mustClaim(t, s, claimReq(key, owner, `{"cents": 1250.0, "memo":"<refund> & co", "order":"ord_98231"}`), fsm.StatusGranted)
	in := r.Intent
	eq(t, "Created", r.Created, true)
	eq(t, "Namespace", in.Namespace, namespace.Default)
	eq(t, "Fingerprint", in.Fingerprint, fp)
	eq(t, "Payload (canonical)", string(in.Payload), string(canonical))
	eq(t, "Tool", in.Tool, tool)
	eq(t, "Owner", in.Owner, owner)
	eq(t, "FencingToken", in.FencingToken, r.Index)
	eq(t, "LeaseMS (default)", in.LeaseMS, int64(30_000))
	eq(t, "LeaseDeadline", in.LeaseDeadline, start.Add(30*time.Second).UnixNano())
	eq(t, "DedupeWindowMS", in.DedupeWindowMS, (24 * time.Hour).Milliseconds())
	eq(t, "CreatedAt", in.CreatedAt, start.UnixNano())
	token := in.FencingToken

	// The same owner again (its first answer was lost): the same grant.
	r = mustClaim(t, s, claimReq(key, owner, `{"order":"ord_98231","memo":"<refund> & co","cents":1250}`), fsm.StatusGranted)
	eq(t, "Created", r.Created, false)
	eq(t, "FencingToken", r.Intent.FencingToken, token)

	// Another owner with an equal payload in another key order: in flight, not divergent.
	r = mustClaim(t, s, claimReq(key, "agent-7/host-b/99", `{"memo":"<refund> & co","order":"ord_98231","cents":1.25e3}`), fsm.StatusInFlight)
	if !errors.Is(r.Err(), fsm.ErrInFlight) {
		t.Fatalf("Err() = %v", r.Err())
	}
	eq(t, "Divergent", r.Intent.Divergent, uint64(0))

	m.Advance(2 * time.Second)
	r, err = s.Complete(ctx, ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: token,
		Outcome: fsm.OutcomeExecuted, Result: json.RawMessage(`{"refund": "re_1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status", r.Status, fsm.StatusOK)
	eq(t, "State", r.Intent.State, fsm.StateExecuted)
	eq(t, "Result", string(r.Intent.Result), `{"refund":"re_1"}`)
	eq(t, "UpdatedAt", r.Intent.UpdatedAt, start.Add(2*time.Second).UnixNano())

	// A second delivery is a lookup.
	r = mustClaim(t, s, claimReq(key, "agent-7/host-c/07", `{"cents":1250,"order":"ord_98231","memo":"<refund> & co"}`), fsm.StatusDuplicate)
	eq(t, "Result", string(r.Intent.Result), `{"refund":"re_1"}`)
	eq(t, "Duplicates", r.Intent.Duplicates, uint64(1))

	// A different payload under the same key is divergent, and shows both fingerprints.
	r = mustClaim(t, s, claimReq(key, "agent-7/host-c/08", `{"cents":9999,"order":"ord_98231"}`), fsm.StatusDivergent)
	if r.Fingerprint == fp || r.Intent.Fingerprint != fp || !errors.Is(r.Err(), fsm.ErrDivergent) {
		t.Fatalf("divergent answer %+v", r)
	}

	// A stale token is a refusal in the result, not an error.
	r, err = s.Complete(ctx, ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: token + 100,
		Outcome: fsm.OutcomeExecuted})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status", r.Status, fsm.StatusFenced)

	r, err = s.Commit(ctx, ledger.CommitRequest{Key: key, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status", r.Status, fsm.StatusOK)
	eq(t, "State", r.Intent.State, fsm.StateCommitted)
	r, err = s.Commit(ctx, ledger.CommitRequest{Key: key, Owner: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status", r.Status, fsm.StatusFenced)

	got, err := s.Get(ctx, "", key, ledger.Linearizable)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "State", got.State, fsm.StateCommitted)
	eq(t, "Payload", string(got.Payload), string(canonical))
	got, err = s.Get(ctx, namespace.Default, key, ledger.Stale)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "State (stale read)", got.State, fsm.StateCommitted)
}

func TestRenewAndResolve(t *testing.T) {
	ctx := context.Background()
	s, m := newService(t, ledger.Limits{})
	req := claimReq(key, owner, `{"cents":1}`)
	req.Lease = time.Second
	r := mustClaim(t, s, req, fsm.StatusGranted)
	token := r.Intent.FencingToken

	m.Advance(800 * time.Millisecond)
	r, err := s.Renew(ctx, ledger.RenewRequest{Key: key, Owner: owner, FencingToken: token, Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status", r.Status, fsm.StatusOK)
	eq(t, "LeaseDeadline", r.Intent.LeaseDeadline, start.Add(5800*time.Millisecond).UnixNano())
	r, err = s.Renew(ctx, ledger.RenewRequest{Key: key, Owner: owner, FencingToken: token})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "LeaseDeadline (default lease)", r.Intent.LeaseDeadline, start.Add(800*time.Millisecond+30*time.Second).UnixNano())
	r, err = s.Renew(ctx, ledger.RenewRequest{Key: key, Owner: "intruder", FencingToken: token, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status", r.Status, fsm.StatusFenced)

	// The lease passes without a report: in doubt, never granted again.
	m.Advance(31 * time.Second)
	r = mustClaim(t, s, claimReq(key, "retry-owner", `{"cents":1}`), fsm.StatusInDoubt)
	if !errors.Is(r.Err(), fsm.ErrInDoubt) {
		t.Fatalf("Err() = %v", r.Err())
	}
	r, err = s.Resolve(ctx, ledger.ResolveRequest{Key: key, Outcome: fsm.OutcomeFailed, Actor: "ops",
		Reason: "provider has no such refund"})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status", r.Status, fsm.StatusOK)
	eq(t, "State", r.Intent.State, fsm.StateFailed)
	r, err = s.Resolve(ctx, ledger.ResolveRequest{Key: key, Outcome: fsm.OutcomeExecuted, Actor: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status of a second verdict", r.Status, fsm.StatusInvalidState)

	// Failed: the next claim gets a new generation.
	r = mustClaim(t, s, claimReq(key, "retry-owner", `{"cents":1}`), fsm.StatusGranted)
	eq(t, "Generation", r.Intent.Generation, uint64(2))
	if r.Intent.FencingToken <= token {
		t.Fatalf("token %d not above %d", r.Intent.FencingToken, token)
	}
}

func TestDecide(t *testing.T) {
	ctx := context.Background()
	s, m := newService(t, ledger.Limits{})
	// The policy layer proposes claims that need approval; do what it does.
	pending := func(k string) {
		canonical, fp, err := fsm.Fingerprint(tool, []byte(`{"cents":1}`))
		if err != nil {
			t.Fatal(err)
		}
		r, err := m.Propose(ctx, &fsm.Claim{Namespace: namespace.Default, Key: k, Tool: tool, Owner: owner,
			Payload: canonical, Fingerprint: fp, LeaseMS: 1000, DedupeWindowMS: 1000, RequireApproval: true})
		if err != nil || r.Status != fsm.StatusPendingApproval {
			t.Fatalf("pending claim: %v %+v", err, r)
		}
	}
	pending("approve-me")
	pending("reject-me")

	r, err := s.Decide(ctx, ledger.Decision{Key: "approve-me", Actor: "lead", Reason: "ok", Approve: true})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status", r.Status, fsm.StatusOK)
	eq(t, "State", r.Intent.State, fsm.StateApproved)
	ev := r.Intent.Audit[len(r.Intent.Audit)-1]
	eq(t, "audit op", ev.Op, "approve")
	eq(t, "audit actor", ev.Actor, "lead")
	mustClaim(t, s, claimReq("approve-me", owner, `{"cents":1}`), fsm.StatusGranted)

	r, err = s.Decide(ctx, ledger.Decision{Key: "reject-me", Actor: "lead", Reason: "no"})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "State", r.Intent.State, fsm.StateRejected)
	r = mustClaim(t, s, claimReq("reject-me", owner, `{"cents":1}`), fsm.StatusRejected)
	if !errors.Is(r.Err(), fsm.ErrRejected) {
		t.Fatalf("Err() = %v", r.Err())
	}

	r, err = s.Decide(ctx, ledger.Decision{Key: "approve-me", Actor: "lead", Approve: true})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status on a declared intent", r.Status, fsm.StatusNotPending)
	r, err = s.Decide(ctx, ledger.Decision{Key: "nobody", Actor: "lead", Approve: true})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "Status on a missing intent", r.Status, fsm.StatusNotFound)
}

func TestGetNotFound(t *testing.T) {
	s, _ := newService(t, ledger.Limits{})
	mustClaim(t, s, claimReq(key, owner, `{}`), fsm.StatusGranted)
	for _, c := range []struct{ ns, key string }{{"", "missing"}, {"other", key}} {
		in, err := s.Get(context.Background(), c.ns, c.key, ledger.Linearizable)
		if !errors.Is(err, fsm.ErrNotFound) || in != nil {
			t.Fatalf("Get(%q, %q) = %v, %v; want ErrNotFound", c.ns, c.key, in, err)
		}
	}
}

func TestList(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ledger.Limits{MaxListLimit: 7})
	for i := 0; i < 12; i++ {
		mustClaim(t, s, claimReq(fmt.Sprintf("order:%02d", i), owner, `{}`), fsm.StatusGranted)
	}
	mustClaim(t, s, claimReq("email:1", owner, `{}`), fsm.StatusGranted)
	other := claimReq("order:99", owner, `{}`)
	other.Namespace = "tenant-b"
	mustClaim(t, s, other, fsm.StatusGranted)
	// Fencing token 5: the first grant's token added the signing key at index 1.
	r, err := s.Complete(ctx, ledger.CompleteRequest{Key: "order:03", Owner: owner, FencingToken: 5, Outcome: fsm.OutcomeExecuted})
	if err != nil || r.Status != fsm.StatusOK {
		t.Fatalf("complete: %v %+v", err, r)
	}

	list := func(req ledger.ListRequest) ([]*fsm.Intent, string) {
		t.Helper()
		page, next, err := s.List(ctx, req, ledger.Linearizable)
		if err != nil {
			t.Fatal(err)
		}
		return page, next
	}
	page, next := list(ledger.ListRequest{Limit: 1000}) // capped at MaxListLimit
	eq(t, "len (capped)", len(page), 7)
	eq(t, "next", next, "order:05")
	eq(t, "first", page[0].Key, "email:1")

	var all []string
	cursor := ""
	for {
		page, next := list(ledger.ListRequest{Prefix: "order:", Cursor: cursor, Limit: 5})
		for _, in := range page {
			all = append(all, in.Key)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	eq(t, "paged keys", strings.Join(all, ","),
		"order:00,order:01,order:02,order:03,order:04,order:05,order:06,order:07,order:08,order:09,order:10,order:11")

	page, _ = list(ledger.ListRequest{State: fsm.StateExecuted})
	eq(t, "executed", len(page), 1)
	eq(t, "executed key", page[0].Key, "order:03")
	page, _ = list(ledger.ListRequest{Namespace: "tenant-b"})
	eq(t, "tenant-b", len(page), 1)
	eq(t, "tenant-b key", page[0].Namespace+"/"+page[0].Key, "tenant-b/order:99")
}

func TestListDefaultLimit(t *testing.T) {
	s, _ := newService(t, ledger.Limits{})
	for i := 0; i < 105; i++ {
		mustClaim(t, s, claimReq(fmt.Sprintf("k%03d", i), owner, `{}`), fsm.StatusGranted)
	}
	page, next, err := s.List(context.Background(), ledger.ListRequest{}, ledger.Stale)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "len", len(page), 100)
	eq(t, "next", next, "k099")
}

func TestReplicationErrorsReturnedUnchanged(t *testing.T) {
	ctx := context.Background()
	notLeader := &ledger.NotLeaderError{LeaderID: "n2", LeaderHTTP: "http://10.0.0.2:8080"}
	for _, tc := range []struct{ failure, sentinel error }{
		{ledger.ErrOutcomeUnknown, ledger.ErrOutcomeUnknown},
		{ledger.ErrNoLeader, ledger.ErrNoLeader},
		{ledger.ErrShuttingDown, ledger.ErrShuttingDown},
		{notLeader, ledger.ErrNotLeader},
		{fmt.Errorf("apply timed out: %w", ledger.ErrOutcomeUnknown), ledger.ErrOutcomeUnknown},
	} {
		failure := tc.failure
		t.Run(failure.Error(), func(t *testing.T) {
			s, m := newService(t, ledger.Limits{})
			mustClaim(t, s, claimReq(key, owner, `{}`), fsm.StatusGranted)
			calls := []struct {
				name string
				call func() error
			}{
				{"claim", func() error { _, err := s.Claim(ctx, claimReq("other", owner, `{}`)); return err }},
				{"complete", func() error {
					_, err := s.Complete(ctx, ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: 1, Outcome: fsm.OutcomeFailed})
					return err
				}},
				{"renew", func() error {
					_, err := s.Renew(ctx, ledger.RenewRequest{Key: key, Owner: owner, FencingToken: 1})
					return err
				}},
				{"commit", func() error { _, err := s.Commit(ctx, ledger.CommitRequest{Key: key, Owner: owner}); return err }},
				{"resolve", func() error {
					_, err := s.Resolve(ctx, ledger.ResolveRequest{Key: key, Outcome: fsm.OutcomeFailed, Actor: "ops"})
					return err
				}},
				{"decide", func() error { _, err := s.Decide(ctx, ledger.Decision{Key: key, Actor: "ops"}); return err }},
				{"get", func() error { _, err := s.Get(ctx, "", key, ledger.Linearizable); return err }},
				{"list", func() error { _, _, err := s.List(ctx, ledger.ListRequest{}, ledger.Linearizable); return err }},
			}
			for _, c := range calls {
				proposed, digest := m.Proposed(), m.Ledger().Digest()
				m.FailNext(failure)
				err := c.call()
				if err != failure {
					t.Fatalf("%s: error %v, want the replicator's error unchanged", c.name, err)
				}
				if !errors.Is(err, tc.sentinel) {
					t.Fatalf("%s: error %v is not %v", c.name, err, tc.sentinel)
				}
				eq(t, c.name+": Proposed", m.Proposed(), proposed)
				eq(t, c.name+": Digest", m.Ledger().Digest(), digest)
			}
		})
	}
	// The sentinels a caller branches on survive.
	s, m := newService(t, ledger.Limits{})
	m.FailNext(notLeader)
	_, err := s.Claim(ctx, claimReq(key, owner, `{}`))
	var nl *ledger.NotLeaderError
	if !errors.Is(err, ledger.ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderHTTP != "http://10.0.0.2:8080" {
		t.Fatalf("not-leader error %v lost its leader", err)
	}
	// After an unknown outcome, retrying the same claim is safe: it is granted once.
	m.FailNext(ledger.ErrOutcomeUnknown)
	if _, err := s.Claim(ctx, claimReq(key, owner, `{}`)); !errors.Is(err, ledger.ErrOutcomeUnknown) {
		t.Fatalf("error %v", err)
	}
	r := mustClaim(t, s, claimReq(key, owner, `{}`), fsm.StatusGranted)
	eq(t, "Created", r.Created, true)
	r = mustClaim(t, s, claimReq(key, owner, `{}`), fsm.StatusGranted)
	eq(t, "Created on retry", r.Created, false)
}

func TestCanceledContext(t *testing.T) {
	s, m := newService(t, ledger.Limits{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Claim(ctx, claimReq(key, owner, `{}`)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a canceled context: %v", err)
	}
	if _, err := s.Get(ctx, "", key, ledger.Linearizable); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a canceled context: %v", err)
	}
	eq(t, "Proposed", m.Proposed(), 0)
}

func TestNamespacesIsolated(t *testing.T) {
	s, _ := newService(t, ledger.Limits{})
	a := claimReq(key, "owner-a", `{"cents":1}`)
	a.Namespace = "tenant-a"
	b := claimReq(key, "owner-b", `{"cents":2}`)
	b.Namespace = "tenant-b"
	mustClaim(t, s, a, fsm.StatusGranted)
	mustClaim(t, s, b, fsm.StatusGranted) // same key, other tenant: no conflict
	mustClaim(t, s, claimReq(key, "owner-c", `{"cents":3}`), fsm.StatusGranted)
}
