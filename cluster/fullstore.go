package cluster

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// A full disk must not kill a node. hashicorp/raft panics when it cannot
// save its current term or vote (the stable store), so a leader whose disk
// filled up for a few seconds exited, and did not come back when space
// returned until something restarted it. patientStable waits out ENOSPC
// (and EDQUOT) on the stable store instead: the write is retried until it
// succeeds or the node stops. Raft stalls meanwhile, so the node serves
// nothing that needs it (callers get 503s from timeouts, never a wrong
// answer), and it carries on by itself once space returns. Log appends
// are not wrapped: raft answers their failure itself (the leader steps
// down, a follower refuses the entries), without panicking.
type patientStable struct {
	raft.StableStore
	ctx context.Context // the node's: ends the wait at shutdown
	log *slog.Logger
	// first and max bound the pause between two tries (defaults 10 ms, 1 s).
	first, max time.Duration
}

// diskFull reports whether err is a file system's "no space" answer.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// retry runs write until it succeeds, fails otherwise than with a full
// disk, or the node stops (then the last error is returned).
func (s *patientStable) retry(what string, write func() error) error {
	err := write()
	if err == nil || !diskFull(err) {
		return err
	}
	s.log.Error("the disk is full: raft cannot save its "+what+"; waiting for space (the node serves nothing meanwhile)", "err", err)
	pause := s.first
	if pause <= 0 {
		pause = 10 * time.Millisecond
	}
	limit := s.max
	if limit <= 0 {
		limit = time.Second
	}
	for {
		if s.ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		if err = write(); err == nil || !diskFull(err) {
			if err == nil {
				s.log.Warn("disk space is back: raft saved its " + what)
			}
			return err
		}
		pause = min(2*pause, limit)
	}
}

// Set implements raft.StableStore.
func (s *patientStable) Set(key, val []byte) error {
	return s.retry(string(key), func() error { return s.StableStore.Set(key, val) })
}

// SetUint64 implements raft.StableStore.
func (s *patientStable) SetUint64(key []byte, val uint64) error {
	return s.retry(string(key), func() error { return s.StableStore.SetUint64(key, val) })
}

// A node whose log store cannot append for want of space must not lead.
// Raft steps such a leader down, but nothing stops it from standing again:
// its log is as long as anyone's, so it won the next election, failed its
// first append, stepped down, and won again, and the cluster served
// nothing for as long as its disk stayed full, though a majority had
// space (the storage fault profile, disk-full-leader, strict seed 2).
// fullGuard keeps such a node from standing for election while its disk
// is full: on an append that fails with ENOSPC (or EDQUOT) it raises the
// node's heartbeat and election timeouts (a follower stands only when it
// has not heard from a leader within the heartbeat timeout), and puts
// them back once a probe file it writes (and removes) in the data dir
// every 500 ms fits. A successful append does not end the wait: a small
// batch can fit in a segment's preallocated space while the disk is still
// full (the storage runs saw it), and the node would stand, win and fail
// again.
type fullGuard struct {
	ctx   context.Context // the node's: ends the probing at shutdown
	log   *slog.Logger
	probe func() error  // a small durable write in the data dir
	stand func(ok bool) // restores (true) or raises (false) the timeouts
	every time.Duration // between two probes (default 500 ms)

	mu   sync.Mutex
	full bool
}

// observe is told the result of every append to the log store.
func (g *fullGuard) observe(err error) {
	if err != nil && diskFull(err) {
		g.enter(err)
	}
}

func (g *fullGuard) enter(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.full {
		return
	}
	g.full = true
	g.log.Error("the disk is full: the log store cannot append; this node will not stand for election until it can write again", "err", err)
	g.stand(false)
	go g.probeUntilSpace()
}

func (g *fullGuard) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.full {
		return
	}
	g.full = false
	g.log.Warn("disk space is back (a probe write fit): this node may stand for election again")
	g.stand(true)
}

// isFull reports whether the guard holds the node back.
func (g *fullGuard) isFull() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.full
}

func (g *fullGuard) probeUntilSpace() {
	every := g.every
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for g.isFull() {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
		}
		if err := g.probe(); err == nil {
			g.leave()
		}
	}
}

// probeSize is the size of fullGuard's probe file: about what the next
// appends need.
const probeSize = 64 << 10

// probeWrite writes probeSize bytes to a file in dir, fsyncs and removes
// it: it fails while the file system has no room for them.
func probeWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".space-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer os.Remove(name)
	_, err = f.Write(make([]byte, probeSize))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// guardedLogStore tells a fullGuard the result of every append (a log
// store wrapper: see innerMonotonic).
type guardedLogStore struct {
	raft.LogStore
	guard *fullGuard
}

// IsMonotonic implements raft.MonotonicLogStore as the inner store does.
func (s guardedLogStore) IsMonotonic() bool { return innerMonotonic(s.LogStore) }

// StoreLog implements raft.LogStore through StoreLogs.
func (s guardedLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore.
func (s guardedLogStore) StoreLogs(logs []*raft.Log) error {
	err := s.LogStore.StoreLogs(logs)
	s.guard.observe(err)
	return err
}

// fullDiskTimeout is the heartbeat and election timeout of a node whose
// disk is full: long enough that it never stands for election meanwhile.
const fullDiskTimeout = 24 * time.Hour

// standForElection restores the configured heartbeat and election
// timeouts (ok) or raises them to fullDiskTimeout, so that the node does
// not stand for election while its disk is full.
func (n *Node) standForElection(ok bool) {
	if !n.raftStarted.Load() {
		return // raft has appended nothing yet
	}
	r := n.raft
	rc := r.ReloadableConfig()
	rc.HeartbeatTimeout, rc.ElectionTimeout = fullDiskTimeout, fullDiskTimeout
	if ok {
		rc.HeartbeatTimeout, rc.ElectionTimeout = n.cfg.Raft.HeartbeatTimeout, n.cfg.Raft.ElectionTimeout
	}
	if err := r.ReloadConfig(rc); err != nil {
		n.log.Error("cannot change the raft timeouts for a full disk", "err", err)
	}
}
