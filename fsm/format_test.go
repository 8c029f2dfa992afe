package fsm_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// The files in testdata/v1 pin the version 1 formats, byte for byte: the
// log entries of everyCommand (entries.hex, one hex line each) and a
// snapshot of goldenLedger (snapshot.snap), which holds a record in every
// state, records bound to a key and to none, a sealed and a plaintext
// signing key, a policy and settings. A change that alters a byte of
// either format is a new EncodingVersion or SnapshotVersion, never an
// edit of these files; -update-golden rewrites them when a new version
// starts.
var updateGolden = flag.Bool("update-golden", false, "rewrite the golden files in testdata/v1 from this build")

const goldenDir = "testdata/v1"

// goldenLedger is fuzzLedger after the entries of everyCommand, a
// plaintext signing key and a policy.
func goldenLedger(t *testing.T) *fsm.Machine {
	l, last := fuzzLedger(t)
	// The snapshot's content was pinned before NoteDuplicates,
	// NoteRefusals and NoteDivergent existed.
	cmds := slices.DeleteFunc(everyCommand(), func(c fsm.Command) bool {
		return c.Type() == fsm.TypeNoteDuplicates || c.Type() == fsm.TypeNoteRefusals || c.Type() == fsm.TypeNoteDivergent
	})
	cmds = append(cmds,
		&fsm.AddSigningKey{Key: fsm.SigningKey{ID: "k-plain", Seed: bytes.Repeat([]byte{7}, 32)}},
		&fsm.PutPolicy{Policy: fsm.Policy{Name: "gated", Tools: []string{"refund.*"}, RequireApproval: true,
			AllowSelfApproval: true, Approvers: []string{"alice"}}, Actor: "admin"})
	for i, cmd := range cmds {
		data, err := fsm.Encode(t0+ms(int64(i)), cmd)
		if err != nil {
			t.Fatal(err)
		}
		l.Apply(last+1+uint64(i), data)
	}
	return l
}

// golden returns the golden file name, or writes it first with
// -update-golden.
func golden(t *testing.T, name string, current []byte) []byte {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *updateGolden {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, current, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to write it)", err)
	}
	return b
}

// TestGoldenEntries: the version 1 entries decode to the commands they
// were written from, and this build writes them byte for byte.
func TestGoldenEntries(t *testing.T) {
	cmds := everyCommand()
	var current strings.Builder
	for _, cmd := range cmds {
		data, err := fsm.Encode(t0, cmd)
		if err != nil {
			t.Fatal(err)
		}
		current.WriteString(hex.EncodeToString(data) + "\n")
	}
	lines := strings.Fields(string(golden(t, "entries.hex", []byte(current.String()))))
	if len(lines) != len(cmds) {
		t.Fatalf("%d golden entries for %d commands", len(lines), len(cmds))
	}
	for i, line := range lines {
		data, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fsm.Decode(data)
		if err != nil {
			t.Fatalf("entry %d (%T): %v", i, cmds[i], err)
		}
		if !reflect.DeepEqual(got, cmds[i]) {
			t.Fatalf("entry %d decodes to\n%#v\nwant\n%#v", i, got, cmds[i])
		}
		again, err := fsm.Encode(t0, got)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("entry %d (%T): this build writes\n%q\nthe golden entry is\n%q (%v)", i, cmds[i], again, data, err)
		}
	}
}

// TestGoldenSnapshot: the version 1 snapshot restores, and the restored
// ledger writes it again byte for byte.
func TestGoldenSnapshot(t *testing.T) {
	l := goldenLedger(t)
	want := golden(t, "snapshot.snap", snapshotOf(t, l))
	restored, err := fsm.Restore(bytes.NewReader(want))
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got := snapshotOf(t, restored); !bytes.Equal(got, want) {
		t.Fatal("the restored golden snapshot writes other bytes")
	}
	if restored.Len() != l.Len() || len(restored.SigningKeys()) != 2 || len(restored.Policies()) < 2 {
		t.Fatalf("restored %d intents, %d signing keys, %d policies", restored.Len(), len(restored.SigningKeys()),
			len(restored.Policies()))
	}
	checkSnapshotRoundTrip(t, restored)
}
