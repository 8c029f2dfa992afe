package fsm_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

func TestSigningKeys(t *testing.T) {
	h := newHarness(t)
	seed := bytes.Repeat([]byte{7}, 32)
	h.must(&fsm.AddSigningKey{Key: fsm.SigningKey{ID: "bad id!", Seed: seed}}, fsm.StatusMalformed)
	h.must(&fsm.AddSigningKey{Key: fsm.SigningKey{ID: "k1", Seed: seed[:16]}}, fsm.StatusMalformed)
	for _, id := range []string{"k1", "k2", "k3", "k4", "k5"} {
		h.must(&fsm.AddSigningKey{Key: fsm.SigningKey{ID: id, Seed: seed}}, fsm.StatusOK)
	}
	h.must(&fsm.AddSigningKey{Key: fsm.SigningKey{ID: "k5", Seed: seed}}, fsm.StatusOK) // a retry
	var ids []string
	for _, k := range h.l.SigningKeys() {
		ids = append(ids, k.ID)
	}
	eq(t, "kept keys", strings.Join(ids, ","), "k2,k3,k4,k5")
	restored := checkSnapshotRoundTrip(t, h.l)
	eq(t, "keys survive a snapshot", len(restored.SigningKeys()), 4)
}
