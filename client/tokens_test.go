package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/intentledger/intentd/client"
)

func TestVerifyToken(t *testing.T) {
	_, c, g := grantedNode(t)
	ctx := context.Background()

	// Bound to another payload: refused, and not spent.
	if _, err := c.VerifyToken(ctx, g.ExecutionToken, json.RawMessage(`{"order":"ord_1","amount":999}`)); !errors.Is(err, client.ErrTokenInvalid) {
		t.Errorf("verify with another payload: %v, want ErrTokenInvalid", err)
	}
	v, err := c.VerifyToken(ctx, g.ExecutionToken, map[string]any{"amount": 100, "order": "ord_1"})
	if err != nil || !v.Valid || v.Claims.Key != "refund:ord_1" || v.Claims.FencingToken != g.FencingToken ||
		v.Claims.Owner != "agent-1" || v.Intent == nil || v.Intent.Key != "refund:ord_1" {
		t.Fatalf("verify = %+v, %v", v, err)
	}
	// Spent: a second verification fails.
	if _, err := c.VerifyToken(ctx, g.ExecutionToken, nil); !errors.Is(err, client.ErrTokenUsed) {
		t.Errorf("second verify: %v, want ErrTokenUsed", err)
	}
	if _, err := c.VerifyToken(ctx, g.ExecutionToken, []byte(`{nope`)); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("verify with a payload that is not JSON: %v, want ErrBadRequest", err)
	}
}

// TestVerifyTokenForTool: the claims name the token's tool; a
// verification that names another tool fails with ErrTokenWrongTool (and
// ErrTokenInvalid) and does not spend the token, which the right tool then
// spends.
func TestVerifyTokenForTool(t *testing.T) {
	_, c, g := grantedNode(t)
	ctx := context.Background()

	_, err := c.VerifyToken(ctx, g.ExecutionToken, nil, client.VerifyForTool("email.send"))
	var p *client.Problem
	if !errors.Is(err, client.ErrTokenWrongTool) || !errors.Is(err, client.ErrTokenInvalid) || errors.Is(err, client.ErrUnauthorized) ||
		!errors.As(err, &p) || p.Code != "token_wrong_tool" || p.Status != 422 {
		t.Fatalf("verify for another tool: %v, want ErrTokenWrongTool (422 token_wrong_tool)", err)
	}
	if !strings.Contains(err.Error(), `"payments.refund"`) {
		t.Errorf("error %q does not name the token's tool", err)
	}
	v, err := c.VerifyToken(ctx, g.ExecutionToken, map[string]any{"amount": 100, "order": "ord_1"}, client.VerifyForTool("payments.refund"))
	if err != nil || !v.Valid || v.Claims.Tool != "payments.refund" || v.Claims.Key != "refund:ord_1" {
		t.Fatalf("verify for the token's tool after the refusal = %+v, %v", v, err)
	}
	if _, err := c.VerifyToken(ctx, g.ExecutionToken, nil, client.VerifyForTool("payments.refund")); !errors.Is(err, client.ErrTokenUsed) ||
		errors.Is(err, client.ErrTokenWrongTool) {
		t.Errorf("second verify: %v, want ErrTokenUsed", err)
	}
}

// TestVerifyTokenToolErrors: how each answer about the token's tool maps
// to the sentinels (a key bound to other tools is ErrTokenToolForbidden
// and ErrUnauthorized); other refusals are left alone.
func TestVerifyTokenToolErrors(t *testing.T) {
	for _, tc := range []struct {
		status                          int
		code                            string
		wrongTool, toolForbidden        bool
		invalid, unauthorized, usedOnce bool
	}{
		{status: 422, code: "token_wrong_tool", wrongTool: true, invalid: true},
		{status: 403, code: "token_tool_forbidden", toolForbidden: true, unauthorized: true},
		{status: 403, code: "forbidden", unauthorized: true},
		{status: 422, code: "token_invalid", invalid: true},
		{status: 409, code: "token_used", usedOnce: true},
	} {
		t.Run(tc.code, func(t *testing.T) {
			var hits atomic.Int64
			srv := fixed(t, tc.status, tc.code, &hits)
			c := newClient(t, []string{srv.URL}, client.WithRetries(0), client.WithDiscovery(false))
			_, err := c.VerifyToken(context.Background(), "gex_x", nil, client.VerifyForTool("payments.refund"))
			var p *client.Problem
			if !errors.As(err, &p) || p.Code != tc.code || p.Status != tc.status {
				t.Fatalf("err = %v, want the %d %s problem", err, tc.status, tc.code)
			}
			for name, c := range map[string]struct {
				target error
				want   bool
			}{
				"ErrTokenWrongTool":     {client.ErrTokenWrongTool, tc.wrongTool},
				"ErrTokenToolForbidden": {client.ErrTokenToolForbidden, tc.toolForbidden},
				"ErrTokenInvalid":       {client.ErrTokenInvalid, tc.invalid},
				"ErrUnauthorized":       {client.ErrUnauthorized, tc.unauthorized},
				"ErrTokenUsed":          {client.ErrTokenUsed, tc.usedOnce},
			} {
				if errors.Is(err, c.target) != c.want {
					t.Errorf("errors.Is(%v, %s) = %v, want %v", err, name, !c.want, c.want)
				}
			}
			if hits.Load() != 1 {
				t.Errorf("%d requests, want 1 (a definite answer is not retried)", hits.Load())
			}
		})
	}
}
