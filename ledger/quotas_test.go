package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

func TestParseNamespaceQuotas(t *testing.T) {
	for _, tt := range []struct {
		name, json string
		want       ledger.NamespaceQuotas
		err        string
	}{
		{"both", `{"pay": {"claims_per_second": 50, "burst": 100, "max_intents": 1000}}`,
			ledger.NamespaceQuotas{"pay": {ClaimsPerSecond: 50, Burst: 100, MaxIntents: 1000}}, ""},
		{"empty", `{}`, ledger.NamespaceQuotas{}, ""},
		{"unknown field", `{"pay": {"claims_per_sec": 5}}`, nil, "unknown field"},
		{"bad namespace", `{"Pay": {"max_intents": 5}}`, nil, "must match"},
		{"negative rate", `{"pay": {"claims_per_second": -1}}`, nil, "finite number"},
		{"negative max", `{"pay": {"max_intents": -1}}`, nil, "max_intents"},
		{"burst without rate", `{"pay": {"burst": 5}}`, nil, "without claims_per_second"},
		{"two values", `{} {}`, nil, "more than one"},
		{"not an object", `[]`, nil, "cannot unmarshal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ledger.ParseNamespaceQuotas([]byte(tt.json))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for ns, q := range tt.want {
				if got[ns] != q {
					t.Fatalf("%s: got %+v, want %+v", ns, got[ns], q)
				}
			}
		})
	}
}

func quotaClaim(ns, k string) ledger.ClaimRequest {
	r := claimReq(k, owner, `{"cents":1}`)
	r.Namespace = ns
	return r
}

// TestNamespaceQuotas: over its claims per second a namespace is refused
// with the wait, and accepted again once it passed; at its maximum of
// intents a claim of a new key is refused and nothing is written, while
// its duplicates, completes and other namespaces are served; a purge
// makes room.
func TestNamespaceQuotas(t *testing.T) {
	ctx := context.Background()
	s, m := newService(t, ledger.Limits{})
	if err := s.SetNamespaceQuotas(ledger.NamespaceQuotas{
		"fast": {ClaimsPerSecond: 1, Burst: 2},
		"full": {MaxIntents: 2},
	}); err != nil {
		t.Fatal(err)
	}

	mustClaim(t, s, quotaClaim("fast", "f1"), fsm.StatusGranted)
	mustClaim(t, s, quotaClaim("fast", "f2"), fsm.StatusGranted)
	proposed := m.Proposed()
	_, err := s.Claim(ctx, quotaClaim("fast", "f3"))
	var qe *ledger.QuotaError
	if !errors.As(err, &qe) || !errors.Is(err, ledger.ErrNamespaceRateLimited) || qe.RetryAfter != time.Second {
		t.Fatalf("third claim in a second: %v, want ErrNamespaceRateLimited with a 1 s wait", err)
	}
	eq(t, "proposals after the refusal", m.Proposed(), proposed)
	mustClaim(t, s, quotaClaim("other", "o1"), fsm.StatusGranted) // no quota
	m.Advance(time.Second)
	mustClaim(t, s, quotaClaim("fast", "f3"), fsm.StatusGranted)

	g := mustClaim(t, s, quotaClaim("full", "a"), fsm.StatusGranted)
	mustClaim(t, s, quotaClaim("full", "b"), fsm.StatusGranted)
	proposed = m.Proposed()
	_, err = s.Claim(ctx, quotaClaim("full", "c"))
	if !errors.As(err, &qe) || !errors.Is(err, ledger.ErrNamespaceFull) || qe.Stored != 2 || qe.Max != 2 {
		t.Fatalf("third key: %v, want ErrNamespaceFull holding 2 of 2", err)
	}
	eq(t, "proposals after the refusal", m.Proposed(), proposed)
	if _, err := s.Get(ctx, "full", "c", ledger.Linearizable); !errors.Is(err, fsm.ErrNotFound) {
		t.Fatalf("the refused key was written: %v", err)
	}
	mustClaim(t, s, quotaClaim("full", "a"), fsm.StatusGranted) // the owner's repeat: no new intent
	if r, err := s.Complete(ctx, ledger.CompleteRequest{Namespace: "full", Key: "a", Owner: owner,
		FencingToken: g.Intent.FencingToken, Outcome: fsm.OutcomeExecuted}); err != nil || r.Status != fsm.StatusOK {
		t.Fatalf("complete in a full namespace: %v %v", r, err)
	}
	mustClaim(t, s, quotaClaim("full", "a"), fsm.StatusDuplicate)
	u, err := s.NamespaceUsage(ctx, "full", ledger.Linearizable)
	if err != nil || u.Intents != 2 || u.ByState[fsm.StateExecuted] != 1 || u.ByState[fsm.StateDeclared] != 1 {
		t.Fatalf("usage %+v, %v", u, err)
	}

	// Past the dedupe window the executed intent is purged: room for one.
	m.Advance(ledger.DefaultLimits.DedupeWindow + time.Second)
	m.Seed(&fsm.Purge{Keys: []fsm.Ref{{Namespace: "full", Key: "a"}}})
	mustClaim(t, s, quotaClaim("full", "c"), fsm.StatusGranted)

	// Lifting the quota (a reload) lets the namespace grow.
	if err := s.SetNamespaceQuotas(nil); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, quotaClaim("full", "d"), fsm.StatusGranted)
	if err := s.SetNamespaceQuotas(ledger.NamespaceQuotas{"BAD": {}}); err == nil {
		t.Fatal("quotas naming an invalid namespace were accepted")
	}
}

// follower is a Memory that is not the leader: a linearizable read fails
// with the leader's address, as cluster.Node's does on a follower.
type follower struct {
	*ledgertest.Memory
}

func (f follower) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	if c == ledger.Linearizable {
		return &ledger.NotLeaderError{LeaderID: "n1", LeaderHTTP: "127.0.0.1:1"}
	}
	return f.Memory.Read(ctx, c, fn)
}

// TestNamespaceQuotaOnAFollower: a follower sends a claim of a namespace
// with a quota to the leader (a NotLeaderError naming it) when the claim
// may be forwarded, and neither spends a token nor refuses it itself.
func TestNamespaceQuotaOnAFollower(t *testing.T) {
	m := ledgertest.NewMemory(start)
	s := ledgertest.NewService(t, follower{m}, ledger.Config{Leading: func() bool { return false },
		NamespaceQuotas: ledger.NamespaceQuotas{"q": {ClaimsPerSecond: 1, MaxIntents: 1}}})
	for i := range 3 {
		_, err := s.Claim(ledger.WithForwardableClaim(context.Background()), quotaClaim("q", "k"))
		var nl *ledger.NotLeaderError
		if !errors.As(err, &nl) || nl.LeaderHTTP == "" {
			t.Fatalf("claim %d: %v, want a NotLeaderError naming the leader", i, err)
		}
	}
	eq(t, "proposals", m.Proposed(), 0)
	// A claim without a quota is proposed as before.
	mustClaim(t, s, quotaClaim("free", "k"), fsm.StatusGranted)
}
