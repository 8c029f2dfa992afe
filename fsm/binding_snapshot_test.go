package fsm_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// The files in testdata/before-principals were written by the version
// before grants were bound to API keys (the last with EncodingBinary as
// its newest encoding): snapshots of a ledger with a record in every
// state, and the log entries of everyCommand in both of its encodings.
const beforePrincipals = "testdata/before-principals/"

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(beforePrincipals + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSnapshotWrittenBeforePrincipalsRestores: both snapshot versions an
// older node wrote restore, every record bound to no key, and the
// restored ledger writes the older node's version 3 bytes again: a record
// without a principal is framed as before.
func TestSnapshotWrittenBeforePrincipalsRestores(t *testing.T) {
	want := readTestdata(t, "snapshot-v3.snap")
	for _, name := range []string{"snapshot-v3.snap", "snapshot-v2.snap"} {
		t.Run(name, func(t *testing.T) {
			l, err := fsm.Restore(bytes.NewReader(readTestdata(t, name)))
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if l.Len() != len(fsm.States) {
				t.Fatalf("restored %d intents, want %d", l.Len(), len(fsm.States))
			}
			for i := range fsm.States {
				in := l.Get(ns, fmt.Sprintf("k%d", i))
				if in == nil || in.Principal != "" {
					t.Fatalf("k%d restored as %+v, want a record bound to no key", i, in)
				}
			}
			if got := snapshotOf(t, l); !bytes.Equal(got, want) {
				t.Fatalf("the restored ledger writes another snapshot than the older node did")
			}
			checkSnapshotRoundTrip(t, l)
		})
	}
}

// TestEntriesWrittenBeforePrincipalsDecode: the log entries an older node
// wrote decode to the commands it encoded, with no caller, and this
// version writes the same bytes for them in those encodings.
func TestEntriesWrittenBeforePrincipalsDecode(t *testing.T) {
	lines := strings.Fields(string(readTestdata(t, "entries.hex")))
	cmds := everyCommand()
	if len(lines) != 2*len(cmds) {
		t.Fatalf("%d entries for %d commands", len(lines), len(cmds))
	}
	for i, line := range lines {
		data, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		enc := []byte{fsm.EncodingJSON, fsm.EncodingBinary}[i%2]
		want := asOlderEncodingsCarry(cmds[i/2])
		if _, err := fsm.EncodeAs(enc, t0, want); err != nil { // stamps At
			t.Fatal(err)
		}
		got, err := fsm.Decode(data)
		if err != nil {
			t.Fatalf("entry %d (%T, encoding %d): %v", i, want, enc, err)
		}
		if data[1] != enc || !reflect.DeepEqual(got, want) {
			t.Fatalf("entry %d decodes to\n%#v\nwant\n%#v", i, got, want)
		}
		again, err := fsm.EncodeAs(enc, t0, cmds[i/2])
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("entry %d: this version writes\n%q\nthe older one wrote\n%q (%v)", i, again, data, err)
		}
	}
}

// TestSnapshotRoundTripWithPrincipals: records bound to a key, in every
// state, come back from both snapshot versions with their principal, and
// the encodings stay byte-identical.
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
	for _, led := range []*fsm.Ledger{l.Clone(), restored} {
		data, err := fsm.Encode(t0+ms(leaseMS)*3, as("Q", false, commit("k4", "A")))
		if err != nil {
			t.Fatal(err)
		}
		if r := led.Apply(led.AppliedIndex()+1, data); r.Status != fsm.StatusNotGrantHolder {
			t.Fatalf("commit by another key after a restore: %s %s", r.Status, r.Detail)
		}
	}
}
