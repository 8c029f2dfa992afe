package client

import (
	"context"
	"encoding/json"
	"net/http"
)

// JWKS returns the cluster's execution-token public keys as a JSON Web
// Key Set, for verifying tokens offline.
func (c *Client) JWKS(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/keys"}, &out)
	return out, err
}

// RotateKey makes the cluster sign new execution tokens with a new key
// (admin) and returns its id. The cluster keeps 4 keys: when the new one
// would drop the oldest while tokens it signed may still be live, it
// refuses with ErrInvalidState (409 signing_key_in_use, whose detail says
// until when); RotateKeyWith with Force drops it anyway.
func (c *Client) RotateKey(ctx context.Context) (string, error) {
	return c.RotateKeyWith(ctx, RotateKeyOptions{})
}

// RotateKeyOptions are the options of RotateKeyWith.
type RotateKeyOptions struct {
	// Force adds the key even when that drops one whose tokens may still
	// be live: they stop verifying at once (for a leaked key).
	Force bool
}

// RotateKeyWith is RotateKey with options.
func (c *Client) RotateKeyWith(ctx context.Context, opts RotateKeyOptions) (string, error) {
	var out struct {
		KID string `json:"kid"`
	}
	body := map[string]any{}
	if opts.Force {
		body["force"] = true
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/keys/rotate", body: body}, &out)
	return out.KID, err
}
