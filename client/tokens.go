package client

import (
	"context"
	"fmt"
	"net/http"
)

// TokenClaims are what an execution token binds.
type TokenClaims struct {
	Namespace    string `json:"ns"`
	Key          string `json:"key"`
	Fingerprint  string `json:"fp"`
	FencingToken uint64 `json:"fence"`
	Owner        string `json:"owner"`
	IssuedAt     int64  `json:"iat"`
	Expires      int64  `json:"exp"`
}

// TokenVerification is the ledger's word on an execution token.
type TokenVerification struct {
	Status string      `json:"status"`
	Valid  bool        `json:"valid"`
	Claims TokenClaims `json:"claims"`
	Intent *Intent     `json:"intent"`
}

// VerifyToken asks the ledger whether the tool may act on an execution
// token (role tool): the signature, the expiry, the binding to payload
// (nil: not checked) and to the current grant, and single use. A valid
// answer spends the token; any later verification fails with ErrTokenUsed.
// Other refusals: ErrTokenExpired, ErrTokenInvalid, ErrFenced, ErrInDoubt.
// An unknown outcome (ErrOutcomeUnknown) may have spent the token: do not
// act on it; the agent's retry of its claim brings a verdict.
func (c *Client) VerifyToken(ctx context.Context, executionToken string, payload any) (*TokenVerification, error) {
	body := map[string]any{"execution_token": executionToken}
	if payload != nil {
		raw, err := encodeJSON(payload)
		if err != nil {
			return nil, fmt.Errorf("client: verify token: %w: payload: %w", ErrBadRequest, err)
		}
		body["payload"] = raw
	}
	var out TokenVerification
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/tokens/verify", body: body}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}
