package httpapi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/token"
)

// Request bodies of the gate's calls.

type policyBody struct {
	fsm.Policy
	// ExpectVersion makes the put a compare-and-set.
	ExpectVersion uint64 `json:"expect_version"`
}

type settingsBody struct {
	AuditRetention int `json:"audit_retention"`
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

// auditPageView is the body of GET /v1/audit.
type auditPageView struct {
	Head   fsm.ChainHead     `json:"head"`
	Events []*fsm.ChainEvent `json:"events"`
	// Next is the since to ask for the next page; 0 at the end.
	Next uint64 `json:"next"`
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

// auditLog serves GET /v1/audit?since=&limit=&format=json|jsonl: a page
// of the caller's namespace's hash-chained audit log. format=jsonl streams
// every event from since on as JSON lines (an export), with the head
// first.
func (s *Server) auditLog(c echo.Context) error {
	cons, p := consistencyOf(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	since, p := uintParam(c, "since")
	if p != nil {
		return s.writeProblem(c, p)
	}
	limit, p := uintParam(c, "limit")
	if p != nil {
		return s.writeProblem(c, p)
	}
	ns := s.namespaceOf(c)
	if q := c.QueryParam("namespace"); q != "" {
		if !s.isAdmin(c) && q != ns {
			return s.writeProblem(c, newProblem(CodeForbidden, "only an admin reads another namespace's audit log"))
		}
		ns = q
	}
	switch f := c.QueryParam("format"); f {
	case "", "json":
		page, err := s.svc.Audit(c.Request().Context(), ns, since, int(min(limit, ledger.MaxAuditPage)), cons)
		if err != nil {
			return s.fail(c, err, nil)
		}
		if page.Events == nil {
			page.Events = []*fsm.ChainEvent{}
		}
		return writeJSON(c, http.StatusOK, auditPageView{Head: page.Head, Events: page.Events, Next: page.Next})
	case "jsonl":
		return s.exportAudit(c, ns, since, cons)
	default:
		return s.writeProblem(c, newProblem(CodeBadRequest, fmt.Sprintf("format: must be json or jsonl, not %q", f)))
	}
}

// exportAudit streams the audit log from since on as JSON lines: the head,
// then one event per line, page by page.
func (s *Server) exportAudit(c echo.Context, ns string, since uint64, cons ledger.Consistency) error {
	ctx := c.Request().Context()
	page, err := s.svc.Audit(ctx, ns, since, ledger.MaxAuditPage, cons)
	if err != nil {
		return s.fail(c, err, nil)
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/jsonl")
	c.Response().WriteHeader(http.StatusOK)
	w := bufio.NewWriter(newTransfer(c).writer(c.Response()))
	writeLine := func(v any) error {
		data, err := jsonLine(v)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	if err := writeLine(map[string]any{"head": page.Head}); err != nil {
		return nil
	}
	for {
		for _, e := range page.Events {
			if writeLine(e) != nil {
				return nil
			}
		}
		if page.Next == 0 {
			break
		}
		if page, err = s.svc.Audit(ctx, ns, page.Next, ledger.MaxAuditPage, ledger.Stale); err != nil {
			// The status is out; a verifier sees the export end early.
			s.log.Warn("httpapi: audit export cut short", "namespace", ns, "err", err)
			break
		}
	}
	return w.Flush()
}

// uintParam reads an optional non-negative integer query parameter.
func uintParam(c echo.Context, name string) (uint64, *problem) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		p := newProblem(CodeBadRequest, fmt.Sprintf("%s: %q is not a non-negative integer", name, v))
		p.Field = name
		return 0, p
	}
	return n, nil
}

// waitParams reads ?wait= and ?after_version= of a long-poll.
func waitParams(c echo.Context) (wait time.Duration, after uint64, ok bool, p *problem) {
	w := c.QueryParam("wait")
	if w == "" {
		return 0, 0, false, nil
	}
	wait, err := time.ParseDuration(w)
	if err != nil || wait < 0 || wait > ledger.MaxWait {
		p := newProblem(CodeBadRequest, fmt.Sprintf("wait: %q must be a duration between 0s and %v, e.g. 30s", w, ledger.MaxWait))
		p.Field = "wait"
		return 0, 0, false, p
	}
	after, p = uintParam(c, "after_version")
	return wait, after, p == nil, p
}

// jsonLine encodes v as one line of JSON, without HTML escaping.
func jsonLine(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

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
