package httpapi

import (
	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/ledger"
)

// decide serves POST /v1/intents/{key}/approve and /reject. With auth on
// the actor is the key's name, so the key that claimed an intent is
// refused its own approval (403 self_approval) unless the policy allows it.
func (s *Server) decide(approve bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		key, p := keyParam(c)
		if p != nil {
			return s.writeProblem(c, p)
		}
		var req decisionBody
		body, p := s.decode(c, &req)
		if p != nil {
			return s.writeProblem(c, p)
		}
		r, err := s.svc.Decide(c.Request().Context(), ledger.Decision{
			Namespace: s.namespaceOf(c), Key: key, Actor: s.actorOf(c, req.Actor), Reason: req.Reason, Approve: approve,
			Fingerprint: req.Fingerprint,
		})
		if err != nil {
			return s.fail(c, err, body)
		}
		return s.answer(c, r)
	}
}
