package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/token"
)

// Codes of a verification refused because of the token's tool (see codes
// in problem.go). Neither spends the token.
const (
	// CodeTokenWrongTool (422): the verify request names a tool the
	// execution token was not granted for.
	CodeTokenWrongTool = "token_wrong_tool"
	// CodeTokenToolForbidden (403): the verifying API key is bound to
	// tools (its tools) that do not include the token's.
	CodeTokenToolForbidden = "token_tool_forbidden"
	// CodeSigningKeyInUse (409): a key rotation would drop the oldest
	// signing key while tokens it signed may still be live.
	CodeSigningKeyInUse = "signing_key_in_use"
)

// rotateBody is the body of POST /v1/keys/rotate (optional: no body is
// {}).
type rotateBody struct {
	// Force drops the oldest key even when its tokens may still be live.
	Force bool `json:"force"`
}

// verifyBody is the body of POST /v1/tokens/verify.
type verifyBody struct {
	ExecutionToken string          `json:"execution_token"`
	Payload        json.RawMessage `json:"payload"`
	Fingerprint    string          `json:"fingerprint"`
	// Tool is the tool the verifier is about to run (optional): a token
	// for another tool is refused, unspent.
	Tool string `json:"tool"`
}

// verifyResponse is the success body of POST /v1/tokens/verify.
type verifyResponse struct {
	Status fsm.Status   `json:"status"`
	Valid  bool         `json:"valid"`
	Claims token.Claims `json:"claims"`
	Intent *intentView  `json:"intent"`
}

// jwks serves GET /v1/keys: the public keys of execution tokens.
func (s *Server) jwks(c echo.Context) error {
	data, err := s.svc.JWKS(c.Request().Context(), ledger.Stale)
	if err != nil {
		return s.fail(c, err, nil)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "max-age=60")
	return c.Blob(http.StatusOK, "application/jwk-set+json", data)
}

// rotateKey serves POST /v1/keys/rotate: 409 signing_key_in_use when the
// new key would drop one whose tokens may still be live, unless the body
// says {"force": true}. A follower forwards it (with its body) to the
// leader, which checks the keys it holds.
func (s *Server) rotateKey(c echo.Context) error {
	body, p := s.readBody(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	var req rotateBody
	if len(bytes.TrimSpace(body)) > 0 {
		if p := decodeBody(body, &req); p != nil {
			return s.writeProblem(c, p)
		}
	}
	id, err := s.svc.RotateKeyWith(c.Request().Context(), ledger.RotateOptions{Force: req.Force})
	if err != nil {
		return s.fail(c, err, body)
	}
	return writeJSON(c, http.StatusOK, map[string]string{"status": "ok", "kid": id})
}

// verifyToken serves POST /v1/tokens/verify: the tool side's single-use
// check of an execution token. A token for a tool the caller's key is not
// bound to (403 token_tool_forbidden), or for another tool than the body
// names (422 token_wrong_tool), is refused before the ledger proposes
// anything, so it stays unspent for its own tool.
func (s *Server) verifyToken(c echo.Context) error {
	var req verifyBody
	body, p := s.decode(c, &req)
	if p != nil {
		return s.writeProblem(c, p)
	}
	vr := ledger.VerifyRequest{
		Namespace: s.namespaceOf(c), Token: req.ExecutionToken, Payload: req.Payload, Fingerprint: req.Fingerprint,
		Tool: req.Tool, Actor: s.actorOf(c, ""),
	}
	if p, ok := auth.PrincipalFrom(c); ok && len(p.Tools) > 0 {
		// A tool key bound to its tools spends no other tool's token.
		vr.MayVerify, vr.CallerTools = p.MayVerify, p.Tools
	}
	r, claims, err := s.svc.VerifyToken(c.Request().Context(), vr)
	if code := tokenRefusalCode(err); code != "" {
		// A forged or foreign token, or one for another tool, never
		// reaches the log (the first's claims cannot be trusted; the
		// second must stay unspent for its tool): it is counted and
		// logged here.
		s.metrics.tokenVerifies.WithLabelValues(code).Inc()
		s.log.Warn("httpapi: execution token refused", "namespace", s.namespaceOf(c), "actor", s.actorOf(c, ""),
			"token_tool", claims.Tool, "tool", req.Tool, "remote", c.Request().RemoteAddr, "err", err)
		if code != CodeTokenInvalid {
			return s.writeProblem(c, newProblem(code, err.Error()))
		}
	}
	if err != nil {
		return s.fail(c, err, body)
	}
	s.metrics.tokenVerifies.WithLabelValues(string(r.Status)).Inc()
	if r.Status != fsm.StatusOK {
		return s.writeProblem(c, refusalProblem(r, s.now()))
	}
	return writeJSON(c, http.StatusOK, verifyResponse{Status: r.Status, Valid: true, Claims: claims, Intent: newIntentView(r.Intent)})
}

// tokenRefusalCode is the problem code of a verification the service
// refused without proposing it, or "" for any other outcome.
func tokenRefusalCode(err error) string {
	switch {
	case errors.Is(err, ledger.ErrTokenInvalid):
		return CodeTokenInvalid
	case errors.Is(err, ledger.ErrTokenWrongTool):
		return CodeTokenWrongTool
	case errors.Is(err, ledger.ErrTokenToolForbidden):
		return CodeTokenToolForbidden
	}
	return ""
}
