package lazyfs

import (
	"bytes"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// mount mounts a lazy filesystem for one test, or skips when this machine
// cannot (no /dev/fuse or not root) and CI is unset; with CI=true that is a
// failure.
func mount(t *testing.T, mode Mode) *FS {
	t.Helper()
	if err := canMount(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("lazyfs cannot mount in CI: %v", err)
		}
		t.Skipf("skipping (set CI=true to make this a failure): %v", err)
	}
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "disk"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(backing, mnt, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func canMount() error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	fd, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return fd.Close()
}

// op is one step of a scenario, on paths inside the mount.
type op func(t *testing.T, mnt string)

func write(name, data string) op {
	return func(t *testing.T, mnt string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(mnt, name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(data), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func writeAt(name string, off int64, data string) op {
	return func(t *testing.T, mnt string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(mnt, name), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(data), off); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func fsync(name string) op {
	return func(t *testing.T, mnt string) {
		t.Helper()
		f, err := os.Open(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// durable writes a file and fsyncs it and its directory.
func durable(name, data string) op {
	return func(t *testing.T, mnt string) {
		t.Helper()
		write(name, data)(t, mnt)
		fsync(name)(t, mnt)
		fsync(filepath.Dir(name))(t, mnt)
	}
}

func do(what string, fn func(mnt string) error) op {
	return func(t *testing.T, mnt string) {
		t.Helper()
		if err := fn(mnt); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

func rename(from, to string) op {
	return do("rename", func(m string) error { return os.Rename(filepath.Join(m, from), filepath.Join(m, to)) })
}

func remove(name string) op {
	return do("remove", func(m string) error { return os.Remove(filepath.Join(m, name)) })
}

func mkdir(name string) op {
	return do("mkdir", func(m string) error { return os.Mkdir(filepath.Join(m, name), 0o755) })
}

func truncate(name string, size int64) op {
	return do("truncate", func(m string) error { return os.Truncate(filepath.Join(m, name), size) })
}

// absent is what a file that must not exist "contains".
const absent = "<absent>"

func read(t *testing.T, mnt, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mnt, name))
	if errors.Is(err, os.ErrNotExist) {
		return absent
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLoseUnsynced proves the model: after a power loss, what was made
// durable (by the file's fsync for data, by the directory's fsync for
// entries, or in ext4 mode by any fsync for entries) is there, and nothing
// else is.
func TestLoseUnsynced(t *testing.T) {
	cases := []struct {
		name  string
		setup []op // made durable before the steps
		steps []op
		// want maps file names to their contents after the loss, per mode.
		strict, ext4 map[string]string
	}{{
		name:   "an overwrite without fsync is lost",
		setup:  []op{durable("a", "old")},
		steps:  []op{write("a", "new")},
		strict: map[string]string{"a": "old"},
		ext4:   map[string]string{"a": "old"},
	}, {
		name:   "an fsynced overwrite is kept",
		setup:  []op{durable("a", "old")},
		steps:  []op{write("a", "new"), fsync("a")},
		strict: map[string]string{"a": "new"},
		ext4:   map[string]string{"a": "new"},
	}, {
		name:   "an append without fsync is lost",
		setup:  []op{durable("a", "abc")},
		steps:  []op{writeAt("a", 3, "def")},
		strict: map[string]string{"a": "abc"},
		ext4:   map[string]string{"a": "abc"},
	}, {
		name:   "a truncate without fsync is lost",
		setup:  []op{durable("a", "hello world")},
		steps:  []op{truncate("a", 5)},
		strict: map[string]string{"a": "hello world"},
		ext4:   map[string]string{"a": "hello world"},
	}, {
		name:   "a new file fsynced but not its directory",
		steps:  []op{write("b", "data"), fsync("b")},
		strict: map[string]string{"b": absent},
		ext4:   map[string]string{"b": "data"},
	}, {
		name:   "a new file whose directory is fsynced but not itself",
		steps:  []op{write("b", "data"), fsync(".")},
		strict: map[string]string{"b": ""},
		ext4:   map[string]string{"b": ""},
	}, {
		name:   "a new file fsynced with its directory",
		steps:  []op{write("b", "data"), fsync("b"), fsync(".")},
		strict: map[string]string{"b": "data"},
		ext4:   map[string]string{"b": "data"},
	}, {
		name:   "an atomic replace without the directory's fsync",
		setup:  []op{durable("a", "old")},
		steps:  []op{write("a.tmp", "new"), fsync("a.tmp"), rename("a.tmp", "a")},
		strict: map[string]string{"a": "old", "a.tmp": absent},
		// a.tmp's fsync committed its creation, nothing committed the
		// rename.
		ext4: map[string]string{"a": "old", "a.tmp": "new"},
	}, {
		name:   "an atomic replace followed by another file's fsync",
		setup:  []op{durable("a", "old"), durable("c", "c")},
		steps:  []op{write("a.tmp", "new"), fsync("a.tmp"), rename("a.tmp", "a"), fsync("c")},
		strict: map[string]string{"a": "old", "a.tmp": absent},
		ext4:   map[string]string{"a": "new", "a.tmp": absent},
	}, {
		name:   "an atomic replace with the directory's fsync",
		setup:  []op{durable("a", "old")},
		steps:  []op{write("a.tmp", "new"), fsync("a.tmp"), rename("a.tmp", "a"), fsync(".")},
		strict: map[string]string{"a": "new", "a.tmp": absent},
		ext4:   map[string]string{"a": "new", "a.tmp": absent},
	}, {
		name:   "a replace by a file never fsynced keeps the name, not the data (ext4's zero-length file)",
		setup:  []op{durable("a", "old")},
		steps:  []op{write("a.tmp", "new"), rename("a.tmp", "a"), fsync(".")},
		strict: map[string]string{"a": "", "a.tmp": absent},
		ext4:   map[string]string{"a": "", "a.tmp": absent},
	}, {
		name:   "an unlink with no fsync at all comes back",
		setup:  []op{durable("a", "old")},
		steps:  []op{remove("a")},
		strict: map[string]string{"a": "old"},
		ext4:   map[string]string{"a": "old"},
	}, {
		name:   "an unlink followed by another file's fsync",
		setup:  []op{durable("a", "old"), durable("c", "c")},
		steps:  []op{remove("a"), write("c", "C"), fsync("c")},
		strict: map[string]string{"a": "old", "c": "C"},
		ext4:   map[string]string{"a": absent, "c": "C"},
	}, {
		name:   "a subdirectory whose parent is never fsynced",
		steps:  []op{mkdir("d"), write("d/x", "x"), fsync("d/x"), fsync("d")},
		strict: map[string]string{"d/x": absent, "d": absent},
		ext4:   map[string]string{"d/x": "x"},
	}, {
		name:   "a subdirectory fsynced with its parent",
		steps:  []op{mkdir("d"), fsync("."), write("d/x", "x"), fsync("d/x"), fsync("d")},
		strict: map[string]string{"d/x": "x"},
		ext4:   map[string]string{"d/x": "x"},
	}, {
		name:   "a directory removed without the parent's fsync comes back with its files",
		setup:  []op{mkdir("d"), fsync("."), durable("d/x", "x")},
		steps:  []op{remove("d/x"), remove("d")},
		strict: map[string]string{"d/x": "x"},
		ext4:   map[string]string{"d/x": "x"},
	}, {
		name:   "a renamed directory (a snapshot's tmp dir) with the parent fsynced, not itself",
		setup:  []op{mkdir("snaps"), fsync(".")},
		steps:  []op{mkdir("snaps/1.tmp"), write("snaps/1.tmp/meta", "m"), fsync("snaps/1.tmp/meta"), rename("snaps/1.tmp", "snaps/1"), fsync("snaps")},
		strict: map[string]string{"snaps/1/meta": absent, "snaps/1.tmp/meta": absent},
		ext4:   map[string]string{"snaps/1/meta": "m"},
	}, {
		name:  "a renamed directory fsynced itself and its parent",
		setup: []op{mkdir("snaps"), fsync(".")},
		steps: []op{mkdir("snaps/1.tmp"), write("snaps/1.tmp/meta", "m"), fsync("snaps/1.tmp/meta"), rename("snaps/1.tmp", "snaps/1"),
			fsync("snaps/1"), fsync("snaps")},
		strict: map[string]string{"snaps/1/meta": "m", "snaps/1.tmp": absent},
		ext4:   map[string]string{"snaps/1/meta": "m", "snaps/1.tmp": absent},
	}}
	for _, tc := range cases {
		for _, m := range []struct {
			mode Mode
			want map[string]string
		}{{Strict, tc.strict}, {Ext4, tc.ext4}} {
			t.Run(m.mode.String()+"/"+tc.name, func(t *testing.T) {
				f := mount(t, m.mode)
				mnt := f.Mountpoint()
				for _, s := range tc.setup {
					s(t, mnt)
				}
				if n := f.Pending(); n != 0 {
					t.Fatalf("setup left %d undo records; it must be durable", n)
				}
				for _, s := range tc.steps {
					s(t, mnt)
				}
				loss, err := f.LoseUnsynced(LossOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if loss.Errors != 0 {
					t.Errorf("undo errors: %d (first: %s)", loss.Errors, loss.FirstError)
				}
				for name, want := range m.want {
					if got := read(t, mnt, name); got != want {
						t.Errorf("%s = %q after the loss, want %q", name, got, want)
					}
				}
			})
		}
	}
}

// TestTorn: the last unsynced write keeps a proper, non-empty prefix;
// earlier unsynced writes to the same file are kept; other files lose
// theirs.
func TestTorn(t *testing.T) {
	f := mount(t, Strict)
	mnt := f.Mountpoint()
	durable("log", "")(t, mnt)
	durable("other", "o")(t, mnt)
	writeAt("other", 0, "X")(t, mnt)
	writeAt("log", 0, "AAAA")(t, mnt)
	writeAt("log", 4, "BBBBBBBB")(t, mnt)
	loss, err := f.LoseUnsynced(LossOptions{Torn: true, Rand: rand.New(rand.NewSource(7))})
	if err != nil {
		t.Fatal(err)
	}
	got := read(t, mnt, "log")
	if loss.TornKept < 1 || loss.TornKept > 7 {
		t.Fatalf("kept %d bytes of an 8-byte write, want 1..7", loss.TornKept)
	}
	if want := "AAAA" + string(bytes.Repeat([]byte("B"), loss.TornKept)); got != want {
		t.Errorf("log = %q, want %q", got, want)
	}
	if got := read(t, mnt, "other"); got != "o" {
		t.Errorf("other = %q, want its durable %q", got, "o")
	}
}

// TestFull: while full, writes that need new blocks, fallocate, creates
// and mkdir fail with ENOSPC and statfs shows no free block; an overwrite
// in place and a write into space fallocate reserved before succeed; once space is back, everything works again.
func TestFull(t *testing.T) {
	f := mount(t, Ext4)
	mnt := f.Mountpoint()
	durable("a", "0123456789")(t, mnt)
	pre, err := os.OpenFile(filepath.Join(mnt, "pre"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer pre.Close()
	if err := unix.Fallocate(int(pre.Fd()), 0, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	f.SetFull(true)
	file, err := os.OpenFile(filepath.Join(mnt, "a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"overwrite in place", func() error { _, err := file.WriteAt([]byte("ab"), 2); return err }, nil},
		{"append past the last block", func() error { _, err := file.WriteAt(make([]byte, 8192), 10); return err }, syscall.ENOSPC},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(mnt, "d"), 0o755) }, syscall.ENOSPC},
		{"write into space fallocate reserved before", func() error { _, err := pre.WriteAt(make([]byte, 8192), 4096); return err }, nil},
		{"fallocate", func() error { return unix.Fallocate(int(file.Fd()), 0, 0, 1<<20) }, syscall.ENOSPC},
		{"create", func() error { return os.WriteFile(filepath.Join(mnt, "new"), nil, 0o644) }, syscall.ENOSPC},
		{"truncate up, then write into the hole", func() error {
			if err := file.Truncate(1 << 20); err != nil {
				return err
			}
			_, err := file.WriteAt([]byte("x"), 512<<10)
			return err
		}, syscall.ENOSPC},
		{"statfs", func() error {
			var st unix.Statfs_t
			if err := unix.Statfs(mnt, &st); err != nil {
				return err
			}
			if st.Bavail != 0 || st.Bfree != 0 {
				return fmt.Errorf("bavail %d bfree %d: %w", st.Bavail, st.Bfree, syscall.ENOSPC)
			}
			return nil
		}, nil},
	}
	for _, tc := range cases {
		err := tc.do()
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s while full: %v, want %v", tc.name, err, tc.want)
		}
	}
	f.SetFull(false)
	if _, err := file.WriteAt(make([]byte, 8192), 10); err != nil {
		t.Errorf("append once space is back: %v", err)
	}
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Errorf("mkdir once space is back: %v", err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "new"), nil, 0o644); err != nil {
		t.Errorf("create once space is back: %v", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil || st.Bavail == 0 {
		t.Errorf("statfs once space is back: %d available blocks, %v", st.Bavail, err)
	}
}

// TestFlip: a flipped byte is seen through the mount, even by a reader
// that had the file cached, and survives a power loss.
func TestFlip(t *testing.T) {
	f := mount(t, Strict)
	mnt := f.Mountpoint()
	durable("state", "abcdef")(t, mnt)
	if got := read(t, mnt, "state"); got != "abcdef" {
		t.Fatalf("state = %q", got)
	}
	if err := f.Flip("state", 2, 0x20); err != nil {
		t.Fatal(err)
	}
	if got := read(t, mnt, "state"); got != "abCdef" {
		t.Errorf("state = %q after the flip, want %q", got, "abCdef")
	}
	if _, err := f.LoseUnsynced(LossOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, mnt, "state"); got != "abCdef" {
		t.Errorf("state = %q after a power loss, want the flip kept", got)
	}
}

// TestLoseUnsyncedWithACopyInAnotherNamespace: a process in its own mount
// namespace (as ip netns exec starts each node) holds a copy of the mount;
// a power loss must still complete (the unmount alone left the server
// waiting for a connection that copy kept alive: the storage profile hung)
// and the mount must come back with the loss applied.
func TestLoseUnsyncedWithACopyInAnotherNamespace(t *testing.T) {
	f := mount(t, Strict)
	mnt := f.Mountpoint()
	durable("a", "old")(t, mnt)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare(1) is needed: %v", err)
	}
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Wait until the copy exists: the child's mount table lists the mount
	// in a namespace other than ours.
	for {
		own, _ := os.Readlink("/proc/self/ns/mnt")
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid))
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", cmd.Process.Pid))
		if ns != "" && ns != own && bytes.Contains(info, []byte(mnt)) {
			break
		}
		runtime.Gosched()
	}
	write("a", "new")(t, mnt)
	if _, err := f.LoseUnsynced(LossOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, mnt, "a"); got != "old" {
		t.Errorf("a = %q after the loss, want %q", got, "old")
	}
}

// TestFsyncAfterUnlink: an open file whose name is gone can still be
// fsynced (a store may remove a segment it still holds open).
func TestFsyncAfterUnlink(t *testing.T) {
	f := mount(t, Strict)
	mnt := f.Mountpoint()
	durable("a", "data")(t, mnt)
	file, err := os.OpenFile(filepath.Join(mnt, "a"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	remove("a")(t, mnt)
	if _, err := file.WriteAt([]byte("more"), 4); err != nil {
		t.Fatal(err)
	}
	if err := file.Sync(); err != nil {
		t.Errorf("fsync of an unlinked file: %v", err)
	}
}
