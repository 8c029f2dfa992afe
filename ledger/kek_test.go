package ledger_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
	"github.com/intentledger/intentd/token"
)

// recordingReplicator is a ledgertest.Memory that keeps the log entry of
// every AddSigningKey proposed, encoded as the cluster encodes it.
type recordingReplicator struct {
	*ledgertest.Memory
	mu      sync.Mutex
	entries [][]byte
	keys    []fsm.SigningKey
}

func (r *recordingReplicator) Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	if add, ok := cmd.(*fsm.AddSigningKey); ok {
		data, err := fsm.Encode(r.Now().UnixNano(), cmd)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.entries = append(r.entries, data)
		r.keys = append(r.keys, add.Key)
		r.mu.Unlock()
	}
	return r.Memory.Propose(ctx, cmd)
}

// kekOf returns a KEK made of b repeated.
func kekOf(t *testing.T, b byte) *token.KEK {
	t.Helper()
	k, err := token.NewKEK(bytes.Repeat([]byte{b}, token.KEKSize))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// logBuffer collects a service's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// kekService is a service over r with kek (nil: none) logging into a
// fresh buffer.
func kekService(t testing.TB, r ledger.Replicator, kek *token.KEK) (*ledger.Service, *logBuffer) {
	logs := &logBuffer{}
	return ledgertest.NewService(t, r, ledger.Config{KEK: kek, Log: logs.logger()}), logs
}

// kekGrant claims key for owner and returns the granted intent.
func kekGrant(t *testing.T, s *ledger.Service, key, owner string) *fsm.Intent {
	t.Helper()
	r, err := s.Claim(context.Background(), ledger.ClaimRequest{Key: key, Tool: "payments.refund", Owner: owner,
		Payload: json.RawMessage(`{"key":"` + key + `"}`)})
	if err != nil || r.Status != fsm.StatusGranted {
		t.Fatalf("claim %s: %v %v", key, r, err)
	}
	return r.Intent
}

// kekIssue signs in's token.
func kekIssue(t *testing.T, s *ledger.Service, in *fsm.Intent) string {
	t.Helper()
	tok, err := s.IssueToken(context.Background(), in)
	if err != nil {
		t.Fatalf("issue %s: %v", in.Key, err)
	}
	return tok
}

// kekVerify spends tok and wants it valid.
func kekVerify(t *testing.T, s *ledger.Service, tok string) {
	t.Helper()
	r, _, err := s.VerifyToken(context.Background(), ledger.VerifyRequest{Token: tok, Actor: "tool"})
	if err != nil || r.Status != fsm.StatusOK {
		t.Fatalf("verify: %v %v", r, err)
	}
}

// seedEncodings are the forms a seed could leak in.
func seedEncodings(seed []byte) map[string][]byte {
	return map[string][]byte{
		"raw":          seed,
		"base64":       []byte(base64.StdEncoding.EncodeToString(seed)),
		"base64 (raw)": []byte(base64.RawStdEncoding.EncodeToString(seed)),
		"base64url":    []byte(base64.RawURLEncoding.EncodeToString(seed)),
		"hex":          []byte(hex.EncodeToString(seed)),
	}
}

// TestSealedSeedFormatAgrees: the state machine's shape check and the
// token package's format are the same.
func TestSealedSeedFormatAgrees(t *testing.T) {
	if fsm.SealedSeedSize != token.SealedSeedSize || fsm.SealedSeedVersion != token.SealedVersion {
		t.Fatalf("fsm: %d bytes, version %d; token: %d bytes, version %d",
			fsm.SealedSeedSize, fsm.SealedSeedVersion, token.SealedSeedSize, token.SealedVersion)
	}
}

// TestKEKKeepsSeedsOutOfTheLog: with a KEK, neither the first key (made by
// the first grant) nor a rotated one puts its seed in the log or the
// snapshot, and tokens are issued, published and verified as usual.
func TestKEKKeepsSeedsOutOfTheLog(t *testing.T) {
	rec := &recordingReplicator{Memory: ledgertest.NewMemory(time.Now())}
	kek := kekOf(t, 1)
	s, logs := kekService(t, rec, kek)
	ctx := context.Background()

	first := kekGrant(t, s, "refund:1", "agent")
	tok1 := kekIssue(t, s, first)
	if _, err := s.RotateKey(ctx); err != nil {
		t.Fatal(err)
	}
	second := kekGrant(t, s, "refund:2", "agent")
	tok2 := kekIssue(t, s, second)

	if len(rec.entries) != 2 {
		t.Fatalf("%d AddSigningKey proposed, want 2 (first grant, rotation)", len(rec.entries))
	}
	var snap bytes.Buffer
	if err := rec.Ledger().WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	for i, k := range rec.keys {
		if len(k.Seed) != 0 || len(k.Sealed) != token.SealedSeedSize {
			t.Fatalf("key %s proposed with a %d-byte seed and a %d-byte sealed seed", k.ID, len(k.Seed), len(k.Sealed))
		}
		seed, err := kek.Open(k.ID, k.Sealed)
		if err != nil {
			t.Fatalf("the proposed key %s does not open with the KEK: %v", k.ID, err)
		}
		for form, b := range seedEncodings(seed) {
			if bytes.Contains(rec.entries[i], b) {
				t.Errorf("the log entry of key %s holds its seed (%s): %s", k.ID, form, rec.entries[i])
			}
			if bytes.Contains(snap.Bytes(), b) {
				t.Errorf("the snapshot holds the seed of key %s (%s)", k.ID, form)
			}
		}
	}
	if second.TokenKey != rec.keys[1].ID {
		t.Fatalf("the grant after the rotation names key %q, not the rotated %s", second.TokenKey, rec.keys[1].ID)
	}

	// Published: the key set holds both keys and checks both tokens offline.
	set, err := s.JWKS(ctx, ledger.Stale)
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := token.LookupFromJWKS(set)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{tok1, tok2} {
		if _, err := token.Verify(tok, lookup, time.Now()); err != nil {
			t.Fatalf("offline verification: %v", err)
		}
	}
	// Verified online, once each; answered twice, a grant has the same token.
	kekVerify(t, s, tok1)
	kekVerify(t, s, tok2)
	if again := kekIssue(t, s, second); again != tok2 {
		t.Fatal("the same grant signed twice differs")
	}
	if logs.String() != "" {
		t.Errorf("a node with the KEK logged: %s", logs)
	}
}

// TestWithoutTheKEKSealedKeysFailClearly: a service with no KEK, or
// another one, over a state whose signing key is sealed cannot issue,
// verify or publish with it: every call fails with ErrSigningKeySealed
// (saying which), none panics or passes a genuine token off as invalid,
// none spends a token, it logs once, and it refuses to rotate (which would
// put a plaintext seed in the log, or seal one no other node opens).
func TestWithoutTheKEKSealedKeysFailClearly(t *testing.T) {
	mem := ledgertest.NewMemory(time.Now())
	good, _ := kekService(t, mem, kekOf(t, 1))
	in := kekGrant(t, good, "refund:1", "agent")
	tok := kekIssue(t, good, in)
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		kek   *token.KEK
		cause error
		text  string
	}{
		{"no KEK", nil, token.ErrNoKEK, "no key-encryption key"},
		{"another KEK", kekOf(t, 2), token.ErrWrongKEK, "does not open with this key-encryption key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := kekService(t, mem, tc.kek)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ledger.ErrSigningKeySealed) || !errors.Is(err, tc.cause) ||
					errors.Is(err, ledger.ErrTokenInvalid) || !strings.Contains(err.Error(), tc.text) ||
					!strings.Contains(err.Error(), "KEK") {
					t.Fatalf("%s: %v; want ErrSigningKeySealed with %v", what, err, tc.cause)
				}
			}
			for range 3 {
				_, err := s.IssueToken(ctx, in)
				check("issue", err)
				r, _, err := s.VerifyToken(ctx, ledger.VerifyRequest{Token: tok, Actor: "tool"})
				if r != nil {
					t.Fatalf("verify answered %+v", r)
				}
				check("verify", err)
				set, err := s.JWKS(ctx, ledger.Stale)
				if set != nil {
					t.Fatalf("key set served: %s", set)
				}
				check("key set", err)
				_, err = s.RotateKey(ctx)
				check("rotate", err)
			}
			if n := len(mem.Ledger().SigningKeys()); n != 1 {
				t.Fatalf("%d signing keys; the refused rotation added one", n)
			}
			if n := strings.Count(logs.String(), "cannot open it"); n != 1 {
				t.Fatalf("logged %d times, want once:\n%s", n, logs)
			}
			if !strings.Contains(logs.String(), "key_id="+in.TokenKey) || !strings.Contains(logs.String(), "KEK") {
				t.Fatalf("the log does not say which key and what to do: %s", logs)
			}
		})
	}
	// A service never told about KEKs behaves as one without.
	_, err := ledgertest.NewService(t, mem, ledger.Config{}).IssueToken(ctx, in)
	if !errors.Is(err, token.ErrNoKEK) {
		t.Fatalf("issue without a KEK: %v", err)
	}
	// The token was never spent: the node with the KEK verifies it.
	kekVerify(t, good, tok)
}

// TestMixedPlaintextAndSealedKeys: keys added before the KEK stay in the
// clear and keep working beside sealed ones, on nodes with the KEK and,
// for the plaintext keys, on nodes without.
func TestMixedPlaintextAndSealedKeys(t *testing.T) {
	mem := ledgertest.NewMemory(time.Now())
	ctx := context.Background()
	plain, _ := kekService(t, mem, nil)
	kekIssue(t, plain, kekGrant(t, plain, "refund:first", "agent")) // adds the (plaintext) first key
	old := kekGrant(t, plain, "refund:old", "agent")
	if old.TokenKey == "" {
		t.Fatal("a grant after the first key names no key")
	}
	oldTok := kekIssue(t, plain, old)

	sealed, _ := kekService(t, mem, kekOf(t, 1))
	if _, err := sealed.RotateKey(ctx); err != nil {
		t.Fatal(err)
	}
	keys := mem.Ledger().SigningKeys()
	if len(keys) != 2 || len(keys[0].Seed) != 32 || keys[0].Sealed != nil || keys[1].Seed != nil || len(keys[1].Sealed) != token.SealedSeedSize {
		t.Fatalf("keys: want a plaintext then a sealed one, got %+v", keys)
	}
	fresh := kekGrant(t, sealed, "refund:new", "agent")
	freshTok := kekIssue(t, sealed, fresh)

	// The node without the KEK still signs the old grant with its
	// plaintext key (the same token), but not the new one.
	if again := kekIssue(t, plain, old); again != oldTok {
		t.Fatal("the old grant's token changed")
	}
	if _, err := plain.IssueToken(ctx, fresh); !errors.Is(err, ledger.ErrSigningKeySealed) {
		t.Fatalf("issue with a sealed key and no KEK: %v", err)
	}
	if _, err := plain.JWKS(ctx, ledger.Stale); !errors.Is(err, ledger.ErrSigningKeySealed) {
		t.Fatalf("key set with a sealed key and no KEK: %v", err)
	}

	// The node with the KEK publishes and verifies both.
	set, err := sealed.JWKS(ctx, ledger.Stale)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(set), keys[0].ID) || !strings.Contains(string(set), keys[1].ID) {
		t.Fatalf("key set %s lacks a key", set)
	}
	kekVerify(t, sealed, oldTok)
	kekVerify(t, sealed, freshTok)
}

// TestSealedKeyOpenedOnce: a sealed key is opened when first used and its
// Signer cached by key id; later grants sign without opening it again
// (shown by taking the KEK away: the cached key still signs).
func TestSealedKeyOpenedOnce(t *testing.T) {
	mem := ledgertest.NewMemory(time.Now())
	s, _ := kekService(t, mem, kekOf(t, 1))
	tok := kekIssue(t, s, kekGrant(t, s, "refund:1", "agent"))
	ledger.DropKEK(s)
	in := kekGrant(t, s, "refund:2", "agent")
	if got := kekIssue(t, s, in); got == "" || got == tok {
		t.Fatal("no new token from the cached key")
	}
}

// TestClaimGrantedWithoutItsToken: a node that cannot open the signing
// key (sealed with a KEK it lacks) still returns the grant, with a
// *TokenNotIssuedError that wraps ErrSigningKeySealed and no token; the
// node with the KEK answers the holder's repeat with the grant and its
// token (the positive control).
func TestClaimGrantedWithoutItsToken(t *testing.T) {
	mem := ledgertest.NewMemory(time.Now())
	ctx := context.Background()
	sealed, _ := kekService(t, mem, kekOf(t, 1))
	if _, err := sealed.RotateKey(ctx); err != nil {
		t.Fatal(err)
	}
	plain, _ := kekService(t, mem, nil)
	req := ledger.ClaimRequest{Key: "refund:sealed", Tool: "payments.refund", Owner: "agent", Payload: json.RawMessage(`{}`)}
	c, err := plain.Claim(ctx, req)
	var noToken *ledger.TokenNotIssuedError
	if !errors.As(err, &noToken) || !errors.Is(err, ledger.ErrSigningKeySealed) {
		t.Fatalf("claim on a node without the KEK: %v, want a TokenNotIssuedError wrapping ErrSigningKeySealed", err)
	}
	if c == nil || c.Status != fsm.StatusGranted || c.Token != "" {
		t.Fatalf("claim on a node without the KEK: %+v, want the grant without a token", c)
	}
	again, err := sealed.Claim(ctx, req)
	if err != nil || again.Status != fsm.StatusGranted || again.Token == "" {
		t.Fatalf("the holder's repeat on the node with the KEK: %+v, %v", again, err)
	}
}
