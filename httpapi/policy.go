package httpapi

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/fsm"
)

// policyBody is the body of PUT /v1/policies/{name}.
type policyBody struct {
	fsm.Policy
	// ExpectVersion makes the put a compare-and-set.
	ExpectVersion uint64 `json:"expect_version"`
}

// policyResponse is the body of a policy call.
type policyResponse struct {
	Status fsm.Status  `json:"status,omitempty"`
	Policy *fsm.Policy `json:"policy"`
}

// policyList is the body of GET /v1/policies.
type policyList struct {
	Policies []*fsm.Policy `json:"policies"`
}

// listPolicies serves GET /v1/policies.
func (s *Server) listPolicies(c echo.Context) error {
	cons, p := consistencyOf(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	ps, err := s.svc.Policies(c.Request().Context(), cons)
	if err != nil {
		return s.fail(c, err, nil)
	}
	return writeJSON(c, http.StatusOK, policyList{Policies: ps})
}

// getPolicy serves GET /v1/policies/{name}.
func (s *Server) getPolicy(c echo.Context) error {
	cons, p := consistencyOf(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	pol, err := s.svc.Policy(c.Request().Context(), c.Param("name"), cons)
	if err != nil {
		return s.fail(c, err, nil)
	}
	return writeJSON(c, http.StatusOK, policyResponse{Policy: pol})
}

// putPolicy serves PUT /v1/policies/{name}.
func (s *Server) putPolicy(c echo.Context) error {
	var req policyBody
	body, p := s.decode(c, &req)
	if p != nil {
		return s.writeProblem(c, p)
	}
	name := c.Param("name")
	switch {
	case req.Name == "":
		req.Name = name
	case req.Name != name:
		p := newProblem(CodeBadRequest, fmt.Sprintf("name %q in the body differs from %q in the path", req.Name, name))
		p.Field = "name"
		return s.writeProblem(c, p)
	}
	r, err := s.svc.PutPolicy(c.Request().Context(), req.Policy, req.ExpectVersion, s.actorOf(c, ""))
	if err != nil {
		return s.fail(c, err, body)
	}
	return s.answerPolicy(c, r)
}

// deletePolicy serves DELETE /v1/policies/{name}.
func (s *Server) deletePolicy(c echo.Context) error {
	r, err := s.svc.DeletePolicy(c.Request().Context(), c.Param("name"), s.actorOf(c, ""))
	if err != nil {
		return s.fail(c, err, nil)
	}
	return s.answerPolicy(c, r)
}

func (s *Server) answerPolicy(c echo.Context, r *fsm.Result) error {
	if r.Status == fsm.StatusUnknownPolicy {
		return s.writeProblem(c, newProblem(CodePolicyNotFound, r.Detail))
	}
	if r.Status != fsm.StatusOK {
		return s.writeProblem(c, refusalProblem(r, s.now()))
	}
	return writeJSON(c, http.StatusOK, policyResponse{Status: r.Status, Policy: r.Policy})
}
