package fsm_test

import (
	"fmt"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// TestSnapshotRoundTripWithPrincipals: records bound to a key, in every
// state, come back from a snapshot with their principal, and the
// encoding stays byte-identical.
func TestSnapshotRoundTripWithPrincipals(t *testing.T) {
	l, _ := fuzzLedger(t) // even keys bound to P
	restored := checkSnapshotRoundTrip(t, l)
	for i, s := range fsm.States {
		want := ""
		if i%2 == 0 {
			want = "P"
		}
		in := restored.Get(ns, fmt.Sprintf("k%d", i))
		if in == nil || in.Principal != want {
			t.Fatalf("%s record restored as %+v, want principal %q", s, in, want)
		}
	}
	// The binding holds on the restored ledger as on the original.
	for _, led := range []*fsm.Machine{l.Clone(), restored} {
		data, err := fsm.Encode(t0+ms(leaseMS)*3, as("Q", false, commit("k4", "A")))
		if err != nil {
			t.Fatal(err)
		}
		if r := led.Apply(led.AppliedIndex()+1, data); r.Status != fsm.StatusNotGrantHolder {
			t.Fatalf("commit by another key after a restore: %s %s", r.Status, r.Detail)
		}
	}
}
