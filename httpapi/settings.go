package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/fsm"
)

// settingsBody is the body of PUT /v1/settings.
type settingsBody struct {
	AuditRetention int `json:"audit_retention"`
}

// getSettings serves GET /v1/settings.
func (s *Server) getSettings(c echo.Context) error {
	cons, p := consistencyOf(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	st, err := s.svc.Settings(c.Request().Context(), cons)
	if err != nil {
		return s.fail(c, err, nil)
	}
	return writeJSON(c, http.StatusOK, st)
}

// putSettings serves PUT /v1/settings.
func (s *Server) putSettings(c echo.Context) error {
	var req settingsBody
	body, p := s.decode(c, &req)
	if p != nil {
		return s.writeProblem(c, p)
	}
	r, err := s.svc.SetSettings(c.Request().Context(), fsm.Settings{AuditRetention: req.AuditRetention}, s.actorOf(c, ""))
	if err != nil {
		return s.fail(c, err, body)
	}
	if r.Status != fsm.StatusOK {
		return s.writeProblem(c, refusalProblem(r, s.now()))
	}
	return s.getSettings(c)
}
