package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/clusterview"
	"github.com/intentledger/intentd/fsm"
)

// Admin answer codes (docs/problems.md).
const (
	// CodeBadSnapshot: the uploaded snapshot failed its checks (format,
	// order, SHA-256 trailer); nothing was restored.
	CodeBadSnapshot = "bad_snapshot"
	// CodeNotEmpty: a restore without force into a ledger holding intents.
	CodeNotEmpty = "not_empty"
	// CodeNotConfigured: the node serves no snapshots.
	CodeNotConfigured = "not_configured"
)

// Snapshotter takes and restores whole-ledger snapshots for the admin
// endpoints (backup and restore); cluster.Node implements it (node
// asserts it at compile time).
type Snapshotter interface {
	// TakeSnapshot takes a consistent snapshot; a follower answers
	// *ledger.NotLeaderError.
	TakeSnapshot(ctx context.Context) (clusterview.Snapshot, error)
	// Restore replaces the whole ledger with a snapshot (leader only);
	// clusterview.ErrNotEmpty unless force when the ledger holds intents,
	// an error wrapping fsm.ErrBadSnapshot when the snapshot fails its
	// checks.
	Restore(ctx context.Context, data []byte, force bool) (clusterview.SnapshotInfo, error)
}

// DefaultMaxSnapshotBytes bounds an uploaded snapshot (it is held in
// memory while it is checked and handed to Raft).
const DefaultMaxSnapshotBytes = 1 << 30

// Snapshot headers sent before the body of GET /v1/admin/snapshot.
const (
	HeaderSnapshotIndex   = "X-Intentd-Snapshot-Index"
	HeaderSnapshotIntents = "X-Intentd-Snapshot-Intents"
)

// ContentTypeSnapshot is the media type of a ledger snapshot: binary
// (fsm's snapshot encoding, with a SHA-256 trailer).
const ContentTypeSnapshot = "application/octet-stream"

// snapshotSave serves GET /v1/admin/snapshot: it streams a snapshot (a
// backup) taken linearizably on the leader (a follower forwards). The
// body carries its own SHA-256 trailer, so a cut stream is detected by
// whoever restores or verifies it.
func (s *Server) snapshotSave(c echo.Context) error {
	if s.snaps == nil {
		return s.writeProblem(c, newProblem(CodeNotConfigured, "this node serves no snapshots"))
	}
	snap, err := s.snaps.TakeSnapshot(c.Request().Context())
	if err != nil {
		return s.fail(c, err, nil)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, ContentTypeSnapshot)
	h.Set(HeaderSnapshotIndex, strconv.FormatUint(snap.Index(), 10))
	h.Set(HeaderSnapshotIntents, strconv.Itoa(snap.Intents()))
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="intentd-%d.snapshot"`, snap.Index()))
	c.Response().WriteHeader(http.StatusOK)
	info, err := snap.Write(newTransfer(c).writer(c.Response()))
	if err != nil {
		// The status line is out: all that is left is to cut the body.
		s.log.Warn("httpapi: streaming a snapshot", "err", err)
		return nil
	}
	s.log.Info("snapshot saved by a client", "index", info.Index, "intents", info.Intents, "bytes", info.Bytes,
		"digest", info.Digest)
	return nil
}

// snapshotRestore serves POST /v1/admin/snapshot/restore[?force=true]: it
// replaces the ledger with the uploaded snapshot (leader; a follower
// forwards). ?force=true allows replacing a non-empty ledger. On a node
// with a key-encryption key, a snapshot holding a plaintext signing seed
// is refused (bad_snapshot, ledger.ErrPlaintextSeedRestore).
func (s *Server) snapshotRestore(c echo.Context) error {
	if s.snaps == nil {
		return s.writeProblem(c, newProblem(CodeNotConfigured, "this node serves no snapshots"))
	}
	force := false
	if v := c.QueryParam("force"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s.writeProblem(c, newProblem(CodeBadRequest, "force: want true or false"))
		}
		force = b
	}
	limit := s.maxSnapshot
	r := c.Request()
	if r.ContentLength > limit {
		return s.writeProblem(c, newProblem(CodeTooLarge, fmt.Sprintf("the snapshot of %d bytes is over the limit of %d bytes", r.ContentLength, limit)))
	}
	// The upload may take longer than the server's ReadTimeout allows a
	// whole request: it has that long for each chunk instead.
	t := newTransfer(c)
	data, err := io.ReadAll(t.reader(io.LimitReader(r.Body, limit+1)))
	if err != nil {
		return s.writeProblem(c, newProblem(CodeBadRequest, "reading the snapshot: "+err.Error()))
	}
	if int64(len(data)) > limit {
		return s.writeProblem(c, newProblem(CodeTooLarge, fmt.Sprintf("the snapshot is over the limit of %d bytes", limit)))
	}
	t.working()
	// A node with a key-encryption key restores no plaintext signing
	// seed: it would sit in the clear in every later snapshot and backup.
	// Refused before the snapshot is handed to Raft, so nothing changes.
	if err := s.svc.CheckRestoreKeys(bytes.NewReader(data)); err != nil {
		return s.writeProblem(c, newProblem(CodeBadSnapshot, err.Error()))
	}
	info, err := s.snaps.Restore(r.Context(), data, force)
	t.extendWrite()
	switch {
	case errors.Is(err, fsm.ErrBadSnapshot):
		return s.writeProblem(c, newProblem(CodeBadSnapshot, err.Error()))
	case errors.Is(err, clusterview.ErrNotEmpty):
		return s.writeProblem(c, newProblem(CodeNotEmpty, err.Error()))
	case err != nil:
		return s.fail(c, err, data)
	}
	return writeJSON(c, http.StatusOK, map[string]any{"status": "restored", "snapshot": info})
}
