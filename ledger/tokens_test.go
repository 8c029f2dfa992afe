package ledger_test

import (
	"context"
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/namespace"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
	"github.com/intentledger/intentd/token"
)

// grantToken claims key for tool and returns the grant and its token.
func grantToken(t *testing.T, s *ledger.Service, k, tl string) (*fsm.Intent, string) {
	t.Helper()
	req := claimReq(k, owner, `{"order":"ord_98231","amount":100}`)
	req.Tool = tl
	g := mustClaim(t, s, req, fsm.StatusGranted)
	tok, err := s.IssueToken(context.Background(), g.Intent)
	if err != nil {
		t.Fatalf("IssueToken: %v", err)
	}
	return g.Intent, tok
}

// bound is the MayVerify of a key bound to patterns, as auth.Principal
// answers it.
func bound(patterns ...string) func(string) bool {
	return func(tool string) bool {
		for _, p := range patterns {
			if ok, _ := path.Match(p, tool); ok {
				return true
			}
		}
		return false
	}
}

// preAudienceToken signs in's token as the ledger did before tokens named
// their tool: the same claims without "aud", with the replicated key.
// fp, when set, replaces the fingerprint the token binds.
func preAudienceToken(t *testing.T, m *ledgertest.Memory, in *fsm.Intent, fp string) string {
	t.Helper()
	keys := m.Ledger().SigningKeys()
	if len(keys) == 0 {
		t.Fatal("no signing key")
	}
	k := keys[len(keys)-1]
	if fp == "" {
		fp = in.Fingerprint
	}
	tok, err := token.Sign(token.SigningKey{ID: k.ID, Seed: k.Seed}, token.Claims{
		Namespace: in.Namespace, Key: in.Key, Fingerprint: fp, FencingToken: in.FencingToken, Owner: in.Owner,
		IssuedAt: in.GrantedAt / 1e9, Expires: (in.GrantedAt + fsm.DefaultTokenTTLMS*1e6) / 1e9,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, c, err := token.Parse(tok); err != nil || c.Tool != "" {
		t.Fatalf("pre-audience token has aud %q (%v)", c.Tool, err)
	}
	return tok
}

// TestTokenNamesItsTool: the execution token's audience is the intent's
// tool, and a grant answered twice still carries the identical token.
func TestTokenNamesItsTool(t *testing.T) {
	s, _ := newService(t, ledger.Limits{})
	for _, tl := range []string{"payments.refund", "email.send"} {
		in, tok := grantToken(t, s, "k:"+tl, tl)
		_, c, err := token.Parse(tok)
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "aud of "+tl, c.Tool, in.Tool)
		if !c.ForTool(tl) || c.ForTool("other.tool") {
			t.Fatalf("ForTool of a token for %s: wrong", tl)
		}
		again, err := s.IssueToken(context.Background(), in)
		if err != nil || again != tok {
			t.Fatalf("the grant's token signed again differs (%v):\n%s\n%s", err, tok, again)
		}
	}
}

// TestVerifyChecksTheTokensTool: a token granted for one tool is refused,
// before anything is proposed, to a verifier that names another tool or
// whose key is bound to other tools; it is not spent, and the right
// verifier then spends it. Tokens signed before tokens named their tool
// are checked against the tool of the intent they bind.
func TestVerifyChecksTheTokensTool(t *testing.T) {
	const granted = "payments.refund"
	fresh := func(t *testing.T, m *ledgertest.Memory, in *fsm.Intent, tok string) string { return tok }
	old := func(t *testing.T, m *ledgertest.Memory, in *fsm.Intent, _ string) string {
		return preAudienceToken(t, m, in, "")
	}
	oldOtherFP := func(t *testing.T, m *ledgertest.Memory, in *fsm.Intent, _ string) string {
		return preAudienceToken(t, m, in, strings.Repeat("0", 64))
	}
	right := ledger.VerifyRequest{Tool: granted, MayVerify: bound("payments.*"), CallerTools: []string{"payments.*"}}
	for _, tc := range []struct {
		name  string
		token func(*testing.T, *ledgertest.Memory, *fsm.Intent, string) string
		req   ledger.VerifyRequest
		// want is the refusal; nil: the verification goes to the state
		// machine, which answers status.
		want   error
		status fsm.Status
		detail string
		// unbound: the token does not bind the intent's grant, so no tool
		// can spend it, even after the refusal.
		unbound bool
	}{
		{name: "request names another tool", token: fresh, req: ledger.VerifyRequest{Tool: "email.send"},
			want: ledger.ErrTokenWrongTool, detail: `for tool "payments.refund", not "email.send"`},
		{name: "key bound to another tool", token: fresh,
			req:  ledger.VerifyRequest{MayVerify: bound("email.*"), CallerTools: []string{"email.*"}},
			want: ledger.ErrTokenToolForbidden, detail: `tool "payments.refund"; this API key verifies only tokens of tools ["email.*"]`},
		{name: "key bound to the tool, naming another", token: fresh,
			req:  ledger.VerifyRequest{Tool: "payments.charge", MayVerify: bound("payments.*"), CallerTools: []string{"payments.*"}},
			want: ledger.ErrTokenWrongTool},
		{name: "key bound to the tool", token: fresh, req: right, status: fsm.StatusOK},
		{name: "unrestricted", token: fresh, req: ledger.VerifyRequest{}, status: fsm.StatusOK},

		{name: "old token, unrestricted", token: old, req: ledger.VerifyRequest{}, status: fsm.StatusOK},
		{name: "old token, key bound to the intent's tool", token: old, req: right, status: fsm.StatusOK},
		{name: "old token, key bound to another tool", token: old,
			req:  ledger.VerifyRequest{MayVerify: bound("email.*"), CallerTools: []string{"email.*"}},
			want: ledger.ErrTokenToolForbidden, detail: `tool "payments.refund"`},
		{name: "old token, request names another tool", token: old, req: ledger.VerifyRequest{Tool: "email.send"},
			want: ledger.ErrTokenWrongTool},
		{name: "old token whose tool cannot be told, restricted", token: oldOtherFP, req: right,
			want: ledger.ErrTokenToolForbidden, detail: "names no tool", unbound: true},
		{name: "old token whose tool cannot be told, request names a tool", token: oldOtherFP,
			req: ledger.VerifyRequest{Tool: granted}, want: ledger.ErrTokenWrongTool, detail: "names no tool", unbound: true},
		{name: "old token whose tool cannot be told, unrestricted", token: oldOtherFP, req: ledger.VerifyRequest{},
			status: fsm.StatusTokenMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, m := newService(t, ledger.Limits{})
			in, issued := grantToken(t, s, key, granted)
			tok := tc.token(t, m, in, issued)
			req := tc.req
			req.Token, req.Actor = tok, "tool-key"
			before := m.Proposed()
			r, claims, err := s.VerifyToken(ctx, req)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || r != nil {
					t.Fatalf("verify = %v, %v; want %v", r, err, tc.want)
				}
				if !strings.Contains(err.Error(), tc.detail) {
					t.Errorf("error %q does not say %q", err, tc.detail)
				}
				if claims.Key != key {
					t.Errorf("claims = %+v, want the token's", claims)
				}
				eq(t, "commands proposed by the refusal", m.Proposed()-before, 0)
				if got := m.Ledger().Get(namespace.Default, key); got.TokenUsed != 0 {
					t.Fatalf("the refused token was spent: %+v", got)
				}
				if tc.unbound {
					return
				}
				// Not burnt: the tool it is for spends it now.
				r, _, err := s.VerifyToken(ctx, ledger.VerifyRequest{Token: tok, Tool: granted, Actor: "refund-tool"})
				if err != nil || r.Status != fsm.StatusOK {
					t.Fatalf("the right tool's verify after the refusal: %v, %v", r, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if r.Status != tc.status {
				t.Fatalf("verify = %s (%s), want %s", r.Status, r.Detail, tc.status)
			}
		})
	}
}

// TestVerifyToolIsBounded: the request's tool is bounded and printable
// like every name; a bad one is refused before the token is looked at.
func TestVerifyToolIsBounded(t *testing.T) {
	s, m := newService(t, ledger.Limits{})
	_, tok := grantToken(t, s, key, tool)
	before := m.Proposed()
	for name, tl := range map[string]string{
		"too long":      strings.Repeat("t", 4096),
		"not printable": "payments.refund\x1b[31m",
	} {
		_, _, err := s.VerifyToken(context.Background(), ledger.VerifyRequest{Token: tok, Tool: tl})
		var fe *ledger.FieldError
		if !errors.Is(err, ledger.ErrBadRequest) || !errors.As(err, &fe) || fe.Field != "tool" {
			t.Errorf("%s: %v, want bad request on field tool", name, err)
		}
	}
	eq(t, "commands proposed", m.Proposed()-before, 0)
}

// TestClaimCarriesTheGrantsToken: Claim signs a grant's execution token
// with the claim (the token IssueToken signs for that grant, which
// verifies), answers the holder's repeat with the same token, and gives
// no token with any other answer: a refusal, a divergent claim, a
// duplicate.
func TestClaimCarriesTheGrantsToken(t *testing.T) {
	s, _ := newService(t, ledger.Limits{})
	ctx := context.Background()
	payload := `{"order":"ord_98231","amount":100}`
	claim := func(o, p string, want fsm.Status) *ledger.Claimed {
		t.Helper()
		c, err := s.Claim(ctx, claimReq(key, o, p))
		if err != nil || c.Status != want {
			t.Fatalf("claim by %s: %+v, %v; want %s", o, c, err, want)
		}
		return c
	}
	g := claim(owner, payload, fsm.StatusGranted)
	if g.Token == "" {
		t.Fatal("a grant without its execution token")
	}
	if issued, err := s.IssueToken(ctx, g.Intent); err != nil || issued != g.Token {
		t.Fatalf("IssueToken on the grant: %q, %v; want the claim's token", issued, err)
	}
	if again := claim(owner, payload, fsm.StatusGranted); again.Token != g.Token {
		t.Fatal("the holder's repeat carries another token")
	}
	for _, tc := range []struct {
		name, owner, payload string
		want                 fsm.Status
	}{
		{"another owner while held", "other", payload, fsm.StatusInFlight},
		{"another payload", "other", `{"order":"ord_98231","amount":200}`, fsm.StatusDivergent},
	} {
		if c := claim(tc.owner, tc.payload, tc.want); c.Token != "" {
			t.Errorf("%s: %s carries a token", tc.name, c.Status)
		}
	}
	if _, err := s.Complete(ctx, ledger.CompleteRequest{Key: key, Owner: owner, FencingToken: g.Intent.FencingToken,
		Outcome: fsm.OutcomeExecuted}); err != nil {
		t.Fatal(err)
	}
	if d := claim("retrier", payload, fsm.StatusDuplicate); d.Token != "" {
		t.Error("a duplicate carries a token")
	}
	if _, _, err := s.VerifyToken(ctx, ledger.VerifyRequest{Token: g.Token}); err != nil {
		t.Fatalf("the claim's token does not verify: %v", err)
	}
}
