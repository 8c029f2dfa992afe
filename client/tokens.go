package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Refusals of a verification because of the token's tool. The ledger
// wrote nothing: the token was not spent, and the tool it is for can still
// verify it. Do not act on it.
var (
	// ErrTokenWrongTool: the verification named the tool about to run
	// (VerifyForTool) and the token was granted for another one (422
	// token_wrong_tool). It also matches ErrTokenInvalid.
	ErrTokenWrongTool = errors.New("execution token is for another tool")
	// ErrTokenToolForbidden: the client's API key is bound to tools (its
	// tools in the key configuration) that do not include the token's
	// (403 token_tool_forbidden). It also matches ErrUnauthorized.
	ErrTokenToolForbidden = errors.New("the API key may not verify execution tokens of this tool")
)

// Problem codes of a verification refused because of the token's tool.
const (
	codeTokenWrongTool     = "token_wrong_tool"
	codeTokenToolForbidden = "token_tool_forbidden"
)

// TokenClaims are what an execution token binds.
type TokenClaims struct {
	// Tool is the token's audience ("aud"): the tool the intent was
	// granted for, the only one that may act on it. Empty for a token
	// signed before tokens named their tool.
	Tool         string `json:"aud,omitempty"`
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

// VerifyOption adjusts one VerifyToken call.
type VerifyOption func(*verifyOptions)

// verifyOptions are VerifyToken's options.
type verifyOptions struct {
	tool string
}

// VerifyForTool names the tool about to act on the token: the ledger
// refuses, without spending it, a token granted for another tool
// (ErrTokenWrongTool). Give it in every tool, or bind the tool's API key
// to its tools: an agent could otherwise hand one tool a token granted
// for another. Empty: not checked.
func VerifyForTool(tool string) VerifyOption {
	return func(o *verifyOptions) { o.tool = tool }
}

// VerifyToken asks the ledger whether the tool may act on an execution
// token (role tool): the signature, the expiry, the token's tool (see
// VerifyForTool, and the tools the API key is bound to), the binding to
// payload (nil: not checked) and to the current grant, and single use. A
// valid answer spends the token; any later verification fails with
// ErrTokenUsed. Other refusals: ErrTokenWrongTool and
// ErrTokenToolForbidden (the token is not spent), ErrTokenExpired, ErrTokenInvalid, ErrFenced, ErrInDoubt. An unknown
// outcome (ErrOutcomeUnknown) may have spent the token: do not act on it;
// the agent's retry of its claim brings a verdict.
func (c *Client) VerifyToken(ctx context.Context, executionToken string, payload any, opts ...VerifyOption) (*TokenVerification, error) {
	var o verifyOptions
	for _, opt := range opts {
		opt(&o)
	}
	body := map[string]any{"execution_token": executionToken}
	if payload != nil {
		raw, err := encodeJSON(payload)
		if err != nil {
			return nil, fmt.Errorf("client: verify token: %w: payload: %w", ErrBadRequest, err)
		}
		body["payload"] = raw
	}
	if o.tool != "" {
		body["tool"] = o.tool
	}
	var out TokenVerification
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/tokens/verify", body: body}, &out)
	if err != nil {
		return nil, tokenToolRefusal(err)
	}
	return &out, nil
}

// tokenToolError is a verification refused because of the token's tool:
// the answer's error, which also matches the sentinels in is.
type tokenToolError struct {
	err error
	is  [2]error
}

func (e *tokenToolError) Error() string { return e.err.Error() }

// Unwrap makes errors.Is and errors.As see the answer (its *Problem) and
// the sentinels.
func (e *tokenToolError) Unwrap() []error { return []error{e.err, e.is[0], e.is[1]} }

// tokenToolRefusal makes err, when the ledger refused the token for its
// tool, match ErrTokenWrongTool or ErrTokenToolForbidden; other errors
// pass unchanged.
func tokenToolRefusal(err error) error {
	var p *Problem
	if !errors.As(err, &p) {
		return err
	}
	switch p.Code {
	case codeTokenWrongTool:
		return &tokenToolError{err: err, is: [2]error{ErrTokenWrongTool, ErrTokenInvalid}}
	case codeTokenToolForbidden:
		return &tokenToolError{err: err, is: [2]error{ErrTokenToolForbidden, ErrUnauthorized}}
	}
	return err
}
