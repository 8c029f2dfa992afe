package pebblestate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"pgregory.net/rapid"

	"github.com/intentledger/intentd/fsm"
)

var appliedKey = []byte("m/applied")

// history writes commits to a store, each with its applied index, and
// remembers the whole state after each.
type history struct {
	states []map[string]string // states[i]: after commit i (states[0]: empty)
}

func newHistory() *history { return &history{states: []map[string]string{{}}} }

func (h *history) last() map[string]string { return h.states[len(h.states)-1] }

// commit sets and deletes keys (each key a few of k0..k19), writes the
// next applied index and commits.
func (h *history) commit(s *Store, sets, deletes []int) {
	next := make(map[string]string, len(h.last())+1)
	for k, v := range h.last() {
		next[k] = v
	}
	index := uint64(len(h.states))
	for _, i := range sets {
		// 4 KiB values: a few dozen commits fill a test's memtable, so
		// pebble flushes on its own as well.
		k, v := fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d@%d", i, index)+strings.Repeat(".", 4<<10)
		s.Set([]byte(k), []byte(v))
		next[k] = v
	}
	for _, i := range deletes {
		k := fmt.Sprintf("k%02d", i)
		s.Delete([]byte(k))
		delete(next, k)
	}
	v := binary.BigEndian.AppendUint64(nil, index)
	s.Set(appliedKey, v)
	next[string(appliedKey)] = string(v)
	s.Commit()
	h.states = append(h.states, next)
}

// dump is everything in the store.
func dump(scan func(lo, hi []byte, fn func(k, v []byte) bool)) map[string]string {
	out := map[string]string{}
	scan(nil, nil, func(k, v []byte) bool {
		out[string(k)] = string(v)
		return true
	})
	return out
}

// applied is the store's applied index.
func applied(t testTB, s *Store) uint64 {
	t.Helper()
	v, ok := s.Get(appliedKey)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func sameState(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkState fails unless s holds exactly h's state at its applied index,
// and that index is at least atLeast.
func checkState(t testTB, s *Store, h *history, atLeast uint64) {
	t.Helper()
	i := applied(t, s)
	if i < atLeast || i >= uint64(len(h.states)) {
		t.Fatalf("applied index %d; want %d to %d", i, atLeast, len(h.states)-1)
	}
	if got := dump(s.Scan); !sameState(got, h.states[i]) {
		t.Fatalf("the state is not the state at its applied index %d:\n got %v\nwant %v", i, got, h.states[i])
	}
}

// TestReopenSeesWhatWasCommitted: a Dir closed and opened again holds
// exactly the committed writes, synced or not; writes never committed are
// gone.
func TestReopenSeesWhatWasCommitted(t *testing.T) {
	dir := t.TempDir()
	d := openTestDir(t, vfs.Default, dir)
	h := newHistory()
	h.commit(d.Current(), []int{1, 2, 3}, nil)
	d.Current().Sync()
	h.commit(d.Current(), []int{4}, []int{1})
	d.Current().Set([]byte("k99"), []byte("never committed"))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openTestDir(t, vfs.Default, dir)
	checkState(t, d.Current(), h, 2)
}

// TestCrashKeepsWholeCommits copies a Dir's files while its store is open
// (a crash: the memtables are lost), after a Sync and some commits past
// it. The copy holds at least everything before the Sync, and the state at
// exactly one commit.
func TestCrashKeepsWholeCommits(t *testing.T) {
	dir := t.TempDir()
	d := openTestDir(t, vfs.Default, dir)
	s := d.Current()
	h := newHistory()
	for i := range 5 {
		h.commit(s, []int{i, i + 5}, []int{i + 4})
	}
	s.Sync()
	synced := uint64(len(h.states) - 1)
	for i := range 5 {
		h.commit(s, []int{i + 10}, []int{i})
	}
	crashed := filepath.Join(t.TempDir(), "crashed")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	c := openTestDir(t, vfs.Default, crashed)
	checkState(t, c.Current(), h, synced)
}

// TestCrashProperty crashes a store at random points of random commits,
// syncs and automatic flushes, on a file system that keeps only what was
// fsynced (vfs.MemFS.CrashClone): the reopened store holds the state at
// one commit, and at least the last synced one.
func TestCrashProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fs := vfs.NewCrashableMem()
		d := openTestDir(rt, fs, "state")
		s := d.Current()
		h := newHistory()
		var synced uint64
		small := rapid.SliceOfN(rapid.IntRange(0, 19), 0, 4)
		for range rapid.IntRange(0, 60).Draw(rt, "commits") {
			h.commit(s, small.Draw(rt, "sets"), small.Draw(rt, "deletes"))
			if rapid.IntRange(0, 4).Draw(rt, "sync") == 0 {
				s.Sync()
				synced = uint64(len(h.states) - 1)
			}
		}
		c := openTestDir(rt, fs.CrashClone(vfs.CrashCloneCfg{}), "state")
		checkState(rt, c.Current(), h, synced)
	})
}

// TestPromote replaces the current generation while a view of it is
// open: the view reads the old state until it is released, and then the
// old generation is gone; a reopened Dir has the new state.
func TestPromote(t *testing.T) {
	dir := t.TempDir()
	d := openTestDir(t, vfs.Default, dir)
	old := d.Current()
	old.Set([]byte("k"), []byte("old"))
	old.Commit()
	v := old.View()

	staged, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if d.Current() != old {
		t.Fatal("Stage changed the current store")
	}
	staged.Set([]byte("k"), []byte("new"))
	staged.Commit()
	if err := d.Promote(staged); err != nil {
		t.Fatal(err)
	}
	if d.Current() != staged {
		t.Fatal("after Promote, Current is not the staged store")
	}
	if got := generations(t, dir); !slices.Equal(got, []string{"gen-000001", "gen-000002"}) {
		t.Fatalf("generations with a view open: %v", got)
	}
	if got := readFile(t, filepath.Join(dir, currentFile)); got != "gen-000002\n" {
		t.Fatalf("CURRENT = %q", got)
	}
	if got, _ := v.Get([]byte("k")); string(got) != "old" {
		t.Fatalf("the old view reads %q", got)
	}
	if got, _ := d.Current().Get([]byte("k")); string(got) != "new" {
		t.Fatalf("the current store reads %q", got)
	}
	v.Release()
	if got := generations(t, dir); !slices.Equal(got, []string{"gen-000002"}) {
		t.Fatalf("generations after the view's release: %v", got)
	}
	mustPanicIO(t, "Get on the retired store", func() { old.Get([]byte("k")) })

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openTestDir(t, vfs.Default, dir)
	if got, _ := d.Current().Get([]byte("k")); string(got) != "new" {
		t.Fatalf("reopened after Promote: %q", got)
	}
}

// TestPromoteWithoutViews: the old generation goes at once.
func TestPromoteWithoutViews(t *testing.T) {
	dir := t.TempDir()
	d := openTestDir(t, vfs.Default, dir)
	staged, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Promote(staged); err != nil {
		t.Fatal(err)
	}
	if got := generations(t, dir); !slices.Equal(got, []string{"gen-000002"}) {
		t.Fatalf("generations: %v", got)
	}
	if err := d.Promote(staged); err == nil {
		t.Fatal("promoting the current store again: no error")
	}
}

// TestCrashAroundPromote: a crash before Promote leaves the old state and
// the staged generation as debris, which OpenDir removes; a crash after
// it, the new state. Only fsynced data survives the crash.
func TestCrashAroundPromote(t *testing.T) {
	fs := vfs.NewCrashableMem()
	d := openTestDir(t, fs, "state")
	d.Current().Set([]byte("k"), []byte("old"))
	d.Current().Commit()
	d.Current().Sync()
	staged, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	staged.Set([]byte("k"), []byte("new"))
	staged.Commit()
	staged.Sync()

	before := openTestDir(t, fs.CrashClone(vfs.CrashCloneCfg{}), "state")
	if got, _ := before.Current().Get([]byte("k")); string(got) != "old" {
		t.Fatalf("crash before Promote: %q", got)
	}
	if got := memGenerations(t, before.fs); !slices.Equal(got, []string{"gen-000001"}) {
		t.Fatalf("crash before Promote: generations %v", got)
	}
	if s, err := before.Stage(); err != nil || s.gen != 3 {
		t.Fatalf("the next stage after debris gen-000002: %v, %v", s, err)
	}

	if err := d.Promote(staged); err != nil {
		t.Fatal(err)
	}
	after := openTestDir(t, fs.CrashClone(vfs.CrashCloneCfg{}), "state")
	if got, _ := after.Current().Get([]byte("k")); string(got) != "new" {
		t.Fatalf("crash after Promote: %q", got)
	}
}

// TestOpenDirRemovesDebris: generations CURRENT does not name and a
// leftover CURRENT.tmp go; other files stay.
func TestOpenDirRemovesDebris(t *testing.T) {
	dir := t.TempDir()
	d := openTestDir(t, vfs.Default, dir)
	d.Current().Set([]byte("k"), []byte("v"))
	d.Current().Commit()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gen-000007/000001.sst", "gen-000003/x", currentTemp, "notes.txt"} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("debris"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d = openTestDir(t, vfs.Default, dir)
	if got, _ := d.Current().Get([]byte("k")); string(got) != "v" {
		t.Fatalf("after removing debris: %q", got)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{currentFile, lockFile, "gen-000001", "notes.txt"}; !slices.Equal(names, want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	s, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if s.gen != 8 {
		t.Fatalf("staged generation %d after debris gen-000007; want 8", s.gen)
	}
	if err := d.Discard(s); err != nil {
		t.Fatal(err)
	}
	if got := generations(t, dir); !slices.Equal(got, []string{"gen-000001"}) {
		t.Fatalf("generations after Discard: %v", got)
	}
}

// TestOpenDirRefuses: a CURRENT that names nothing or a missing
// generation, and a Dir open already.
func TestOpenDirRefuses(t *testing.T) {
	tests := []struct {
		name    string
		current string // "": keep the Dir open
	}{
		{"garbage in CURRENT", "hello\n"},
		{"a path in CURRENT", "../gen-000001\n"},
		{"a missing generation", "gen-000005\n"},
		{"the Dir is open", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := vfs.NewMem()
			d := openTestDir(t, fs, "state")
			if tt.current != "" {
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
				f, err := fs.Create("state/CURRENT", vfs.WriteCategoryUnspecified)
				if err != nil {
					t.Fatal(err)
				}
				io.WriteString(f, tt.current)
				f.Close()
			}
			if d, err := OpenDir("state", Options{fs: fs}); err == nil {
				d.Close()
				t.Fatal("no error")
			}
		})
	}
}

// TestCloseWithViewOpen: Close with a view open does not fail; the store
// closes, and the lock is released, when the view is released.
func TestCloseWithViewOpen(t *testing.T) {
	fs := vfs.NewMem()
	d := openTestDir(t, fs, "state")
	d.Current().Set([]byte("k"), []byte("v"))
	d.Current().Commit()
	v := d.Current().View()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Get([]byte("k")); string(got) != "v" {
		t.Fatalf("the view after Close reads %q", got)
	}
	if _, err := OpenDir("state", Options{fs: fs}); err == nil {
		t.Fatal("opened while the closed Dir's view holds its store")
	}
	v.Release()
	d = openTestDir(t, fs, "state")
	if got, _ := d.Current().Get([]byte("k")); string(got) != "v" {
		t.Fatalf("reopened: %q", got)
	}
}

// generations lists the gen-* directories in dir.
func generations(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), genPrefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func memGenerations(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List("state")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, genPrefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mustPanicIO fails unless fn panics with an error wrapping
// fsm.ErrStoreIO; it returns that error.
func mustPanicIO(t *testing.T, what string, fn func()) (err error) {
	t.Helper()
	defer func() {
		r := recover()
		e, ok := r.(error)
		if !ok || !errors.Is(e, fsm.ErrStoreIO) {
			t.Fatalf("%s: panicked with %v (%T), want an error wrapping fsm.ErrStoreIO", what, r, r)
		}
		err = e
	}()
	fn()
	return nil
}

// TestReleasesRacePromote releases views of the current store from other
// goroutines while Promote retires it: the old generation is closed and
// removed once, whichever release is last (the race detector checks the
// rest).
func TestReleasesRacePromote(t *testing.T) {
	fs := vfs.NewMem()
	d := openTestDir(t, fs, "state")
	d.Current().Set([]byte("k"), []byte("old"))
	d.Current().Commit()
	views := make([]fsm.StoreView, 8)
	for i := range views {
		views[i] = d.Current().View()
	}
	staged, err := d.Stage()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, v := range views {
		wg.Go(func() {
			if got, _ := v.Get([]byte("k")); string(got) != "old" {
				t.Errorf("a view reads %q", got)
			}
			v.Release()
		})
	}
	if err := d.Promote(staged); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := memGenerations(t, fs); !slices.Equal(got, []string{"gen-000002"}) {
		t.Fatalf("generations once every view is released: %v", got)
	}
}
