package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// AuditHead describes a namespace's hash-chained audit log.
type AuditHead struct {
	Namespace string `json:"namespace"`
	FirstSeq  uint64 `json:"first_seq"`
	Anchor    string `json:"anchor"`
	LastSeq   uint64 `json:"last_seq"`
	LastHash  string `json:"last_hash"`
	Dropped   uint64 `json:"dropped"`
}

// AuditRecord is one event of the audit log: Event is the exact JSON that
// was hashed.
type AuditRecord struct {
	Seq   uint64          `json:"seq"`
	Hash  string          `json:"hash"`
	Event json.RawMessage `json:"event"`
}

// AuditLogPage is one page of the audit log.
type AuditLogPage struct {
	Head   AuditHead     `json:"head"`
	Events []AuditRecord `json:"events"`
	// Next is the since of the next page; 0 at the end.
	Next uint64 `json:"next"`
}

// AuditLog reads a page of the caller's namespace's audit log from seq
// since on (namespace, for an admin, reads another one; "" is the
// caller's).
func (c *Client) AuditLog(ctx context.Context, namespace string, since uint64, limit int) (*AuditLogPage, error) {
	q := url.Values{"since": {strconv.FormatUint(since, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	var out AuditLogPage
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/audit", query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
