package cluster

import (
	"context"
	"errors"
	"log/slog"
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
