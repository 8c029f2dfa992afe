package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/faults"
)

// LocalDuplicates configures answering duplicate claims from this node's
// own copy of the ledger (fsm.Machine.LocalDuplicate) instead of sending
// them to the leader: a replica in another region answers an agent's
// retry of an effect that already ran without a WAN round trip. Only a
// node that is not the leader answers locally (the leader's proposal is
// as cheap), and only when its copy holds the key executed or committed
// with the claim's fingerprint, well inside the dedupe window.
//
// Each local answer queues a note that a background loop proposes to the
// leader (fsm.NoteDuplicates, as many notes per entry as have queued), so
// the key's audit trail still records every duplicate; the answer does not
// wait for it. A batch is retried until the leader answers it (its notes
// are idempotent), for at most NoteTimeout; a full queue turns local
// answers off until it drains (the claim then goes to the leader as
// usual). Close stops local answers, then gives the queued notes a moment
// to reach the leader. What a crash loses is the notes still queued: their
// duplicates were answered but are missing from the trail.
//
// The answer is right only while the clock skew between this node and the
// leaders stays under Margin (see cluster/DESIGN.md, Regions).
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
	notes chan fsm.DuplicateNote
	seq   atomic.Uint64
	// closing is set (under enqueue's write lock) when Close begins: from
	// then on claims go to the leader, so no note is queued after the
	// loop's last drain.
	enqueue sync.RWMutex
	closing bool
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	// ctx bounds every send; it ends flushBound after close, so the notes
	// queued at shutdown get that long to reach the leader.
	ctx    context.Context
	cancel context.CancelFunc

	answered, queueFull, noted, lost atomic.Uint64
}

// answerDuplicatesLocally turns local duplicate answers on and starts the
// loop that sends their notes; Close stops it. New calls it, with cfg's
// Node and Leading checked.
func (s *Service) answerDuplicatesLocally(cfg LocalDuplicates) {
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
	ld := &localDuplicates{cfg: cfg, notes: make(chan fsm.DuplicateNote, cfg.Queue),
		stop: make(chan struct{}), done: make(chan struct{})}
	ld.ctx, ld.cancel = context.WithCancel(context.Background())
	// The first note of each start is unique across restarts: the clock
	// at start, then a counter.
	ld.seq.Store(uint64(cfg.Now().UnixNano()))
	s.local = ld
	go ld.run(s)
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
	err := s.r.Read(ctx, Stale, func(l *fsm.Machine) {
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
	note := fsm.DuplicateNote{Namespace: c.Namespace, Key: c.Key, Owner: c.Owner, Fingerprint: c.Fingerprint,
		FencingToken: in.FencingToken, Note: fmt.Sprintf("%s/%d", ld.cfg.Node, ld.seq.Add(1)), AnsweredAt: now}
	ld.enqueue.RLock()
	defer ld.enqueue.RUnlock()
	if ld.closing {
		return nil
	}
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

// run proposes the queued notes until Close, as many at a time as have
// queued up (at most fsm.MaxDuplicateNotes): one log entry per round trip
// to the leader, however many local answers that round trip saw. Then it
// sends what is left within flushBound.
func (ld *localDuplicates) run(s *Service) {
	defer close(ld.done)
	for {
		select {
		case <-ld.stop:
			for len(ld.notes) > 0 {
				ld.deliver(s, ld.batch(<-ld.notes))
			}
			return
		case n := <-ld.notes:
			ld.deliver(s, ld.batch(n))
		}
	}
}

// batch is first and the notes queued behind it, up to the command's
// bound.
func (ld *localDuplicates) batch(first fsm.DuplicateNote) []fsm.DuplicateNote {
	out := []fsm.DuplicateNote{first}
	for len(out) < fsm.MaxDuplicateNotes {
		select {
		case n := <-ld.notes:
			out = append(out, n)
		default:
			return out
		}
	}
	return out
}

func (ld *localDuplicates) deliver(s *Service, notes []fsm.DuplicateNote) {
	if ld.send(s, notes) {
		ld.noted.Add(uint64(len(notes)))
		return
	}
	ld.lost.Add(uint64(len(notes)))
	ld.cfg.Log.Warn("ledger: locally answered duplicates are missing from their keys' audit trails: their notes were not recorded",
		"notes", len(notes), "first_key", notes[0].Key, "first_namespace", notes[0].Namespace, "first_note", notes[0].Note)
}

// send proposes notes until the leader answers or NoteTimeout passes.
func (ld *localDuplicates) send(s *Service, notes []fsm.DuplicateNote) bool {
	ctx, cancel := context.WithTimeout(ld.ctx, ld.cfg.NoteTimeout)
	defer cancel()
	return s.proposeDuplicateNotes(ctx, ld.cfg.Node, notes, nil)
}

// proposeDuplicateNotes proposes one NoteDuplicates entry of node's notes
// until it is applied or ctx ends, backing off between tries: a note's id
// makes a second recording of it a no-op, so an unknown outcome is simply
// tried again. A refusal (a malformed batch: a bug) is definite. tried, if
// set, is told of every proposal. Followers' local answers and the
// leader's use it alike.
func (s *Service) proposeDuplicateNotes(ctx context.Context, node string, notes []fsm.DuplicateNote, tried func()) bool {
	backoff := 50 * time.Millisecond
	for {
		// Encode stamps the command it is given: a new one per try.
		r, err := s.r.Propose(ctx, &fsm.NoteDuplicates{Node: node, Notes: notes})
		if tried != nil {
			tried()
		}
		if err == nil {
			return r.Status == fsm.StatusOK
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
		ld.enqueue.Lock()
		ld.closing = true
		ld.enqueue.Unlock()
		close(ld.stop)
		t := time.AfterFunc(flushBound, ld.cancel)
		<-ld.done
		t.Stop()
		ld.cancel()
	})
}
