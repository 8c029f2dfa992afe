// Package lazyfs is the fault suite's lazy filesystem: a FUSE passthrough
// over a backing directory that remembers everything written through it
// that has not yet been made durable, so that a power loss can be
// simulated by dropping exactly that.
//
// Every write, truncate, create, mkdir, link, symlink, rename, unlink and
// rmdir goes straight to the backing directory (reads are plain
// passthrough) and leaves an undo record. An fsync retires records:
//
//   - a file's fsync (or fdatasync) retires its data records (writes,
//     truncates);
//   - a directory's fsync retires the records of entries changed in that
//     directory (a rename between two directories is retired once both
//     have been fsynced);
//   - in [Ext4] mode, any fsync also retires every entry record made so
//     far: ext4 (data=ordered) journals namespace changes in one running
//     transaction that any fsync commits, while file data (delayed
//     allocation) still needs the file's own fsync. [Strict] mode is POSIX's
//     letter: only a directory's own fsync makes its entries durable.
//
// [FS.LoseUnsynced] is a power loss: it unmounts (dropping the kernel's
// page cache), applies the undo records that remain in reverse order, and
// mounts again. With Torn set, the file written last keeps its earlier
// unsynced writes and part of its last one (the writeback was cut in the
// middle of it). [FS.SetFull] makes writes that need new blocks, fallocate
// and new names fail with ENOSPC, and statfs report no free block, until
// it is turned off. [FS.Flip] corrupts
// bytes of a file on the "disk" (the backing directory), as bit rot would.
//
// The caller must stop every process using the mount before LoseUnsynced
// (the fault suite SIGKILLs the node first): nothing may write between the
// kill and the loss. Records are kept in memory; a file that is never
// fsynced keeps its old bytes there until a loss or an unmount.
package lazyfs

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Mode is the durability model of directory entries.
type Mode int

const (
	// Strict is POSIX's letter: a directory entry (create, rename, unlink)
	// is durable only once its directory has been fsynced.
	Strict Mode = iota
	// Ext4 models ext4 with data=ordered: any fsync commits the journal,
	// which holds every namespace change made so far; file data still
	// needs the file's own fsync.
	Ext4
)

// String names the mode as ParseMode reads it.
func (m Mode) String() string {
	if m == Ext4 {
		return "ext4"
	}
	return "strict"
}

// ParseMode reads "strict" or "ext4".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "strict":
		return Strict, nil
	case "ext4":
		return Ext4, nil
	}
	return Strict, fmt.Errorf("lazyfs: unknown mode %q (want strict or ext4)", s)
}

// Loss says what a LoseUnsynced dropped.
type Loss struct {
	// DataRecords and EntryRecords count the undone writes/truncates and
	// namespace changes.
	DataRecords, EntryRecords int
	// TornFile is the backing path of the file whose last write was kept
	// in part ("" without Torn or when no write was pending), TornKept
	// how many of that write's bytes survived.
	TornFile string
	TornKept int
	// Errors counts undo steps that failed (a target already gone); the
	// first is in FirstError.
	Errors     int
	FirstError string
}

// LossOptions shapes a power loss.
type LossOptions struct {
	// Torn keeps the last unsynced write in part (see the package doc).
	Torn bool
	// Rand picks the torn write's cut; nil uses a fixed seed.
	Rand *rand.Rand
}

// FS is one mounted lazy filesystem.
type FS struct {
	backing, shadow, mountpoint string
	mode                        Mode

	mu      sync.Mutex
	server  *fuse.Server
	root    *fs.Inode
	seq     uint64
	records []*record
	handles map[uint64]*handle // backing inode -> open descriptor
	full    bool
	// allocated holds, per backing inode, the ranges fallocate reserved:
	// ext4 reports them as holes (unwritten extents) to SEEK_HOLE, yet a
	// write into them needs no new block, even on a full disk.
	allocated map[uint64][][2]int64
}

type handle struct {
	f    *os.File
	refs int
}

type recKind int

const (
	recData   recKind = iota // write or truncate
	recCreate                // a new name (file, dir, link, symlink, node)
	recUnlink                // a removed name; the inode is kept in shadow
	recRmdir                 // a removed (empty) directory
	recRename                // a name moved, maybe replacing another
)

type record struct {
	kind recKind
	// data: the file's inode, where the write went, the bytes it
	// replaced, the size before it and how many bytes it wrote.
	ino     uint64
	off     int64
	old     []byte
	oldSize int64
	n       int
	// entries: directories (inode), names, the shadow copy of a removed
	// or replaced inode, whether the new name is a directory.
	dir, newDir     uint64
	name, newName   string
	shadow          string
	isDir           bool
	mode            uint32
	synced, synced2 bool
}

// Mount mounts a lazy filesystem over backing (an existing directory) at
// mountpoint (an existing, empty directory). Removed and replaced files
// are kept in a sibling directory, backing+".lazyfs-shadow", until their
// removal is durable.
func Mount(backing, mountpoint string, mode Mode) (*FS, error) {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, fmt.Errorf("lazyfs: %w", err)
	}
	f := &FS{
		backing:    backing,
		shadow:     backing + ".lazyfs-shadow",
		mountpoint: mountpoint,
		mode:       mode,
		handles:    map[uint64]*handle{},
	}
	if err := os.RemoveAll(f.shadow); err != nil {
		return nil, fmt.Errorf("lazyfs: clear shadow: %w", err)
	}
	if err := os.Mkdir(f.shadow, 0o700); err != nil {
		return nil, fmt.Errorf("lazyfs: shadow: %w", err)
	}
	if err := f.mount(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FS) mount() error {
	root := &fs.LoopbackRoot{Path: f.backing}
	var st syscall.Stat_t
	if err := syscall.Stat(f.backing, &st); err != nil {
		return fmt.Errorf("lazyfs: backing: %w", err)
	}
	root.Dev = uint64(st.Dev)
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, lfs: f}
	}
	rootNode := root.NewNode(root, nil, "", &st)
	root.RootNode = rootNode
	zero := time.Duration(0)
	server, err := fs.Mount(f.mountpoint, rootNode, &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			AllowOther: true,
			FsName:     "lazyfs",
			Name:       "lazyfs",
		},
	})
	if err != nil {
		return fmt.Errorf("lazyfs: mount %s: %w", f.mountpoint, err)
	}
	f.server = server
	f.root = rootNode.EmbeddedInode()
	return nil
}

// Mountpoint is where the filesystem is mounted.
func (f *FS) Mountpoint() string { return f.mountpoint }

// Backing is the backing directory (the "disk").
func (f *FS) Backing() string { return f.backing }

// Mode is the filesystem's durability model.
func (f *FS) Mode() Mode { return f.mode }

// Pending counts the undo records not yet retired by an fsync.
func (f *FS) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.records)
}

// SetFull turns the full-disk fault on or off: while on, a write that
// needs a new block (past the end of the file or into a hole), fallocate,
// and every new name (create, mkdir, mknod, symlink, link) fail with
// ENOSPC, and statfs reports no free or available block, as a real full
// disk does. Overwrites in place, truncates, renames and removals still
// succeed.
func (f *FS) SetFull(full bool) {
	f.mu.Lock()
	f.full = full
	f.mu.Unlock()
}

// Unmount unmounts the filesystem. Unsynced changes stay on the backing
// directory (a clean shutdown, not a power loss).
func (f *FS) Unmount() error {
	// Not under mu: unmounting waits for requests in flight, which take it.
	err := f.unmount()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropAll()
	if err2 := os.RemoveAll(f.shadow); err == nil && err2 != nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("lazyfs: unmount %s: %w", f.mountpoint, err)
	}
	return nil
}

// Flip XORs mask into the byte at off of the file at rel (a path relative
// to the mount) on the backing directory, and drops the kernel's cached
// pages of it. The corruption is durable: it is on the "disk".
func (f *FS) Flip(rel string, off int64, mask byte) error {
	if mask == 0 {
		return errors.New("lazyfs: flip with a zero mask changes nothing")
	}
	p := filepath.Join(f.backing, filepath.Clean("/"+rel))
	file, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("lazyfs: flip: %w", err)
	}
	defer file.Close()
	b := []byte{0}
	if _, err := file.ReadAt(b, off); err != nil {
		return fmt.Errorf("lazyfs: flip %s at %d: %w", rel, off, err)
	}
	b[0] ^= mask
	if _, err := file.WriteAt(b, off); err != nil {
		return fmt.Errorf("lazyfs: flip %s at %d: %w", rel, off, err)
	}
	f.mu.Lock()
	in := f.root // not under mu below: the kernel may call back while invalidating
	f.mu.Unlock()
	for _, part := range strings.Split(strings.Trim(filepath.Clean("/"+rel), "/"), "/") {
		if in = in.GetChild(part); in == nil {
			return nil // never looked up through the mount: nothing cached
		}
	}
	if errno := in.NotifyContent(0, 0); errno != 0 && errno != syscall.ENOENT {
		return fmt.Errorf("lazyfs: flip: invalidate cache: %w", errno)
	}
	return nil
}

// LoseUnsynced is a power loss: it unmounts, undoes every change not yet
// made durable, and mounts again. Every process using the mount must be
// gone.
func (f *FS) LoseUnsynced(opts LossOptions) (Loss, error) {
	// Unmount before taking mu: unmounting waits for the requests in
	// flight (a killed process's last write may still be one), and they
	// take mu. Once it returns, no request can come in.
	if err := f.unmount(); err != nil {
		return Loss{}, fmt.Errorf("lazyfs: unmount %s for a power loss: %w", f.mountpoint, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	loss := f.undo(opts)
	f.dropAll()
	if err := f.mount(); err != nil {
		return loss, err
	}
	return loss, nil
}

// fusectl is where the kernel lists FUSE connections.
const fusectl = "/sys/fs/fuse/connections"

// unmount detaches the mount, aborts its FUSE connection and waits for the
// server to stop. Unmounting alone is not enough: a process started with
// its own mount namespace (ip netns exec gives each node one) holds a
// copy of the mount, which keeps the connection, and so the server's
// loops, alive for as long as that process runs.
func (f *FS) unmount() error {
	var st unix.Stat_t
	if err := unix.Stat(f.mountpoint, &st); err != nil {
		return err
	}
	conn := unix.Minor(st.Dev)
	if err := unix.Unmount(f.mountpoint, unix.MNT_DETACH); err != nil {
		return err
	}
	abort := filepath.Join(fusectl, strconv.FormatUint(uint64(conn), 10), "abort")
	if _, err := os.Stat(abort); errors.Is(err, os.ErrNotExist) {
		if err := unix.Mount("fusectl", fusectl, "fusectl", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount fusectl: %w", err)
		}
	}
	// Gone already when nothing else held the mount.
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("abort the FUSE connection: %w", err)
	}
	f.server.Wait()
	return nil
}

func (f *FS) undo(opts LossOptions) Loss {
	var loss Loss
	fail := func(err error) {
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		loss.Errors++
		if loss.FirstError == "" {
			loss.FirstError = err.Error()
		}
	}
	torn := -1
	if opts.Torn {
		for i := len(f.records) - 1; i >= 0; i-- {
			if r := f.records[i]; r.kind == recData && r.n > 1 {
				torn = i
				break
			}
		}
	}
	var tornIno uint64
	if torn >= 0 {
		tornIno = f.records[torn].ino
	}
	for i := len(f.records) - 1; i >= 0; i-- {
		r := f.records[i]
		switch r.kind {
		case recData:
			h := f.handles[r.ino]
			if h == nil {
				continue
			}
			switch {
			case torn >= 0 && r.ino == tornIno && i < torn:
				// Written back before the cut: kept.
			case i == torn:
				rnd := opts.Rand
				if rnd == nil {
					rnd = rand.New(rand.NewSource(1))
				}
				keep := 1 + rnd.Intn(r.n-1)
				if keep < len(r.old) {
					_, err := h.f.WriteAt(r.old[keep:], r.off+int64(keep))
					fail(err)
				}
				fail(h.f.Truncate(max(r.oldSize, r.off+int64(keep))))
				loss.TornFile, loss.TornKept = h.f.Name(), keep
				loss.DataRecords++
			default:
				if len(r.old) > 0 {
					_, err := h.f.WriteAt(r.old, r.off)
					fail(err)
				}
				fail(h.f.Truncate(r.oldSize))
				loss.DataRecords++
			}
		case recCreate:
			loss.EntryRecords++
			fail(os.RemoveAll(f.at(r.dir, r.name)))
		case recUnlink:
			loss.EntryRecords++
			fail(os.Rename(filepath.Join(f.shadow, r.shadow), f.at(r.dir, r.name)))
		case recRmdir:
			loss.EntryRecords++
			p := f.at(r.dir, r.name)
			if err := os.Mkdir(p, os.FileMode(r.mode&0o7777)); err != nil {
				fail(err)
				continue
			}
			// Entries removed from the directory before it was removed
			// are restored into the new one.
			if d, err := os.Open(p); err == nil {
				if old := f.handles[r.ino]; old != nil {
					old.f.Close()
					old.f = d
				} else {
					d.Close()
				}
			}
		case recRename:
			loss.EntryRecords++
			fail(os.Rename(f.at(r.newDir, r.newName), f.at(r.dir, r.name)))
			if r.shadow != "" {
				fail(os.Rename(filepath.Join(f.shadow, r.shadow), f.at(r.newDir, r.newName)))
			}
		}
	}
	return loss
}

// at is the path of name in directory inode dir, through the directory's
// descriptor (it may have been renamed since).
func (f *FS) at(dir uint64, name string) string {
	h := f.handles[dir]
	if h == nil {
		return filepath.Join(f.shadow, "gone", name)
	}
	return "/proc/self/fd/" + strconv.Itoa(int(h.f.Fd())) + "/" + name
}

func (f *FS) dropAll() {
	for _, h := range f.handles {
		h.f.Close()
	}
	f.handles = map[uint64]*handle{}
	f.records = nil
	f.allocated = nil // a reservation not made durable may be gone
	entries, _ := os.ReadDir(f.shadow)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(f.shadow, e.Name()))
	}
}

// hold opens (or reuses) a descriptor for backing inode ino found at path
// p, for the records that name it.
func (f *FS) hold(ino uint64, p string, dir bool) error {
	if h := f.handles[ino]; h != nil {
		h.refs++
		return nil
	}
	flag := os.O_RDWR
	if dir {
		flag = os.O_RDONLY | syscall.O_DIRECTORY
	}
	file, err := os.OpenFile(p, flag, 0)
	if err != nil {
		return err
	}
	f.handles[ino] = &handle{f: file, refs: 1}
	return nil
}

func (f *FS) release(ino uint64) {
	if h := f.handles[ino]; h != nil {
		if h.refs--; h.refs <= 0 {
			h.f.Close()
			delete(f.handles, ino)
		}
	}
}

func (f *FS) add(r *record) {
	f.seq++
	f.records = append(f.records, r)
}

// retire drops records for which keep is false, releasing what they held.
func (f *FS) retire(done func(*record) bool) {
	kept := f.records[:0]
	for _, r := range f.records {
		if !done(r) {
			kept = append(kept, r)
			continue
		}
		switch r.kind {
		case recData:
			f.release(r.ino)
		case recRename:
			f.release(r.dir)
			f.release(r.newDir)
		case recRmdir:
			f.release(r.dir)
			f.release(r.ino)
		default:
			f.release(r.dir)
		}
		if r.shadow != "" {
			os.RemoveAll(filepath.Join(f.shadow, r.shadow))
		}
	}
	for i := len(kept); i < len(f.records); i++ {
		f.records[i] = nil
	}
	f.records = kept
}

func (f *FS) syncFile(ino uint64) {
	f.retire(func(r *record) bool { return r.kind == recData && r.ino == ino })
	if f.mode == Ext4 {
		f.retire(func(r *record) bool { return r.kind != recData })
	}
}

func (f *FS) syncDir(ino uint64) {
	if f.mode == Ext4 {
		f.retire(func(r *record) bool { return r.kind != recData })
		return
	}
	f.retire(func(r *record) bool {
		if r.kind == recData {
			return false
		}
		if r.dir == ino {
			r.synced = true
		}
		if r.kind == recRename && r.newDir == ino {
			r.synced2 = true
		}
		if r.kind == recRename && r.dir != r.newDir {
			return r.synced && r.synced2
		}
		return r.synced
	})
}

// recordData saves what a write or truncate of the file at backing path p
// is about to replace: [off, off+n) of the current contents.
//
// On success it returns commit, to call once the change is made, and
// abort, to call if it fails.
func (f *FS) recordData(p string, off int64, n int, truncate bool) (errno syscall.Errno, commit, abort func()) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return fs.ToErrno(err), nil, nil
	}
	if err := f.hold(st.Ino, p, false); err != nil {
		return fs.ToErrno(err), nil, nil
	}
	h := f.handles[st.Ino]
	r := &record{kind: recData, ino: st.Ino, off: off, oldSize: st.Size, n: n}
	end := off + int64(n)
	if truncate {
		end = st.Size
	}
	if end > st.Size {
		end = st.Size
	}
	// Before reading the old bytes: ext4's SEEK_HOLE counts a hole
	// whose pages are in the page cache as data.
	if !truncate && f.full && f.needsBlocks(h.f, st.Ino, off, n, st.Size) {
		f.release(st.Ino)
		return syscall.ENOSPC, nil, nil
	}
	if end > off {
		r.old = make([]byte, end-off)
		if _, err := h.f.ReadAt(r.old, off); err != nil {
			f.release(st.Ino)
			return fs.ToErrno(err), nil, nil
		}
	}
	return 0, func() { f.add(r) }, func() { f.release(st.Ino) }
}

// allocate records that fallocate reserved [off, off+size) of inode ino.
func (f *FS) allocate(ino uint64, off, size int64) {
	if f.allocated == nil {
		f.allocated = map[uint64][][2]int64{}
	}
	f.allocated[ino] = append(f.allocated[ino], [2]int64{off, off + size})
}

// trimAllocated forgets the reservations of inode ino past size (a
// truncate).
func (f *FS) trimAllocated(ino uint64, size int64) {
	rs := f.allocated[ino][:0]
	for _, r := range f.allocated[ino] {
		if r[0] < size {
			rs = append(rs, [2]int64{r[0], min(r[1], size)})
		}
	}
	if len(rs) == 0 {
		delete(f.allocated, ino)
		return
	}
	f.allocated[ino] = rs
}

// needsBlocks says whether writing n bytes at off needs a block the file
// does not have: past its end or into a hole.
func (f *FS) needsBlocks(file *os.File, ino uint64, off int64, n int, size int64) bool {
	const block = 4096
	for _, r := range f.allocated[ino] {
		if r[0] <= off && off+int64(n) <= r[1] && off+int64(n) <= size {
			return false // reserved by fallocate
		}
	}
	if off+int64(n) > (size+block-1)/block*block {
		return true
	}
	hole, err := unix.Seek(int(file.Fd()), off, unix.SEEK_HOLE)
	if err != nil {
		return true
	}
	return hole < off+int64(n) && hole < size
}

// node is a loopback node whose changes leave undo records.
type node struct {
	fs.LoopbackNode
	lfs *FS
}

var (
	_ fs.NodeWriter    = (*node)(nil)
	_ fs.NodeFsyncer   = (*node)(nil)
	_ fs.NodeSetattrer = (*node)(nil)
	_ fs.NodeCreater   = (*node)(nil)
	_ fs.NodeOpener    = (*node)(nil)
	_ fs.NodeMkdirer   = (*node)(nil)
	_ fs.NodeUnlinker  = (*node)(nil)
	_ fs.NodeRmdirer   = (*node)(nil)
	_ fs.NodeRenamer   = (*node)(nil)
	_ fs.NodeAllocater = (*node)(nil)
	_ fs.NodeStatfser  = (*node)(nil)
)

// Statfs is the backing file system's, with no free block while full.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	if errno := n.LoopbackNode.Statfs(ctx, out); errno != 0 {
		return errno
	}
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	if n.lfs.full {
		out.Bfree, out.Bavail = 0, 0
	}
	return 0
}

// fullErr is ENOSPC while the full-disk fault is on; f.mu is held.
func (f *FS) fullErr() syscall.Errno {
	if f.full {
		return syscall.ENOSPC
	}
	return 0
}

func (n *node) backingPath() string {
	return filepath.Join(n.lfs.backing, n.Path(nil))
}

// dataPath is where the file's data is reached: through its open
// descriptor when there is one (the file may have no name any more), else
// its backing path.
func (n *node) dataPath(fh fs.FileHandle) string {
	if h, ok := fh.(*file); ok {
		if fd, ok := h.lf.PassthroughFd(); ok {
			return "/proc/self/fd/" + strconv.Itoa(fd)
		}
	}
	return n.backingPath()
}

func (n *node) dirIno() (uint64, string, error) {
	p := n.backingPath()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, p, err
	}
	return st.Ino, p, nil
}

// entry records a change of name in this directory; hold the directory.
func (n *node) entry(r *record) syscall.Errno {
	ino, p, err := n.dirIno()
	if err != nil {
		return fs.ToErrno(err)
	}
	if err := n.lfs.hold(ino, p, true); err != nil {
		return fs.ToErrno(err)
	}
	r.dir = ino
	n.lfs.add(r)
	return 0
}

func (n *node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := fh.(*file)
	if !ok {
		return 0, syscall.EBADF
	}
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	errno, commit, abort := n.lfs.recordData(n.dataPath(fh), off, len(data), false)
	if errno != 0 {
		return 0, errno
	}
	w, errno := h.lf.Write(ctx, data, off)
	if w > 0 {
		commit()
	} else {
		abort()
	}
	return w, errno
}

func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	ino, _, err := n.dirIno()
	if err != nil {
		// A file already unlinked: the loopback's inode numbers are the
		// backing ones (one device; only the root's differs).
		ino = n.StableAttr().Ino
	}
	if n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR {
		n.lfs.syncDir(ino)
	} else {
		n.lfs.syncFile(ino)
	}
	return 0
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	sz, ok := in.GetSize()
	if !ok {
		return n.LoopbackNode.Setattr(ctx, unwrap(fh), in, out)
	}
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	errno, commit, abort := n.lfs.recordData(n.dataPath(fh), int64(sz), 0, true)
	if errno != 0 {
		return errno
	}
	errno = n.LoopbackNode.Setattr(ctx, unwrap(fh), in, out)
	if errno == 0 {
		var st syscall.Stat_t
		if err := syscall.Stat(n.dataPath(fh), &st); err == nil {
			n.lfs.trimAllocated(st.Ino, int64(sz))
		}
		commit()
	} else {
		abort()
	}
	return errno
}

func (n *node) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	n.lfs.mu.Lock()
	full := n.lfs.full
	n.lfs.mu.Unlock()
	if full {
		return syscall.ENOSPC
	}
	h, ok := fh.(*file)
	if !ok {
		return syscall.EBADF
	}
	if mode&^unix.FALLOC_FL_KEEP_SIZE != 0 {
		return syscall.EOPNOTSUPP // punching holes would need undo records
	}
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	errno, commit, abort := n.lfs.recordData(n.dataPath(fh), int64(off), 0, true)
	if errno != 0 {
		return errno
	}
	errno = h.lf.Allocate(ctx, off, size, mode)
	if errno == 0 {
		var st syscall.Stat_t
		if err := syscall.Stat(n.dataPath(fh), &st); err == nil {
			n.lfs.allocate(st.Ino, int64(off), int64(size))
		}
		commit()
	} else {
		abort()
	}
	return errno
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC != 0 {
		n.lfs.mu.Lock()
		defer n.lfs.mu.Unlock()
		errno, commit, abort := n.lfs.recordData(n.backingPath(), 0, 0, true)
		if errno != 0 {
			return nil, 0, errno
		}
		fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
		if errno != 0 {
			abort()
			return nil, 0, errno
		}
		commit()
		return wrap(fh), ff, 0
	}
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return wrap(fh), ff, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	p := filepath.Join(n.backingPath(), name)
	if _, err := os.Lstat(p); err == nil {
		// An existing file: O_CREAT changes no entry; O_TRUNC is a
		// truncate.
		var commit, abort func()
		if flags&syscall.O_TRUNC != 0 {
			var errno syscall.Errno
			if errno, commit, abort = n.lfs.recordData(p, 0, 0, true); errno != 0 {
				return nil, nil, 0, errno
			}
		}
		in, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
		if errno != 0 {
			if abort != nil {
				abort()
			}
			return nil, nil, 0, errno
		}
		if commit != nil {
			commit()
		}
		return in, wrap(fh), ff, 0
	}
	if errno := n.lfs.fullErr(); errno != 0 {
		return nil, nil, 0, errno
	}
	in, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if errno := n.entry(&record{kind: recCreate, name: name}); errno != 0 {
		return nil, nil, 0, errno
	}
	return in, wrap(fh), ff, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	if errno := n.lfs.fullErr(); errno != 0 {
		return nil, errno
	}
	in, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno != 0 {
		return nil, errno
	}
	return in, n.entry(&record{kind: recCreate, name: name, isDir: true})
}

func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	if errno := n.lfs.fullErr(); errno != 0 {
		return nil, errno
	}
	in, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if errno != 0 {
		return nil, errno
	}
	return in, n.entry(&record{kind: recCreate, name: name})
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	if errno := n.lfs.fullErr(); errno != 0 {
		return nil, errno
	}
	in, errno := n.LoopbackNode.Symlink(ctx, target, name, out)
	if errno != 0 {
		return nil, errno
	}
	return in, n.entry(&record{kind: recCreate, name: name})
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	if errno := n.lfs.fullErr(); errno != 0 {
		return nil, errno
	}
	in, errno := n.LoopbackNode.Link(ctx, target, name, out)
	if errno != 0 {
		return nil, errno
	}
	return in, n.entry(&record{kind: recCreate, name: name})
}

// keep hard-links the inode at p into the shadow directory so that its
// removal can be undone; it returns the shadow name.
func (f *FS) keep(p string) (string, error) {
	name := strconv.FormatUint(f.seq+1, 10)
	if err := unix.Linkat(unix.AT_FDCWD, p, unix.AT_FDCWD, filepath.Join(f.shadow, name), 0); err != nil {
		return "", err
	}
	return name, nil
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	p := filepath.Join(n.backingPath(), name)
	shadow, err := n.lfs.keep(p)
	if err != nil {
		return fs.ToErrno(err)
	}
	if errno := n.LoopbackNode.Unlink(ctx, name); errno != 0 {
		os.Remove(filepath.Join(n.lfs.shadow, shadow))
		return errno
	}
	return n.entry(&record{kind: recUnlink, name: name, shadow: shadow})
}

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	p := filepath.Join(n.backingPath(), name)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return fs.ToErrno(err)
	}
	// Hold the removed directory too: records of entries removed from it
	// name it, and an undone rmdir gives it a new descriptor.
	if err := n.lfs.hold(st.Ino, p, true); err != nil {
		return fs.ToErrno(err)
	}
	if errno := n.LoopbackNode.Rmdir(ctx, name); errno != 0 {
		n.lfs.release(st.Ino)
		return errno
	}
	return n.entry(&record{kind: recRmdir, name: name, ino: st.Ino, mode: st.Mode})
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if flags&^unix.RENAME_NOREPLACE != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE and whiteouts are not modelled
	}
	n.lfs.mu.Lock()
	defer n.lfs.mu.Unlock()
	target := filepath.Join(np.backingPath(), newName)
	var shadow string
	if st, err := os.Lstat(target); err == nil {
		if st.IsDir() {
			return syscall.EINVAL // replacing a directory is not modelled
		}
		if shadow, err = n.lfs.keep(target); err != nil {
			return fs.ToErrno(err)
		}
	}
	if errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags); errno != 0 {
		if shadow != "" {
			os.Remove(filepath.Join(n.lfs.shadow, shadow))
		}
		return errno
	}
	ino, p, err := np.dirIno()
	if err != nil {
		return fs.ToErrno(err)
	}
	if err := n.lfs.hold(ino, p, true); err != nil {
		return fs.ToErrno(err)
	}
	r := &record{kind: recRename, name: name, newDir: ino, newName: newName, shadow: shadow}
	if errno := n.entry(r); errno != 0 {
		n.lfs.release(ino)
		return errno
	}
	return 0
}

// file is an open file. It does not offer its descriptor for kernel
// passthrough (every write must come through the node) and leaves writes,
// truncates and fsyncs to the node.
type file struct {
	lf *fs.LoopbackFile
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
	_ fs.FileGetlker   = (*file)(nil)
	_ fs.FileSetlker   = (*file)(nil)
	_ fs.FileSetlkwer  = (*file)(nil)
)

func wrap(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return &file{lf: lf}
	}
	return fh
}

func unwrap(fh fs.FileHandle) fs.FileHandle {
	if f, ok := fh.(*file); ok {
		return f.lf
	}
	return fh
}

func (f *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.lf.Read(ctx, buf, off)
}
func (f *file) Release(ctx context.Context) syscall.Errno { return f.lf.Release(ctx) }
func (f *file) Flush(ctx context.Context) syscall.Errno   { return f.lf.Flush(ctx) }
func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.lf.Getattr(ctx, out)
}
func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}
func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	return f.lf.Getlk(ctx, owner, lk, flags, out)
}
func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlk(ctx, owner, lk, flags)
}
func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.lf.Setlkw(ctx, owner, lk, flags)
}

// OpendirHandle opens a directory stream that leaves fsync to the node
// (the loopback's stream would fsync the backing directory itself).
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, ff, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dir{fh}, ff, 0
}

// dir is an open directory stream without Fsyncdir.
type dir struct {
	fh fs.FileHandle
}

var (
	_ fs.FileReaddirenter = (*dir)(nil)
	_ fs.FileReleasedirer = (*dir)(nil)
	_ fs.FileSeekdirer    = (*dir)(nil)
)

func (d *dir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.fh.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dir) Releasedir(ctx context.Context, flags uint32) {
	d.fh.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.fh.(fs.FileSeekdirer).Seekdir(ctx, off)
}
