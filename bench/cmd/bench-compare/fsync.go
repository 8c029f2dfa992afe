package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// fsyncRates is the machine's durable-write rate on the data directory's
// filesystem: write 4 KiB then fdatasync, in a loop, single-threaded.
type fsyncRates struct {
	// Overwrite rewrites the same block: the device's flush alone.
	Overwrite float64 `json:"overwrite_per_sec"`
	// Append grows the file: the flush plus the file size in the journal.
	Append float64 `json:"append_per_sec"`
	// Prealloc appends into a preallocated file, as etcd's WAL and
	// raft-wal do (ext4 still journals the unwritten-extent conversion).
	Prealloc float64 `json:"prealloc_append_per_sec"`
}

// measureFsync measures each pattern for d.
func measureFsync(dir string, d time.Duration) (fsyncRates, error) {
	var r fsyncRates
	var err error
	if r.Overwrite, err = fsyncLoop(dir, d, "overwrite"); err != nil {
		return r, err
	}
	if r.Append, err = fsyncLoop(dir, d, "append"); err != nil {
		return r, err
	}
	if r.Prealloc, err = fsyncLoop(dir, d, "prealloc"); err != nil {
		return r, err
	}
	return r, nil
}

func fsyncLoop(dir string, d time.Duration, mode string) (float64, error) {
	path := filepath.Join(dir, "fsync-probe")
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("fsync probe: %w", err)
	}
	defer os.Remove(path)
	defer f.Close()
	fd := int(f.Fd())
	if mode == "prealloc" {
		if err := syscall.Fallocate(fd, 0, 0, 64<<20); err != nil {
			return 0, fmt.Errorf("fsync probe: fallocate: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("fsync probe: %w", err)
		}
	}
	buf := make([]byte, 4096)
	n, off := 0, int64(0)
	start := time.Now()
	for time.Since(start) < d {
		switch mode {
		case "overwrite":
			_, err = f.WriteAt(buf, 0)
		default:
			_, err = f.WriteAt(buf, off)
			off += int64(len(buf))
		}
		if err != nil {
			return 0, fmt.Errorf("fsync probe: write: %w", err)
		}
		if err := syscall.Fdatasync(fd); err != nil {
			return 0, fmt.Errorf("fsync probe: fdatasync: %w", err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// etcdVersion asks the etcd binary for its version.
func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "etcd Version: "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
