package ledger

import (
	"context"
	"errors"
	"io"
)

// ErrNotEmpty refuses a restore into a ledger that already holds intents
// (unless forced): a restore replaces the whole state, and on a ledger in
// use it would undo acknowledged writes.
var ErrNotEmpty = errors.New("the ledger is not empty; restore into a fresh cluster (or force it)")

// SnapshotInfo describes a ledger snapshot (a backup).
type SnapshotInfo struct {
	// Index is the log index of the last command the snapshot reflects.
	Index uint64 `json:"index"`
	// Intents is the number of intents in it.
	Intents int `json:"intents"`
	// Digest is the hex SHA-256 of the snapshot's bytes, which is also the
	// replica digest of a ledger holding exactly that state.
	Digest string `json:"digest"`
	// Bytes is the snapshot's size.
	Bytes int64 `json:"bytes"`
}

// Snapshot is a consistent, immutable view of the ledger, to be written
// out once.
type Snapshot interface {
	// Index is the log index of the last command the snapshot reflects.
	Index() uint64
	// Intents is the number of intents in it.
	Intents() int
	// Write writes the snapshot's deterministic encoding
	// (fsm.Ledger.WriteSnapshot, with a SHA-256 trailer) to w.
	Write(w io.Writer) (SnapshotInfo, error)
}

// Snapshotter takes and restores whole-ledger snapshots (backups). The
// cluster package implements it.
type Snapshotter interface {
	// TakeSnapshot takes a consistent snapshot; a follower answers
	// *NotLeaderError.
	TakeSnapshot(ctx context.Context) (Snapshot, error)
	// Restore replaces the whole ledger with a snapshot (leader only);
	// ErrNotEmpty unless force when the ledger holds intents.
	Restore(ctx context.Context, data []byte, force bool) (SnapshotInfo, error)
}
