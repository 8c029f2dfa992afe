package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/token"
)

// verifyBody is the body of POST /v1/tokens/verify.
type verifyBody struct {
	ExecutionToken string          `json:"execution_token"`
	Payload        json.RawMessage `json:"payload"`
	Fingerprint    string          `json:"fingerprint"`
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

// rotateKey serves POST /v1/keys/rotate.
func (s *Server) rotateKey(c echo.Context) error {
	id, err := s.svc.RotateKey(c.Request().Context())
	if err != nil {
		return s.fail(c, err, nil)
	}
	return writeJSON(c, http.StatusOK, map[string]string{"status": "ok", "kid": id})
}

// verifyToken serves POST /v1/tokens/verify: the tool side's single-use
// check of an execution token.
func (s *Server) verifyToken(c echo.Context) error {
	var req verifyBody
	body, p := s.decode(c, &req)
	if p != nil {
		return s.writeProblem(c, p)
	}
	r, claims, err := s.svc.VerifyToken(c.Request().Context(), ledger.VerifyRequest{
		Namespace: s.namespaceOf(c), Token: req.ExecutionToken, Payload: req.Payload, Fingerprint: req.Fingerprint,
		Actor: s.actorOf(c, ""),
	})
	if errors.Is(err, ledger.ErrTokenInvalid) {
		// A forged or foreign token never reaches the log (its claims
		// cannot be trusted): it is counted and logged here.
		s.metrics.tokenVerifies.WithLabelValues(CodeTokenInvalid).Inc()
		s.log.Warn("httpapi: execution token refused", "namespace", s.namespaceOf(c), "actor", s.actorOf(c, ""),
			"remote", c.Request().RemoteAddr, "err", err)
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
