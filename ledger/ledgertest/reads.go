package ledgertest

import (
	"sync"
	"testing"
	"time"
)

// ReadSignal counts a replicator's reads and lets a test wait for them: a
// long-poll registers before its first read, so a change made once that
// read is done must wake it. Embed it in a test replicator and call Signal
// after each read. The zero value is ready to use.
type ReadSignal struct {
	mu    sync.Mutex
	reads int
	ch    chan struct{} // closed and replaced at every read
}

// Signal records one read.
func (s *ReadSignal) Signal() {
	s.mu.Lock()
	s.reads++
	if s.ch != nil {
		close(s.ch)
	}
	s.ch = make(chan struct{})
	s.mu.Unlock()
}

// Count is the number of reads so far.
func (s *ReadSignal) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// Await waits until n reads are done, failing t after 30 s (a hang guard,
// not a threshold).
func (s *ReadSignal) Await(t testing.TB, n int) {
	t.Helper()
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	for {
		s.mu.Lock()
		if s.ch == nil {
			s.ch = make(chan struct{})
		}
		got, ch := s.reads, s.ch
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-guard.C:
			t.Fatalf("%d reads, want %d", got, n)
		}
	}
}
