package client

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
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

// The headers a snapshot download announces its contents with.
const (
	headerSnapshotIndex   = "X-Intentd-Snapshot-Index"
	headerSnapshotIntents = "X-Intentd-Snapshot-Intents"
)

// snapshotMediaTypes are the media types a snapshot download may come as
// (a snapshot is binary); the first is also what an upload is sent as.
var snapshotMediaTypes = []string{"application/octet-stream"}

// SaveSnapshot streams a consistent snapshot of the whole ledger (GET
// /v1/admin/snapshot, taken linearizably on the leader) into w and returns
// what its headers announce (Index, Intents) and its size (Bytes). The
// call is routed and retried like any read until a node starts answering
// with a snapshot; from then on a failure is returned as it is, and w
// holds a cut snapshot: write to a temporary file and verify it (the
// snapshot carries a SHA-256 trailer) before keeping it. An answer that
// is not a snapshot (another media type than application/octet-stream:
// a proxy's page, say) is refused before
// anything is written to w, with an error wrapping ErrBadSnapshot.
func (c *Client) SaveSnapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	sink := &snapshotSink{w: w}
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/admin/snapshot",
		accept: strings.Join(snapshotMediaTypes, ", ") + ", application/problem+json"}, sink)
	return sink.info, err
}

// snapshotSink streams a snapshot answer into w.
type snapshotSink struct {
	w    io.Writer
	info SnapshotInfo
}

func (s *snapshotSink) stream(resp *http.Response) error {
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !slices.Contains(snapshotMediaTypes, mt) {
			return fmt.Errorf("client: snapshot: %w: the answer is %q, not a snapshot", ErrBadSnapshot, ct)
		}
	}
	s.info.Index, _ = strconv.ParseUint(resp.Header.Get(headerSnapshotIndex), 10, 64)
	s.info.Intents, _ = strconv.Atoi(resp.Header.Get(headerSnapshotIntents))
	n, err := io.Copy(s.w, resp.Body)
	s.info.Bytes = n
	if err != nil {
		return fmt.Errorf("client: snapshot from %s cut after %d bytes: %w", resp.Request.URL.Host, n, err)
	}
	return nil
}

// RestoreSnapshot replaces the whole ledger of the cluster with a snapshot
// written by SaveSnapshot (POST /v1/admin/snapshot/restore). The cluster
// refuses a ledger that holds intents (ErrNotEmpty, 409) unless force is
// set, and a snapshot that fails its checks (ErrBadSnapshot, 422). It is
// sent once, to the leader when known (a follower forwards): a restore is
// not retried by the client, because a repeat could replace writes made
// after the first one.
func (c *Client) RestoreSnapshot(ctx context.Context, snapshot []byte, force bool) (SnapshotInfo, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	var out struct {
		Status   string       `json:"status"`
		Snapshot SnapshotInfo `json:"snapshot"`
	}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/admin/snapshot/restore", query: q,
		raw: snapshot, contentType: snapshotMediaTypes[0], single: true}, &out); err != nil {
		return SnapshotInfo{}, err
	}
	return out.Snapshot, nil
}
