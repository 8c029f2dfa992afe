package pebblestate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/intentledger/intentd/fsm"
)

// goldenSnapshot is fsm's pinned version 1 snapshot: every kind of record,
// policy, key and audit event.
const goldenSnapshot = "../testdata/v1/snapshot.snap"

// TestMachineOnPebbleMatchesMemory restores fsm's golden snapshot into a
// pebble store and into memory, checks that the pebble ledger writes the
// golden bytes back (through its store, a view and a reopen), then applies
// the same commands to both, committing and reopening on the way: every
// result and the digests agree.
func TestMachineOnPebbleMatchesMemory(t *testing.T) {
	golden, err := os.ReadFile(goldenSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "state")
	d := openTestDir(t, vfs.Default, path)
	onDisk, err := fsm.RestoreInto(d.Current(), bytes.NewReader(golden))
	if err != nil {
		t.Fatalf("restore into pebble: %v", err)
	}
	inMemory, err := fsm.Restore(bytes.NewReader(golden))
	if err != nil {
		t.Fatal(err)
	}
	snapshotOf := func(l *fsm.Machine) []byte {
		t.Helper()
		var b bytes.Buffer
		if err := l.WriteSnapshot(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if !bytes.Equal(snapshotOf(onDisk), golden) {
		t.Fatal("the ledger restored into pebble does not write the golden snapshot back")
	}
	view := onDisk.Clone()
	if !bytes.Equal(snapshotOf(view), golden) {
		t.Fatal("a view of the pebble ledger does not write the golden snapshot")
	}
	view.Release()

	// Reopen: what Commit wrote is all Open needs.
	index := onDisk.AppliedIndex()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openTestDir(t, vfs.Default, path)
	if onDisk, err = fsm.Open(d.Current()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotOf(onDisk), golden) {
		t.Fatal("the reopened pebble ledger does not write the golden snapshot")
	}

	at := inMemory.Now()
	fences := map[fsm.Ref]uint64{}
	statuses := map[fsm.Status]int{}
	for i := range 300 {
		at += 1e6
		data := command(t, i, at, fences)
		index++
		got, want := onDisk.Apply(index, data), inMemory.Apply(index, data)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("entry %d: on pebble %+v, in memory %+v", index, got, want)
		}
		statuses[want.Status]++
		if want.Status == fsm.StatusGranted {
			fences[fsm.Ref{Namespace: want.Intent.Namespace, Key: want.Intent.Key}] = want.Intent.FencingToken
		}
		if i%7 == 0 {
			onDisk.Commit(index)
		}
		if i == 150 {
			onDisk.Commit(index)
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			d = openTestDir(t, vfs.Default, path)
			if onDisk, err = fsm.Open(d.Current()); err != nil {
				t.Fatal(err)
			}
			if onDisk.StoredIndex() != index {
				t.Fatalf("reopened at stored index %d, want %d", onDisk.StoredIndex(), index)
			}
		}
	}
	onDisk.Commit(index)
	for _, s := range []fsm.Status{fsm.StatusGranted, fsm.StatusOK, fsm.StatusDuplicate} {
		if statuses[s] == 0 {
			t.Fatalf("no command answered %s (%v): the mix does not exercise the ledger", s, statuses)
		}
	}
	t.Logf("statuses: %v", statuses)
	if onDisk.Digest() != inMemory.Digest() {
		t.Fatal("digests differ after the same commands")
	}
	if !reflect.DeepEqual(onDisk.Counts(), inMemory.Counts()) || !reflect.DeepEqual(onDisk.Namespaces(), inMemory.Namespaces()) {
		t.Fatalf("counts or namespaces differ: %v %v, %v %v", onDisk.Counts(), onDisk.Namespaces(), inMemory.Counts(), inMemory.Namespaces())
	}
}

// command is the i-th of a mix of claims, completes, sweeps and a
// retention change, in two namespaces.
func command(t *testing.T, i int, at int64, fences map[fsm.Ref]uint64) []byte {
	t.Helper()
	ns := []string{"alpha", "beta"}[i%2]
	key := fmt.Sprintf("k%03d", i/3)
	var cmd fsm.Command
	switch i % 6 {
	case 0, 1, 3:
		if i%6 == 3 { // again the key case 0 claimed and case 2 completed: a duplicate
			ns, key = []string{"alpha", "beta"}[(i-3)%2], fmt.Sprintf("k%03d", (i-3)/3)
		}
		payload, fp, err := fsm.Fingerprint("tool", []byte(fmt.Sprintf(`{"n":%q}`, key)))
		if err != nil {
			t.Fatal(err)
		}
		cmd = &fsm.Claim{Namespace: ns, Key: key, Tool: "tool", Owner: "o", Payload: payload, Fingerprint: fp,
			LeaseMS: 5, DedupeWindowMS: 50}
	case 2:
		cmd = &fsm.Complete{Namespace: ns, Key: key, Owner: "o", FencingToken: fences[fsm.Ref{Namespace: ns, Key: key}], Outcome: fsm.OutcomeExecuted,
			Result: []byte(`{"ok":true}`)}
	case 4:
		cmd = &fsm.Expire{Keys: []fsm.Ref{{Namespace: ns, Key: key}, {Namespace: ns, Key: fmt.Sprintf("k%03d", i/3-1)}}}
	case 5:
		if i == 125 {
			cmd = &fsm.SetSettings{Settings: fsm.Settings{AuditRetention: 40}, Actor: "admin"}
		} else {
			cmd = &fsm.Purge{Keys: []fsm.Ref{{Namespace: ns, Key: fmt.Sprintf("k%03d", i/3-4)}}}
		}
	}
	data, err := fsm.Encode(at, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
