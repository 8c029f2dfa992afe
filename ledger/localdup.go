package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/faults"
)

// LocalDuplicates configures answering duplicate claims from this node's
// own copy of the ledger (fsm.Ledger.LocalDuplicate) instead of sending
// them to the leader: a replica in another region answers an agent's
// retry of an effect that already ran without a WAN round trip. Only a
// node that is not the leader answers locally (the leader's proposal is
// as cheap), and only when its copy holds the key executed or committed
// with the claim's fingerprint, well inside the dedupe window.
//
// Each local answer queues a fsm.NoteDuplicate that a background loop
// proposes to the leader, so the key's audit trail still records every
// duplicate; the answer does not wait for it. A note is retried until the
// leader answers it (a note is idempotent), for at most NoteTimeout; a
// full queue turns local answers off until it drains (the claim then goes
// to the leader as usual). What a crash loses is the notes still queued:
// their duplicates were answered but are missing from the trail.
type LocalDuplicates struct {
	// Node is this node's id, recorded in each note.
	Node string
	// Leading reports whether this node is the leader now.
	Leading func() bool
	// Margin is how far the leader's clock may run ahead of this node's:
	// no local answer within Margin of the end of a record's window
	// (default 5 s).
	Margin time.Duration
	// Queue is how many notes may wait for the leader (default 4096).
	Queue int
	// NoteTimeout bounds the tries of one note (default 1 minute).
	NoteTimeout time.Duration
	// Now is the node's clock (default time.Now).
	Now func() time.Time
	// Log gets a warning for each note given up (default slog.Default()).
	Log *slog.Logger
}

// LocalDuplicateStats counts local answers and their notes.
type LocalDuplicateStats struct {
	// Answered is the duplicates answered locally; QueueFull the claims
	// sent to the leader because the note queue was full.
	Answered, QueueFull uint64
	// Noted is the notes the leader applied; Lost the notes given up
	// (NoteTimeout passed or the service closed first).
	Noted, Lost uint64
	// Queued is the notes waiting now.
	Queued int
}

// localDuplicates is the running configuration: the note queue and the
// loop that drains it.
type localDuplicates struct {
	cfg   LocalDuplicates
	notes chan *fsm.NoteDuplicate
	seq   atomic.Uint64
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// ctx bounds every send; it ends flushBound after close, so the notes
	// queued at shutdown get that long to reach the leader.
	ctx    context.Context
	cancel context.CancelFunc

	answered, queueFull, noted, lost atomic.Uint64
}

// AnswerDuplicatesLocally turns local duplicate answers on and starts the
// loop that sends their notes; Close stops it. Call it before the service
// serves, at most once.
func (s *Service) AnswerDuplicatesLocally(cfg LocalDuplicates) error {
	if cfg.Node == "" || cfg.Leading == nil {
		return errors.New("ledger: local duplicate answers need the node's id and a leadership check")
	}
	if cfg.Margin <= 0 {
		cfg.Margin = 5 * time.Second
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 4096
	}
	if cfg.NoteTimeout <= 0 {
		cfg.NoteTimeout = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	ld := &localDuplicates{cfg: cfg, notes: make(chan *fsm.NoteDuplicate, cfg.Queue),
		stop: make(chan struct{}), done: make(chan struct{})}
	ld.ctx, ld.cancel = context.WithCancel(context.Background())
	// The first note of each start is unique across restarts: the clock
	// at start, then a counter.
	ld.seq.Store(uint64(cfg.Now().UnixNano()))
	s.local = ld
	go ld.run(s)
	return nil
}

// LocalDuplicateStats returns the counts of local answers (zero when they
// are off).
func (s *Service) LocalDuplicateStats() LocalDuplicateStats {
	ld := s.local
	if ld == nil {
		return LocalDuplicateStats{}
	}
	return LocalDuplicateStats{Answered: ld.answered.Load(), QueueFull: ld.queueFull.Load(),
		Noted: ld.noted.Load(), Lost: ld.lost.Load(), Queued: len(ld.notes)}
}

// answerLocally answers claim c from this node's copy when that is safe
// and its note could be queued; nil means "ask the leader".
func (s *Service) answerLocally(ctx context.Context, c *fsm.Claim) *fsm.Result {
	ld := s.local
	if ld == nil || ld.cfg.Leading() {
		return nil
	}
	var in *fsm.Intent
	var index uint64
	now := ld.cfg.Now().UnixNano()
	probe := c
	if s.faults.Has(faults.LocalDuplicateAnyPayload) {
		// Seeded bug: answer for the recorded payload, whatever was sent.
		cp := *c
		probe = &cp
	}
	err := s.r.Read(ctx, Stale, func(l *fsm.Ledger) {
		if probe != c {
			if in := l.Get(c.Namespace, c.Key); in != nil {
				probe.Fingerprint = in.Fingerprint
			}
		}
		if got, ok := l.LocalDuplicate(probe, now, ld.cfg.Margin.Nanoseconds()); ok {
			in, index = got, l.AppliedIndex()
		}
	})
	if err != nil || in == nil {
		return nil
	}
	note := &fsm.NoteDuplicate{Namespace: c.Namespace, Key: c.Key, Owner: c.Owner, Fingerprint: c.Fingerprint,
		Node: ld.cfg.Node, Note: fmt.Sprintf("%s/%d", ld.cfg.Node, ld.seq.Add(1)), AnsweredAt: now}
	select {
	case ld.notes <- note:
	default:
		ld.queueFull.Add(1)
		return nil
	}
	ld.answered.Add(1)
	return &fsm.Result{Status: fsm.StatusDuplicate, Intent: in, Index: index, Local: true}
}

// flushBound is how long the notes queued when the service closes get to
// reach the leader.
const flushBound = 2 * time.Second

// run proposes the queued notes, one at a time, until Close; then it
// sends what is left within flushBound.
func (ld *localDuplicates) run(s *Service) {
	defer close(ld.done)
	for {
		select {
		case <-ld.stop:
			for {
				select {
				case n := <-ld.notes:
					ld.deliver(s, n)
				default:
					return
				}
			}
		case n := <-ld.notes:
			ld.deliver(s, n)
		}
	}
}

func (ld *localDuplicates) deliver(s *Service, n *fsm.NoteDuplicate) {
	if ld.send(s, n) {
		ld.noted.Add(1)
		return
	}
	ld.lost.Add(1)
	ld.cfg.Log.Warn("ledger: a locally answered duplicate is missing from the key's audit trail: its note was not recorded",
		"key", n.Key, "namespace", n.Namespace, "note", n.Note)
}

// send proposes n until the leader answers or NoteTimeout passes.
func (ld *localDuplicates) send(s *Service, n *fsm.NoteDuplicate) bool {
	ctx, cancel := context.WithTimeout(ld.ctx, ld.cfg.NoteTimeout)
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		cmd := *n // Encode stamps the copy it is given
		if _, err := s.r.Propose(ctx, &cmd); err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// close stops the loop once the notes still queued are sent or
// flushBound has passed (those are lost, and counted).
func (ld *localDuplicates) close() {
	ld.once.Do(func() {
		close(ld.stop)
		t := time.AfterFunc(flushBound, ld.cancel)
		<-ld.done
		t.Stop()
		ld.cancel()
	})
}
