package cluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/clusterview"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/replication"
)

// SnapshotInfo describes a ledger snapshot, a backup
// (clusterview.SnapshotInfo).
type SnapshotInfo = clusterview.SnapshotInfo

// ErrNotEmpty refuses a restore into a ledger that already holds intents
// (unless forced): a restore replaces the whole state, and on a ledger in
// use it would undo acknowledged writes (clusterview's, the same value).
var ErrNotEmpty = clusterview.ErrNotEmpty

// indexedSnapshots wraps raft's snapshot store so that the state machine
// learns the Raft index of every snapshot it restores (raft's FSM.Restore
// is not told). The index is needed because the ledger's own applied index
// (the last command in the snapshot) can lie below the snapshot's Raft
// index: no-ops and configuration entries follow it, and a restored backup
// is installed at an index past the new cluster's log.
//
// It also makes every snapshot it creates durable before raft compacts the
// log behind it (durableSink).
type indexedSnapshots struct {
	raft.SnapshotStore
	dir  string             // the store's directory, snapshots/
	sync func(string) error // nil: syncDir
	// noChecksum is the seeded bug faults.SnapshotNoChecksum.
	noChecksum bool
	// checkpoints reads checkpoint snapshots (checkpoint.go).
	checkpoints checkpointReader
}

// Create implements raft.SnapshotStore: the sink's Close fsyncs the new
// snapshot's directory and the store's.
func (s *indexedSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil && s.dir != "" {
		// raft made the snapshot's directory, then failed (a full disk)
		// and left it: see removeFailedCreate.
		return sink, errors.Join(err, removeFailedCreate(s.dir, term, index))
	}
	if err != nil || s.dir == "" {
		return sink, err
	}
	return &durableSink{SnapshotSink: sink, dir: s.dir, sync: s.sync,
		meta: newSinkMeta(version, index, term, configuration, configurationIndex)}, nil
}

// Open implements raft.SnapshotStore.
func (s *indexedSnapshots) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if s.noChecksum {
		return s.openUnchecked(id)
	}
	meta, rc, err := s.SnapshotStore.Open(id)
	if err != nil {
		return nil, nil, err
	}
	if s.dir != "" {
		if err := verifySnapMeta(filepath.Join(s.dir, id), meta); err != nil {
			_ = rc.Close()
			return nil, nil, err
		}
	}
	return s.stream(meta, rc)
}

// stream returns the version 1 stream of an opened snapshot: its
// state.bin, or made from its checkpoint when state.bin refers to one.
func (s *indexedSnapshots) stream(meta *raft.SnapshotMeta, rc io.ReadCloser) (*raft.SnapshotMeta, io.ReadCloser, error) {
	br := bufio.NewReaderSize(rc, 4096)
	if ref := readCheckpointRef(br); ref != nil {
		_ = rc.Close()
		if s.dir == "" {
			return nil, nil, fmt.Errorf("%w: snapshot %s: no snapshot directory", errBadCheckpoint, meta.ID)
		}
		return s.checkpoints.open(s.dir, meta, ref)
	}
	return meta, &indexedReader{ReadCloser: bufferedReadCloser{Reader: br, Closer: rc}, index: meta.Index}, nil
}

// bufferedReadCloser reads through a bufio.Reader and closes what it
// reads.
type bufferedReadCloser struct {
	*bufio.Reader
	io.Closer
}

// indexedReader is a snapshot being restored and its Raft index.
type indexedReader struct {
	io.ReadCloser
	index uint64
}

// Snapshot is a consistent, immutable view of the ledger taken by
// TakeSnapshot, to be written out once with Write (clusterview.Snapshot).
type Snapshot = clusterview.Snapshot

// ledgerSnapshot is the Snapshot TakeSnapshot takes: a clone of the
// state machine's ledger.
type ledgerSnapshot struct{ l *fsm.Machine }

// TakeSnapshot takes a consistent view of the ledger: it is read
// linearizably on the leader (a follower answers replication.NotLeaderError), so
// it holds every write acknowledged before the call. The clone costs O(1)
// and writes go on while it is written out.
func (n *Node) TakeSnapshot(ctx context.Context) (Snapshot, error) {
	var l *fsm.Machine
	if err := n.Read(ctx, replication.Linearizable, func(cur *fsm.Machine) { l = cur.Clone() }); err != nil {
		return nil, err
	}
	return &ledgerSnapshot{l: l}, nil
}

// Index is the log index of the last command the snapshot reflects.
func (s *ledgerSnapshot) Index() uint64 { return s.l.AppliedIndex() }

// Intents is the number of intents in the snapshot.
func (s *ledgerSnapshot) Intents() int { return s.l.Len() }

// Write writes the snapshot in the state machine's deterministic encoding
// (fsm.Machine.WriteSnapshot, with a SHA-256 trailer; fsm.Restore verifies it and
// every value).
func (s *ledgerSnapshot) Write(w io.Writer) (SnapshotInfo, error) {
	defer s.l.Release() // written once: the view it holds goes
	h := sha256.New()
	cw := &countingWriter{w: io.MultiWriter(w, h)}
	if err := s.l.WriteSnapshot(cw); err != nil {
		return SnapshotInfo{}, fmt.Errorf("cluster: write snapshot: %w", err)
	}
	return SnapshotInfo{Index: s.Index(), Intents: s.Intents(), Digest: hex.EncodeToString(h.Sum(nil)), Bytes: cw.n}, nil
}

// WriteSnapshot takes a snapshot (see TakeSnapshot) and writes it to w.
func (n *Node) WriteSnapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	s, err := n.TakeSnapshot(ctx)
	if err != nil {
		return SnapshotInfo{}, err
	}
	return s.Write(w)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}

// maxRestoreClockLead is how far ahead of the leader's clock a restored
// ledger's clock may be. The ledger's time never runs backwards, so a
// ledger restored with a clock ahead of the cluster's would hold its time
// there until the cluster's clock caught up: no lease would pass, no
// dedupe window end and no execution token lapse until then. A backup's
// clock is behind the restoring leader's, but for the skew between the
// two clusters' clocks.
const maxRestoreClockLead = 24 * time.Hour

// Restore replaces the ledger of the whole cluster with a snapshot written
// by WriteSnapshot. It runs on the leader (a follower answers
// replication.NotLeaderError) through raft's user restore: the snapshot is
// checked first (format, order, SHA-256 trailer and every value, by
// fsm.Restore, and its clock against this leader's), installed at a Raft
// index past both the current log and the snapshot's own index, and
// followers install it from the leader. New commands therefore get log
// indexes, and so fencing tokens, above every token in the snapshot.
// Unless force is set, a ledger that holds intents is refused with
// ErrNotEmpty. A snapshot that fails its checks is refused with an
// error wrapping fsm.ErrBadSnapshot (and fsm.ErrInvalidSnapshot for a
// value), and the cluster is left as it was.
func (n *Node) Restore(ctx context.Context, data []byte, force bool) (SnapshotInfo, error) {
	if n.stopping.Load() {
		return SnapshotInfo{}, replication.ErrShuttingDown
	}
	if n.raft.State() != raft.Leader {
		return SnapshotInfo{}, n.notLeader()
	}
	// Every check comes before raft.Restore: once raft has installed the
	// snapshot it panics if the state machine fails to restore it. The
	// state machine restores with fsm.Restore too, which is deterministic,
	// so what passes here restores there.
	l, err := fsm.Restore(bytes.NewReader(data))
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("cluster: %w", err)
	}
	if lead := time.Duration(l.Now() - n.cfg.Clock().UnixNano()); lead > maxRestoreClockLead {
		return SnapshotInfo{}, fmt.Errorf("cluster: %w: %w: the snapshot's clock is %s ahead of this leader's (at most %s): "+
			"no lease would pass and no token lapse until the cluster's clock caught up",
			fsm.ErrBadSnapshot, fsm.ErrInvalidSnapshot, lead.Round(time.Second), maxRestoreClockLead)
	}
	info := SnapshotInfo{Index: l.AppliedIndex(), Intents: l.Len(), Digest: l.Digest(), Bytes: int64(len(data))}
	if !force {
		var cur int
		if err := n.Read(ctx, replication.Linearizable, func(x *fsm.Machine) { cur = x.Len() }); err != nil {
			return SnapshotInfo{}, err
		}
		if cur > 0 {
			return SnapshotInfo{}, fmt.Errorf("cluster: %w (it holds %d intents)", ErrNotEmpty, cur)
		}
	}
	// Raft installs the snapshot one index past the larger of its log's
	// last index and meta.Index. fsm.Restore refused an applied index above
	// fsm.MaxSnapshotIndex, so that index cannot wrap to 0 (a hostile
	// 2^64-1 did, and raft panicked), and the fencing tokens of new grants
	// stay above every token in the snapshot.
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: l.AppliedIndex(), Size: int64(len(data))}
	done := make(chan error, 1)
	go func() { done <- n.raft.Restore(meta, bytes.NewReader(data), n.cfg.ApplyTimeout) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return SnapshotInfo{}, fmt.Errorf("%w: %w while restoring", replication.ErrOutcomeUnknown, ctx.Err())
	}
	if err != nil {
		return SnapshotInfo{}, n.mapApplyError(err)
	}
	n.log.Warn("ledger replaced by a restored snapshot", "snapshot_index", info.Index, "intents", info.Intents,
		"digest", info.Digest)
	return info, nil
}

// openUnchecked is the seeded bug faults.SnapshotNoChecksum: it reads a
// snapshot's state.bin without raft's CRC-64 check and rewrites the
// ledger encoding's SHA-256 trailer to match what it read, so neither
// checksum can see a damaged byte (the ledger's value checks still run).
func (s *indexedSnapshots) openUnchecked(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	metas, err := s.SnapshotStore.List()
	if err != nil {
		return nil, nil, err
	}
	for _, meta := range metas {
		if meta.ID != id {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.dir, id, "state.bin"))
		if err != nil {
			return nil, nil, err
		}
		body := bytes.TrimSuffix(data, []byte("\n"))
		if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
			sum := sha256.Sum256(data[:i+1])
			data = append(data[:i+1:i+1], fmt.Sprintf("{\"sha256\":%q}\n", hex.EncodeToString(sum[:]))...)
		}
		return s.stream(meta, io.NopCloser(bytes.NewReader(data)))
	}
	return nil, nil, fmt.Errorf("cluster: snapshot %s not found", id)
}
