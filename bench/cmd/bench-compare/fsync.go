package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// fsyncRates is the machine's durable-write rate on the data directory's
// filesystem: a write then fdatasync, in a loop, single-threaded.
type fsyncRates struct {
	// Overwrite rewrites the same 4 KiB block: the device's flush alone.
	Overwrite float64 `json:"overwrite_per_sec"`
	// Append adds 256 bytes to a growing file: the flush plus the new
	// size in the filesystem journal.
	Append float64 `json:"append_per_sec"`
	// Prealloc adds 256-byte records to a preallocated file, as etcd's WAL
	// and raft-wal do: the pattern of a log append, and the rate the
	// 1-client limit is computed from.
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
	size := 256
	if mode == "overwrite" {
		size = 4096
	}
	buf := make([]byte, size)
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

// loopbackRTT is the median round trip of a 64-byte ping-pong over a
// loopback TCP connection.
func loopbackRTT() (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("rtt: %w", err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("rtt: %w", err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	var rtts []time.Duration
	for i := 0; i < 500; i++ {
		t0 := time.Now()
		if _, err := c.Write(buf); err != nil {
			return 0, fmt.Errorf("rtt: %w", err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return 0, fmt.Errorf("rtt: %w", err)
		}
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2], nil
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
