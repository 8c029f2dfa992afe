package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"pgregory.net/rapid"
)

// testEntries are n command entries from index 1, each carrying a payload
// that names it ("payload-0001-0123456789"), appended at a fixed time.
func testEntries(n int) []*raft.Log {
	at := time.Date(2026, 12, 7, 21, 0, 0, 123456789, time.UTC)
	out := make([]*raft.Log, n)
	for i := range out {
		out[i] = &raft.Log{Index: uint64(i + 1), Term: 2, Type: raft.LogCommand,
			Data: []byte(fmt.Sprintf("payload-%04d-0123456789", i+1)), AppendedAt: at.Add(time.Duration(i) * time.Millisecond)}
	}
	return out
}

// storeInBatches appends logs to s one batch of 4 at a time, as raft would.
func storeInBatches(t *testing.T, s raft.LogStore, logs []*raft.Log) {
	t.Helper()
	for i := 0; i < len(logs); i += 4 {
		if err := s.StoreLogs(logs[i:min(i+4, len(logs))]); err != nil {
			t.Fatal(err)
		}
	}
}

// flipIn flips the low bit of the byte at offset at of every occurrence of
// needle in the files under dir (raft-boltdb may keep an old copy of a
// page), and reports how many it changed.
func flipIn(t *testing.T, dir string, needle []byte, at int) int {
	t.Helper()
	flipped := 0
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n := 0
		for i := bytes.Index(b, needle); i >= 0; {
			b[i+at] ^= 1
			n++
			j := bytes.Index(b[i+1:], needle)
			if j < 0 {
				break
			}
			i += 1 + j
		}
		if n > 0 {
			flipped += n
			return os.WriteFile(p, b, 0o600)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return flipped
}

// TestRaftWALReadsAFlippedEntryBackSilently documents why checkedLog
// exists: raft-wal v0.4.2 checks an entry's CRC only in the tail batch it
// recovers at open, so a byte flipped in an entry of a sealed segment is
// decoded and returned as if it had been written so.
func TestRaftWALReadsAFlippedEntryBackSilently(t *testing.T) {
	dir := t.TempDir()
	w, err := wal.Open(dir, wal.WithSegmentSize(512))
	if err != nil {
		t.Fatal(err)
	}
	storeInBatches(t, w, testEntries(64))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := flipIn(t, dir, []byte("payload-0003-0123456789"), len("payload-0003-012")); n != 1 {
		t.Fatalf("flipped %d copies of entry 3's payload, want 1", n)
	}
	w, err = wal.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var l raft.Log
	if err := w.GetLog(3, &l); err != nil {
		t.Fatalf("raft-wal noticed the flipped byte (%v): checkedLog may no longer be needed", err)
	}
	if got := string(l.Data); got != "payload-0003-0122456789" {
		t.Fatalf("entry 3 = %q", got)
	}
}

// TestCheckedLogDetectsAFlippedEntry: on both log stores, an entry whose
// payload lost a bit on disk is refused on read (ErrCorruptLog) and by
// the scan before raft starts (ErrUnrestorable); with the seeded bug
// faults.LogNoChecksum it is read back as the flipped bytes.
func TestCheckedLogDetectsAFlippedEntry(t *testing.T) {
	for _, noVerify := range []bool{false, true} {
		t.Run(fmt.Sprintf("noVerify=%v", noVerify), func(t *testing.T) {
			forEachLogStore(t, func(t *testing.T, kind, dir string, store logStore) {
				storeInBatches(t, &checkedLog{LogStore: store, where: dir}, testEntries(64))
				if err := store.Close(); err != nil {
					t.Fatal(err)
				}
				if n := flipIn(t, dir, []byte("payload-0003-0123456789"), len("payload-0003-012")); n == 0 {
					t.Fatal("entry 3's payload not found on disk")
				}
				c := &checkedLog{LogStore: openTestLogStore(t, dir, kind), where: dir, noVerify: noVerify}
				var l raft.Log
				err := c.GetLog(3, &l)
				if noVerify {
					if err != nil || string(l.Data) != "payload-0003-0122456789" || l.Extensions != nil {
						t.Fatalf("seeded bug: GetLog(3) = %q, %q, %v; want the flipped payload", l.Data, l.Extensions, err)
					}
					return
				}
				if !errors.Is(err, ErrCorruptLog) {
					t.Fatalf("GetLog(3) = %q, %v; want ErrCorruptLog", l.Data, err)
				}
				if err := c.GetLog(4, &l); err != nil || string(l.Data) != "payload-0004-0123456789" {
					t.Fatalf("GetLog(4) = %q, %v", l.Data, err)
				}
				if err := verifyLog(c, 1); !errors.Is(err, ErrUnrestorable) || !errors.Is(err, ErrCorruptLog) {
					t.Fatalf("verifyLog from 1 = %v, want ErrUnrestorable and ErrCorruptLog", err)
				}
				if err := verifyLog(c, 4); err != nil {
					t.Fatalf("verifyLog past the corrupt entry = %v", err)
				}
			})
		})
	}
}

// TestCheckedLogReadsLegacyEntries: entries stored before checksums (empty
// Extensions) are read back as they are, unverified.
func TestCheckedLogReadsLegacyEntries(t *testing.T) {
	inner := raft.NewInmemStore()
	storeInBatches(t, inner, testEntries(8))
	c := &checkedLog{LogStore: inner}
	if err := verifyLog(c, 1); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := c.GetLog(5, &l); err != nil || string(l.Data) != "payload-0005-0123456789" {
		t.Fatalf("GetLog(5) = %q, %v", l.Data, err)
	}
}

// wrongIndexStore answers every read with the entry one past the one
// asked for, as a store with a damaged index would.
type wrongIndexStore struct{ *raft.InmemStore }

func (s wrongIndexStore) GetLog(index uint64, l *raft.Log) error {
	return s.InmemStore.GetLog(index+1, l)
}

// TestCheckedLogRefusesAnotherEntry: a store that returns a sound entry,
// but not the one asked for, is caught.
func TestCheckedLogRefusesAnotherEntry(t *testing.T) {
	inner := raft.NewInmemStore()
	storeInBatches(t, &checkedLog{LogStore: inner}, testEntries(8))
	var l raft.Log
	if err := (&checkedLog{LogStore: wrongIndexStore{inner}}).GetLog(3, &l); !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("GetLog(3) answered with entry 4 = %v, want ErrCorruptLog", err)
	}
}

// TestCheckedLogRoundTrip: whatever raft stores comes back as it was, on
// both log stores, and raft's own entries are not changed by the store.
func TestCheckedLogRoundTrip(t *testing.T) {
	forEachLogStore(t, func(t *testing.T, _, dir string, store logStore) {
		c := &checkedLog{LogStore: store, where: dir}
		next := uint64(1)
		rapid.Check(t, func(rt *rapid.T) {
			n := rapid.IntRange(1, 5).Draw(rt, "n")
			logs := make([]*raft.Log, n)
			want := make([]raft.Log, n)
			for i := range logs {
				l := &raft.Log{
					Index: next, Term: rapid.Uint64Range(1, 1<<40).Draw(rt, "term"),
					Type:       raft.LogType(rapid.IntRange(0, 6).Draw(rt, "type")),
					Data:       rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(rt, "data"),
					Extensions: rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(rt, "ext"),
				}
				if rapid.Bool().Draw(rt, "appended") {
					l.AppendedAt = time.Unix(0, rapid.Int64Range(0, 1<<62).Draw(rt, "at"))
				}
				if len(l.Data) == 0 {
					l.Data = nil
				}
				if len(l.Extensions) == 0 {
					l.Extensions = nil
				}
				next++
				logs[i], want[i] = l, *l
			}
			if err := c.StoreLogs(logs); err != nil {
				rt.Fatal(err)
			}
			for i, l := range logs {
				if !bytes.Equal(l.Extensions, want[i].Extensions) {
					rt.Fatalf("StoreLogs changed raft's entry %d: extensions %q, were %q", l.Index, l.Extensions, want[i].Extensions)
				}
				var got raft.Log
				if err := c.GetLog(l.Index, &got); err != nil {
					rt.Fatal(err)
				}
				if got.Index != l.Index || got.Term != l.Term || got.Type != l.Type || !bytes.Equal(got.Data, l.Data) ||
					!bytes.Equal(got.Extensions, l.Extensions) || !got.AppendedAt.Equal(l.AppendedAt) {
					rt.Fatalf("read %+v, stored %+v", got, *l)
				}
			}
		})
	})
}

// TestNodeWithAFlippedLogEntryRefusesToStart: a follower whose log holds
// an entry that lost a bit on disk, past its newest snapshot, does not
// start (ErrUnrestorable, ErrCorruptLog, naming the entry and what to do)
// rather than replay it; the others go on.
func TestNodeWithAFlippedLogEntryRefusesToStart(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.LeaveOnShutdown = false })
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)
	tc.propose(ctx, claim("flip-me-0123456789", "o"))
	for i := 0; i < 20; i++ { // so that the entry is not in the tail batch raft-wal checks at open
		tc.propose(ctx, claim(fmt.Sprintf("after-%d", i), "o"))
	}
	follower := tc.follower(leader)
	id := follower.ID()
	waitFor(t, 10*time.Second, "the follower to hold every entry", func() bool {
		return follower.raft.LastIndex() >= leader.raft.LastIndex()
	})
	if err := follower.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, id)
	if n := flipIn(t, filepath.Join(tc.dir, id, "wal"), []byte("flip-me-0123456789"), len("flip-me-012")); n == 0 {
		t.Fatal("the entry was not found in the follower's log")
	}
	n, err := New(tc.config(id, "127.0.0.1:0", "127.0.0.1:0", 3, leader.GossipAddr()))
	if err == nil {
		_ = n.Kill()
		t.Fatal("a node with a corrupt log entry started")
	}
	if !errors.Is(err, ErrUnrestorable) || !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("start = %v, want ErrUnrestorable and ErrCorruptLog", err)
	}
	for _, want := range []string{"peer remove", "rejoin as a new member", "corrupt log entry"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Fatalf("the error does not say %q: %v", want, err)
		}
	}
	tc.propose(ctx, claim("still-available", "o"))
}
