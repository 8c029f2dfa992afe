package client

import (
	"context"
	"fmt"
	"net/http"
)

// DefaultAuditRetention is how many events each namespace's audit log
// keeps while Settings.AuditRetention is 0.
const DefaultAuditRetention = 100_000

// MaxAuditRetention is the largest Settings.AuditRetention the cluster
// accepts.
const MaxAuditRetention = 10_000_000

// Settings are the cluster-wide settings.
type Settings struct {
	// AuditRetention is how many events each namespace's audit log keeps
	// (0: DefaultAuditRetention).
	AuditRetention int `json:"audit_retention"`
}

// Settings reads the cluster-wide settings.
func (c *Client) Settings(ctx context.Context) (*Settings, error) {
	var out Settings
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/settings"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutSettings replaces the cluster-wide settings (admin) and returns them
// as stored. A value out of range is refused before anything is sent,
// with an error wrapping ErrBadRequest. Repeating it is harmless, so it is
// retried like any write.
func (c *Client) PutSettings(ctx context.Context, s Settings) (*Settings, error) {
	if s.AuditRetention < 0 || s.AuditRetention > MaxAuditRetention {
		return nil, fmt.Errorf("client: put settings: %w: audit retention %d is outside 0..%d", ErrBadRequest, s.AuditRetention, MaxAuditRetention)
	}
	var out Settings
	if _, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/settings", body: s}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
