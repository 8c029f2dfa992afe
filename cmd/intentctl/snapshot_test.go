package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// fakeSnaps serves snapshots of an in-memory fsm.Machine.
type fakeSnaps struct {
	mu       sync.Mutex
	l        *fsm.Machine
	restored []byte
}

type fakeSnap struct{ l *fsm.Machine }

func (s fakeSnap) Index() uint64 { return s.l.AppliedIndex() }
func (s fakeSnap) Intents() int  { return s.l.Len() }
func (s fakeSnap) Write(w io.Writer) (cluster.SnapshotInfo, error) {
	return cluster.SnapshotInfo{Index: s.Index(), Intents: s.Intents(), Digest: s.l.Digest()}, s.l.WriteSnapshot(w)
}

func (f *fakeSnaps) TakeSnapshot(context.Context) (cluster.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeSnap{f.l.Clone()}, nil
}

func (f *fakeSnaps) Restore(_ context.Context, data []byte, force bool) (cluster.SnapshotInfo, error) {
	l, err := fsm.Restore(bytes.NewReader(data))
	if err != nil {
		return cluster.SnapshotInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.l.Len() > 0 && !force {
		return cluster.SnapshotInfo{}, cluster.ErrNotEmpty
	}
	f.l, f.restored = l, data
	return cluster.SnapshotInfo{Index: l.AppliedIndex(), Intents: l.Len(), Digest: l.Digest(), Bytes: int64(len(data))}, nil
}

func ledgerWithClaims(t *testing.T, keys ...string) *fsm.Machine {
	t.Helper()
	l := fsm.New()
	for i, k := range keys {
		payload, fp, err := fsm.Fingerprint("t", []byte(`{"k":1}`))
		if err != nil {
			t.Fatal(err)
		}
		data, err := fsm.Encode(epoch.UnixNano(), &fsm.Claim{Namespace: "default", Key: k, Tool: "t", Owner: "o",
			Payload: payload, Fingerprint: fp, LeaseMS: 60_000, DedupeWindowMS: 60_000})
		if err != nil {
			t.Fatal(err)
		}
		if r := l.Apply(uint64(i+1), data); r.Status != fsm.StatusGranted {
			t.Fatalf("claim %s: %+v", k, r)
		}
	}
	return l
}

func snapEnv(t *testing.T, snaps *fakeSnaps) string {
	t.Helper()
	return newEnv(t, clienttest.WithSnapshots(snaps)).addr
}

func TestSnapshotSaveVerifiesAndRestoreRefusesBadFiles(t *testing.T) {
	src := &fakeSnaps{l: ledgerWithClaims(t, "a", "b", "c")}
	addr := snapEnv(t, src)
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")
	r := runCLI(t, "--addr", addr, "--retries", "0", "snapshot", "save", file)
	expect(t, r, exitOK, "saved "+file, "3 intents", "sha256 "+src.l.Digest(), "(verified)")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp-*")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}

	dst := &fakeSnaps{l: fsm.New()}
	daddr := snapEnv(t, dst)
	bad := filepath.Join(dir, "bad.snap")
	corrupt := bytes.Clone(data)
	corrupt[len(corrupt)/2] ^= 0x20
	if err := os.WriteFile(bad, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"corrupt file (checked before sending)", []string{"snapshot", "restore", bad}, exitUsage},
		{"missing file", []string{"snapshot", "restore", filepath.Join(dir, "nope")}, exitUsage},
		{"no subcommand", []string{"snapshot"}, exitUsage},
		{"good file", []string{"snapshot", "restore", file}, exitOK},
		{"again: the ledger is not empty", []string{"snapshot", "restore", file}, exitError},
		{"again with --force", []string{"snapshot", "restore", "--force", file}, exitOK},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"--addr", daddr, "--retries", "0"}, tt.args...)...)
			if r.code != tt.code {
				t.Fatalf("want exit %d, got %s", tt.code, r)
			}
		})
	}
	if !bytes.Equal(dst.restored, data) {
		t.Fatal("the cluster did not receive the file byte for byte")
	}
}

// snapshot dump writes a saved snapshot as JSON lines: one intent per
// line, a view for jq that Restore refuses (it is not a snapshot).
func TestSnapshotDump(t *testing.T) {
	l := ledgerWithClaims(t, "a", "b")
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.snap")
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, snap.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "snapshot", "dump", file)
	expect(t, r, exitOK, `"key":"a"`, `"key":"b"`, `"format":"intentd-ledger-dump"`)
	out := filepath.Join(dir, "backup.jsonl")
	r = runCLI(t, "snapshot", "dump", "--out", out, file)
	expect(t, r, exitOK)
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fsm.Restore(f); !errors.Is(err, fsm.ErrBadSnapshot) {
		t.Fatalf("Restore of the dump: %v, want %v", err, fsm.ErrBadSnapshot)
	}
	if r := runCLI(t, "snapshot", "dump", filepath.Join(dir, "nope")); r.code == exitOK {
		t.Fatalf("dump of a missing file: %s", r)
	}
}

// TestSnapshotSaveFileMode: a saved snapshot (every intent, the signing
// keys) is readable by its owner only.
func TestSnapshotSaveFileMode(t *testing.T) {
	addr := snapEnv(t, &fakeSnaps{l: ledgerWithClaims(t, "a")})
	file := filepath.Join(t.TempDir(), "backup.snap")
	expect(t, runCLI(t, "--addr", addr, "--retries", "0", "snapshot", "save", file), exitOK, "(verified)")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("snapshot file mode %#o, want 0600", fi.Mode().Perm())
	}
}
