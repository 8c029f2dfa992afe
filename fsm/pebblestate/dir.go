package pebblestate

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults of Options.
const (
	DefaultCacheBytes    = 64 << 20
	DefaultMemTableBytes = 16 << 20
)

// Options configures a Dir. The zero value is the configuration the engine
// evaluation measured (bench/storeeval).
type Options struct {
	// CacheBytes bounds pebble's block cache, off the Go heap and shared by
	// every generation of the Dir (default DefaultCacheBytes).
	CacheBytes int64
	// MemTableBytes is the size of one memtable (default
	// DefaultMemTableBytes). pebble queues at most two before it stalls
	// commits, so twice this bounds the memory of committed but unflushed
	// writes, and what a crash loses (the node replays it from the log).
	MemTableBytes uint64
	// Logger receives pebble's messages (info and errors); nil discards
	// them. pebble's fatal errors panic with fsm.ErrStoreIO whatever it is.
	Logger *slog.Logger

	// fs is the file system: tests pass an in-memory or failing one; nil
	// is the operating system's.
	fs vfs.FS
}

// File names in a Dir.
const (
	currentFile = "CURRENT"
	currentTemp = "CURRENT.tmp"
	lockFile    = "LOCK"
	genPrefix   = "gen-"
)

func genName(n uint64) string { return fmt.Sprintf("%s%06d", genPrefix, n) }

// parseGen is n for a generation's directory name, or false.
func parseGen(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, genPrefix)
	if !ok || len(digits) < 6 || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil && n > 0
}

// Dir is a directory of store generations: CURRENT names the live one
// (gen-NNNNNN), and a snapshot is restored into a staged one that Promote
// swaps in atomically. Its methods may be called from any goroutine, but
// Promote, Discard and Close not concurrently with the writer of the
// stores they affect.
type Dir struct {
	fs    vfs.FS
	path  string
	opts  Options
	log   *slog.Logger
	cache *pebble.Cache
	lock  io.Closer // the Dir's LOCK file: one process at a time

	mu       sync.Mutex
	current  *Store
	staged   map[*Store]bool
	next     uint64 // the next generation's number
	open     int    // stores not yet closed
	closed   bool
	released bool // lock and cache released
}

// OpenDir opens the generations in dir, creating dir and a first, empty
// generation if there is no CURRENT. It removes every generation CURRENT
// does not name: the debris of a staging that a crash interrupted.
func OpenDir(dir string, opts Options) (*Dir, error) {
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.MemTableBytes == 0 {
		opts.MemTableBytes = DefaultMemTableBytes
	}
	d := &Dir{fs: opts.fs, path: dir, opts: opts, log: opts.Logger, staged: map[*Store]bool{}}
	if d.fs == nil {
		d.fs = vfs.Default
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if err := d.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pebblestate: %w", err)
	}
	lock, err := d.fs.Lock(d.fs.PathJoin(dir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("pebblestate: lock %s: %w", dir, err)
	}
	d.lock = lock
	d.cache = pebble.NewCache(opts.CacheBytes)
	if err := d.openCurrent(); err != nil {
		d.cache.Unref()
		lock.Close()
		return nil, fmt.Errorf("pebblestate: open %s: %w", dir, err)
	}
	return d, nil
}

// openCurrent reads CURRENT, removes the other generations and opens the
// current one (or creates the first).
func (d *Dir) openCurrent() error {
	cur, err := d.readCurrent()
	if err != nil {
		return err
	}
	names, err := d.fs.List(d.path)
	if err != nil {
		return err
	}
	d.next = 1
	for _, name := range names {
		if name == currentTemp {
			if err := d.fs.Remove(d.fs.PathJoin(d.path, name)); err != nil {
				return err
			}
			continue
		}
		n, ok := parseGen(name)
		if !ok {
			continue
		}
		d.next = max(d.next, n+1)
		if name == cur {
			continue
		}
		d.log.Info("pebblestate: removing a generation CURRENT does not name", "dir", d.path, "generation", name)
		if err := d.fs.RemoveAll(d.fs.PathJoin(d.path, name)); err != nil {
			return err
		}
	}
	if cur != "" {
		n, _ := parseGen(cur)
		s, err := d.openStore(n, false)
		if err != nil {
			return err
		}
		d.open++
		d.current = s
		return nil
	}
	s, err := d.openStore(d.next, true)
	if err != nil {
		return err
	}
	d.open++
	d.next++
	err = d.writeCurrent(genName(s.gen))
	if err == nil { // dir may be new: its entry in its parent must last too
		err = syncDir(d.fs, d.fs.PathDir(d.path))
	}
	if err != nil {
		s.retire(true)
		return err
	}
	d.current = s
	return nil
}

// readCurrent is the generation CURRENT names, or "" if there is no
// CURRENT.
func (d *Dir) readCurrent() (string, error) {
	f, err := d.fs.Open(d.fs.PathJoin(d.path, currentFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(b))
	if _, ok := parseGen(name); !ok {
		return "", fmt.Errorf("%s names no generation: %q", currentFile, b)
	}
	return name, nil
}

// writeCurrent makes CURRENT name gen durably: a temporary file, fsynced,
// renamed over CURRENT, and the directory fsynced.
func (d *Dir) writeCurrent(gen string) error {
	tmp := d.fs.PathJoin(d.path, currentTemp)
	f, err := d.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, gen+"\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.fs.Rename(tmp, d.fs.PathJoin(d.path, currentFile))
	}
	if err != nil {
		d.fs.Remove(tmp)
		return fmt.Errorf("write %s: %w", currentFile, err)
	}
	if err := syncDir(d.fs, d.path); err != nil {
		return &unsyncedError{err}
	}
	return nil
}

// unsyncedError is a failed fsync of the directory after CURRENT was
// renamed: which generation a crash would leave current is unknown.
type unsyncedError struct{ err error }

func (e *unsyncedError) Error() string {
	return fmt.Sprintf("sync the directory after renaming %s: %v", currentFile, e.err)
}
func (e *unsyncedError) Unwrap() error { return e.err }

// syncDir fsyncs the directory dir: the entries made in it last.
func syncDir(fs vfs.FS, dir string) error {
	f, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// openStore opens generation n, creating it if create is set (and
// refusing a missing one otherwise: pebble would make it empty). The
// caller counts it in d.open.
func (d *Dir) openStore(n uint64, create bool) (*Store, error) {
	path := d.fs.PathJoin(d.path, genName(n))
	s := &Store{fs: d.fs, path: path, gen: n, dir: d, log: d.log, bgErrs: make(chan error, 1)}
	logger := pebbleLogger{d.log.With("dir", path)}
	opts := &pebble.Options{
		FS:               d.fs,
		Cache:            d.cache,
		DisableWAL:       true,
		MemTableSize:     d.opts.MemTableBytes,
		Logger:           logger,
		ErrorIfExists:    create,
		ErrorIfNotExists: !create,
		EventListener:    &pebble.EventListener{BackgroundError: s.backgroundError},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if create {
		if err := d.fs.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
	}
	db, err := pebble.Open(path, opts)
	if err != nil {
		return nil, fmt.Errorf("pebble open %s: %w", path, err)
	}
	s.db = db
	return s, nil
}

// Current is the current generation's store.
func (d *Dir) Current() *Store {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.current
}

// Stage returns a fresh, empty store in a new generation, for a snapshot
// to be restored into. It is not current until Promote; Discard drops it.
// A crash before Promote leaves it as debris for the next OpenDir.
func (d *Dir) Stage() (*Store, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("pebblestate: stage in %s: %w", d.path, errClosed)
	}
	s, err := d.openStore(d.next, true)
	d.next++
	if err != nil {
		return nil, fmt.Errorf("pebblestate: stage in %s: %w", d.path, err)
	}
	d.open++
	d.staged[s] = true
	return s, nil
}

// Promote makes staged, a store from Stage with everything committed,
// the current one: it syncs staged, points CURRENT at it durably, and
// retires the old current store, which is closed and removed once its last
// view is released (its views go on reading the old state until then).
// After Promote, Current is staged.
//
// On an error before CURRENT is renamed, nothing changed: staged is still
// staged (Discard it). If the rename succeeded but fsyncing the directory
// failed, staged is current all the same (it is what CURRENT names now)
// and the error says so; the old generation is closed but its directory
// is kept, since a crash could bring back either, and the next OpenDir
// removes the one CURRENT does not name.
func (d *Dir) Promote(staged *Store) error {
	d.mu.Lock()
	if d.closed || !d.staged[staged] {
		d.mu.Unlock()
		return fmt.Errorf("pebblestate: promote: %s is not a staged generation of %s", staged.path, d.path)
	}
	if staged.batch != nil {
		d.mu.Unlock()
		return fmt.Errorf("pebblestate: promote %s: writes not committed", staged.path)
	}
	if err := staged.flush(); err != nil {
		d.mu.Unlock()
		return fmt.Errorf("pebblestate: promote %s: %w", staged.path, err)
	}
	err := d.writeCurrent(genName(staged.gen))
	var unsynced *unsyncedError
	if err != nil && !errors.As(err, &unsynced) {
		d.mu.Unlock()
		return fmt.Errorf("pebblestate: promote %s: %w", staged.path, err)
	}
	old := d.current
	d.current = staged
	delete(d.staged, staged)
	d.mu.Unlock()
	if rerr := old.retire(err == nil); rerr != nil {
		d.log.Error("pebblestate: closing the retired generation", "dir", old.path, "err", rerr)
	}
	if err != nil {
		return fmt.Errorf("pebblestate: promoted %s, but not durably: %w", staged.path, err)
	}
	return nil
}

// Discard closes a staged store and removes its generation (once its views,
// if any, are released).
func (d *Dir) Discard(staged *Store) error {
	d.mu.Lock()
	ok := d.staged[staged]
	delete(d.staged, staged)
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("pebblestate: discard: %s is not a staged generation of %s", staged.path, d.path)
	}
	if err := staged.retire(true); err != nil {
		return fmt.Errorf("pebblestate: discard: %w", err)
	}
	return nil
}

// Close syncs and closes the current store and discards the staged ones:
// a reopened Dir holds everything committed. Writes not committed are
// dropped. Callers release their views first: a store with views open is
// closed when the last is released (and the Dir's lock is held until
// then), but any other use of a store after Close panics.
func (d *Dir) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	cur := d.current
	staged := make([]*Store, 0, len(d.staged))
	for s := range d.staged {
		staged = append(staged, s)
	}
	clear(d.staged)
	d.mu.Unlock()
	var errs []error
	for _, s := range staged {
		errs = append(errs, s.retire(true))
	}
	if err := cur.flush(); err != nil {
		errs = append(errs, fmt.Errorf("sync %s: %w", cur.path, err))
	}
	errs = append(errs, cur.retire(false))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pebblestate: close %s: %w", d.path, err)
	}
	return nil
}

// storeClosed counts a store's close; the last after Close releases the
// cache and the lock.
func (d *Dir) storeClosed() {
	d.mu.Lock()
	d.open--
	release := d.closed && d.open == 0 && !d.released
	if release {
		d.released = true
	}
	d.mu.Unlock()
	if release {
		d.cache.Unref()
		if err := d.lock.Close(); err != nil {
			d.log.Error("pebblestate: unlock", "dir", d.path, "err", err)
		}
	}
}

// pebbleLogger is pebble's Logger over slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Info("pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is pebble's report of an error it cannot go on from (corruption,
// a broken invariant): it must not return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble: fatal: " + msg)
	ioPanic(errors.New("pebble: " + msg))
}
