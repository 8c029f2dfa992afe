package ledger_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
	"github.com/intentledger/intentd/token"
)

// snapshotWithKeys is a snapshot of a ledger holding keys.
func snapshotWithKeys(t *testing.T, keys ...fsm.SigningKey) []byte {
	t.Helper()
	mem := ledgertest.NewMemory(start)
	for _, k := range keys {
		if r := mem.Seed(&fsm.AddSigningKey{Key: k}); r.Status != fsm.StatusOK {
			t.Fatalf("add key %s: %+v", k.ID, r)
		}
	}
	var buf bytes.Buffer
	if err := mem.Ledger().WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestCheckRestoreKeys: a node with a KEK refuses a snapshot holding a
// plaintext seed, and only then; a node without one accepts every form.
func TestCheckRestoreKeys(t *testing.T) {
	kek := kekOf(t, 7)
	seed := bytes.Repeat([]byte{3}, 32)
	sealed, err := kek.Seal(rand.Reader, "sealed-1", seed)
	if err != nil {
		t.Fatal(err)
	}
	plain := fsm.SigningKey{ID: "plain-1", Seed: seed}
	sealedKey := fsm.SigningKey{ID: "sealed-1", Sealed: sealed}
	for _, tc := range []struct {
		name     string
		kek      *token.KEK
		snapshot []byte
		want     error // nil: accepted
	}{
		{"KEK, a plaintext seed", kek, snapshotWithKeys(t, plain), ledger.ErrPlaintextSeedRestore},
		{"KEK, a plaintext seed beside sealed ones", kek, snapshotWithKeys(t, sealedKey, plain), ledger.ErrPlaintextSeedRestore},
		{"KEK, sealed seeds only", kek, snapshotWithKeys(t, sealedKey), nil},
		{"KEK, a seed sealed with another KEK", kekOf(t, 8), snapshotWithKeys(t, sealedKey), ledger.ErrForeignKEKRestore},
		{"KEK, no keys", kek, snapshotWithKeys(t), nil},
		{"KEK, not a snapshot", kek, []byte("garbage\n"), fsm.ErrBadSnapshot},
		{"no KEK, a plaintext seed", nil, snapshotWithKeys(t, plain), nil},
		{"no KEK, not a snapshot", nil, []byte("garbage\n"), nil}, // not read: Restore judges it
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := kekService(t, ledgertest.NewMemory(start), tc.kek)
			defer s.Close()
			err := s.CheckRestoreKeys(bytes.NewReader(tc.snapshot))
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			case errors.Is(tc.want, ledger.ErrPlaintextSeedRestore) &&
				(!errors.Is(err, fsm.ErrBadSnapshot) || !strings.Contains(err.Error(), "plain-1")):
				t.Fatalf("err = %v: want it to wrap fsm.ErrBadSnapshot and name the key", err)
			}
		})
	}
}
