package httpapi

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
	"github.com/intentledger/intentd/token"
)

// snapshotOfKeys is a snapshot of a ledger holding keys.
func snapshotOfKeys(t *testing.T, keys ...fsm.SigningKey) []byte {
	t.Helper()
	mem := ledgertest.NewMemory(epoch)
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

// TestRestoreRefusesPlaintextSeedsUnderAKEK: a node with a key-encryption
// key answers 422 bad_snapshot to a snapshot holding a plaintext signing
// seed, and hands nothing to Raft; sealed seeds, or a node without a KEK,
// restore as before.
func TestRestoreRefusesPlaintextSeedsUnderAKEK(t *testing.T) {
	kek, err := token.NewKEK(bytes.Repeat([]byte{9}, token.KEKSize))
	if err != nil {
		t.Fatal(err)
	}
	seed := bytes.Repeat([]byte{4}, 32)
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
		refused  bool
	}{
		{"KEK, a plaintext seed", kek, snapshotOfKeys(t, plain), true},
		{"KEK, a plaintext seed beside a sealed one", kek, snapshotOfKeys(t, sealedKey, plain), true},
		{"KEK, a sealed seed", kek, snapshotOfKeys(t, sealedKey), false},
		{"no KEK, a plaintext seed", nil, snapshotOfKeys(t, plain), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snaps := &fakeSnapshots{restored: make(chan []byte, 1)}
			e := newEnvWith(t, ledger.Config{KEK: tc.kek}, func(c *Config) {
				c.Snapshots = snaps
			})
			rep := e.do(t, http.MethodPost, "/v1/admin/snapshot/restore?force=true", tc.snapshot)
			if !tc.refused {
				if rep.status != http.StatusOK {
					t.Fatalf("restore: %s", rep)
				}
				if got := <-snaps.restored; !bytes.Equal(got, tc.snapshot) {
					t.Fatal("the snapshot restored is not the one sent")
				}
				return
			}
			p := problemOf(t, rep, http.StatusUnprocessableEntity, CodeBadSnapshot)
			if !strings.Contains(p.Detail, "plaintext") || !strings.Contains(p.Detail, "plain-1") {
				t.Errorf("detail %q does not say which key is in the clear", p.Detail)
			}
			select {
			case <-snaps.restored:
				t.Fatal("a refused snapshot was restored")
			default:
			}
		})
	}
}
