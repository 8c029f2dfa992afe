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
	"github.com/intentledger/intentd/token"
)

// TestRotateKeyRefusesToDropALiveKey: with fsm.MaxSigningKeys keys, a
// rotation drops the oldest; it is refused (ErrSigningKeyInUse, nothing
// written, the old key's tokens still verify) while tokens the oldest key
// signed may be live: until the key after it was added plus the longest
// token TTL (a policy's, at least the default 15 min). Past that, or with
// Force, it goes through. The ledger's clock starts a day ahead of the
// wall clock, so the ledger's time decides, not how fast the test runs.
func TestRotateKeyRefusesToDropALiveKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ttl     time.Duration // a policy's token TTL; 0: none
		after   time.Duration // ledger time passed after the last rotation
		force   bool
		refused []string // the detail's words when refused; nil: rotated
	}{
		{name: "inside the default TTL", after: 10 * time.Minute,
			refused: []string{"15m0s", "the built-in default", "--force", "13m0s ago"}},
		{name: "past the default TTL", after: 16 * time.Minute},
		{name: "inside a policy's longer TTL", ttl: time.Hour, after: 16 * time.Minute,
			refused: []string{"1h0m0s", `policy "slow"`}},
		{name: "past a policy's longer TTL", ttl: time.Hour, after: 61 * time.Minute},
		{name: "forced inside the TTL", force: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem := ledgertest.NewMemory(time.Now().Add(24 * time.Hour))
			s := ledgertest.NewService(t, mem, ledger.Config{})
			tool := "payments.refund"
			if tc.ttl > 0 {
				tool = "slow.call" // its token lives tc.ttl
				if _, err := s.PutPolicy(ctx, fsm.Policy{Name: "slow", Tools: []string{"slow.*"},
					TokenTTLMS: tc.ttl.Milliseconds()}, 0, "admin"); err != nil {
					t.Fatal(err)
				}
			}
			_, tok0 := grantToken(t, s, "first", tool) // adds the first key
			for range fsm.MaxSigningKeys - 1 {
				mem.Advance(time.Minute)
				if _, err := s.RotateKey(ctx); err != nil {
					t.Fatalf("rotation while under %d keys: %v", fsm.MaxSigningKeys, err)
				}
			}
			before := mem.Ledger().SigningKeys()
			mem.Advance(tc.after)
			mustClaim(t, s, claimReq("later", owner, `{"n":1}`), fsm.StatusGranted) // the ledger's time moves

			kid, err := s.RotateKeyWith(ctx, ledger.RotateOptions{Force: tc.force})
			after := mem.Ledger().SigningKeys()
			if tc.refused != nil {
				if !errors.Is(err, ledger.ErrSigningKeyInUse) {
					t.Fatalf("rotation: %v, %q; want ErrSigningKeyInUse", err, kid)
				}
				for _, w := range append(tc.refused, before[0].ID, before[1].ID) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the refusal does not say %q: %v", w, err)
					}
				}
				if len(after) != len(before) || after[0].ID != before[0].ID {
					t.Fatalf("a refused rotation changed the keys: %v -> %v", before, after)
				}
				verifyOffline(t, s, mem, tok0, true)
				return
			}
			if err != nil {
				t.Fatalf("rotation: %v", err)
			}
			if len(after) != fsm.MaxSigningKeys || after[len(after)-1].ID != kid || after[0].ID != before[1].ID {
				t.Fatalf("keys after the rotation: %v (before %v, new %s)", after, before, kid)
			}
			verifyOffline(t, s, mem, tok0, false)
		})
	}
}

// verifyOffline checks tok against the service's published key set at the
// ledger's time: it verifies, or fails as signed by an unknown key.
func verifyOffline(t *testing.T, s *ledger.Service, mem *ledgertest.Memory, tok string, valid bool) {
	t.Helper()
	set, err := s.JWKS(context.Background(), ledger.Stale)
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := token.LookupFromJWKS(set)
	if err != nil {
		t.Fatal(err)
	}
	_, err = token.Verify(tok, lookup, mem.Now())
	if valid && err != nil {
		t.Fatalf("the first key's token no longer verifies: %v", err)
	}
	if !valid && !errors.Is(err, token.ErrUnknownKey) {
		t.Fatalf("the first key's token after its key was dropped: %v, want ErrUnknownKey", err)
	}
}
