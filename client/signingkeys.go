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
// (admin) and returns its id.
func (c *Client) RotateKey(ctx context.Context) (string, error) {
	var out struct {
		KID string `json:"kid"`
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/keys/rotate", body: map[string]any{}}, &out)
	return out.KID, err
}
