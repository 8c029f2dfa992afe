package client_test

import (
	"context"
	"encoding/json"
	"errors"
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
