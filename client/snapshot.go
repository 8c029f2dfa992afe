package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// SnapshotInfo describes a ledger snapshot (a backup).
type SnapshotInfo struct {
	// Index is the log index of the last command the snapshot reflects.
	Index uint64 `json:"index"`
	// Intents is the number of intents in it.
	Intents int `json:"intents"`
	// Digest is the hex SHA-256 of the snapshot's bytes (the replica digest
	// of a ledger holding exactly that state).
	Digest string `json:"digest,omitempty"`
	// Bytes is the snapshot's size.
	Bytes int64 `json:"bytes,omitempty"`
}

// SaveSnapshot streams a consistent snapshot of the whole ledger (GET
// /v1/admin/snapshot, taken linearizably on the leader) into w and returns
// what its headers announce (Index, Intents). Nodes are tried in turn
// until one starts answering; once the body streams a failure is returned
// as is, and w holds a cut snapshot: write to a temporary file and verify
// it (the snapshot carries a SHA-256 trailer) before keeping it.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	var lastErr error
	for _, base := range c.currentRoute(ctx).addrs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/admin/snapshot", nil)
		if err != nil {
			return SnapshotInfo{}, fmt.Errorf("client: snapshot: %w", err)
		}
		req.Header.Set("User-Agent", c.userAgent)
		resp, err := c.hc.Do(req)
		if err != nil {
			lastErr = fmt.Errorf("%w: %w", ErrUnavailable, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			p := readProblem(resp)
			resp.Body.Close()
			lastErr = p
			if p.retryable() || p.Status >= 500 {
				continue
			}
			return SnapshotInfo{}, p
		}
		info := SnapshotInfo{}
		info.Index, _ = strconv.ParseUint(resp.Header.Get("X-Intentd-Snapshot-Index"), 10, 64)
		info.Intents, _ = strconv.Atoi(resp.Header.Get("X-Intentd-Snapshot-Intents"))
		n, err := io.Copy(w, resp.Body)
		resp.Body.Close()
		info.Bytes = n
		if err != nil {
			return info, fmt.Errorf("client: snapshot from %s cut after %d bytes: %w", base, n, err)
		}
		return info, nil
	}
	if lastErr == nil {
		lastErr = errors.New("client: snapshot: no node to ask")
	}
	return SnapshotInfo{}, lastErr
}

// RestoreSnapshot replaces the whole ledger of the cluster with a snapshot
// written by SaveSnapshot (POST /v1/admin/snapshot/restore). The cluster
// refuses (ErrNotEmpty-like problem "not_empty", 409) when its ledger holds
// intents unless force is set. It is sent once, to the leader when known
// (a follower forwards): a restore is not retried by the client, because a
// repeat could replace writes made after the first one.
func (c *Client) RestoreSnapshot(ctx context.Context, snapshot []byte, force bool) (SnapshotInfo, error) {
	rt := c.currentRoute(ctx)
	base := rt.addrs[int(rt.preferred.Load())%len(rt.addrs)]
	target := base + "/v1/admin/snapshot/restore"
	if force {
		target += "?force=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(snapshot))
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("client: restore: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.hc.Do(req)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("%w: restore at %s: %w", ErrOutcomeUnknown, base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return SnapshotInfo{}, readProblem(resp)
	}
	var out struct {
		Status   string       `json:"status"`
		Snapshot SnapshotInfo `json:"snapshot"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return SnapshotInfo{}, fmt.Errorf("%w: restore answered 200 but the body is unreadable: %w", ErrOutcomeUnknown, err)
	}
	return out.Snapshot, nil
}
