package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// claim serves POST /v1/intents.
func (s *Server) claim(c echo.Context) error {
	var req claimBody
	body, p := s.decode(c, &req)
	if p != nil {
		return s.writeProblem(c, p)
	}
	if h := c.Request().Header.Get(HeaderIdempotencyKey); h != "" {
		switch {
		case req.Key == "":
			req.Key = h
		case req.Key != h:
			p := newProblem(CodeBadRequest, fmt.Sprintf("key %q in the body differs from the %s header %q", req.Key, HeaderIdempotencyKey, h))
			p.Field = "key"
			return s.writeProblem(c, p)
		}
	}
	if req.Key != "" && !forwarded(c.Request()) {
		// The key travels in the body: the per-key limit is checked here.
		if ok, wait := s.takeKey(c, req.Key); !ok {
			return s.limited(c, "key", wait)
		}
	}
	if p := s.reservedKey(c, req.Key); p != nil {
		return s.writeProblem(c, p)
	}
	ctx := c.Request().Context()
	if !claimsForwarded(c.Request()) {
		// A follower may send a claim the leader would refuse (in_flight,
		// in_doubt) to the leader, which answers it without a log entry.
		ctx = ledger.WithForwardableClaim(ctx)
	}
	claimed, err := s.svc.Claim(ctx, ledger.ClaimRequest{
		Namespace: s.namespaceOf(c), Key: req.Key, Tool: req.Tool, Owner: req.Owner, Policy: req.Policy,
		Payload: req.Payload, Lease: leaseOf(req.LeaseMS), Principal: s.callerOf(c).Principal,
	})
	var noToken *ledger.TokenNotIssuedError
	if err != nil && (!errors.As(err, &noToken) || claimed == nil) {
		var q *ledger.QuotaError
		if errors.As(err, &q) {
			code := CodeNamespaceRateLimited
			if errors.Is(err, ledger.ErrNamespaceFull) {
				code = CodeNamespaceFull
			}
			s.metrics.namespaceClaims.WithLabelValues(s.namespaceLabel(q.Namespace), code).Inc()
		}
		if errors.Is(err, ledger.ErrLedgerFull) {
			s.metrics.claims.WithLabelValues(CodeLedgerFull).Inc()
			s.metrics.namespaceClaims.WithLabelValues(s.namespaceLabel(s.namespaceOf(c)), CodeLedgerFull).Inc()
		}
		return s.fail(c, err, body)
	}
	r := claimed.Result
	traceResult(c, r)
	s.metrics.claims.WithLabelValues(string(r.Status)).Inc()
	s.metrics.namespaceClaims.WithLabelValues(s.namespaceLabel(s.namespaceOf(c)), string(r.Status)).Inc()
	if noToken != nil {
		s.log.Error("httpapi: issuing an execution token", "key", r.Intent.Key, "err", noToken.Err)
		detail := "the claim was granted but its execution token could not be issued; " +
			"retry the same claim with the same owner to receive the grant and a token"
		if errors.Is(noToken.Err, ledger.ErrSigningKeySealed) {
			detail = "the claim was granted but this node cannot issue its execution token: " + noToken.Err.Error()
		}
		return s.writeProblem(c, newProblem(CodeUnavailable, detail))
	}
	code, ok := successCode(r)
	if !ok {
		return s.writeProblem(c, refusalProblem(r, s.now()))
	}
	resp := &claimResponse{Status: r.Status, Intent: newIntentView(r.Intent)}
	if r.Local {
		// A duplicate this node answered from its own copy of the ledger.
		c.Response().Header().Set(HeaderLocalAnswer, s.nodeID)
	}
	if r.Status == fsm.StatusGranted && r.Intent != nil {
		// The ledger signed the grant's execution token with the claim.
		resp.FencingToken = r.Intent.FencingToken
		resp.ExecutionToken = claimed.Token
	}
	return writeJSON(c, codes[code].status, resp)
}

// reservedKey refuses a claim of a key under a prefix another API key of
// the namespace reserves (auth.KeyConfig.KeyPrefixes): a front end's keys,
// whose recorded results it replays to its callers, are claimed (and so
// completed) by the front end's key alone.
func (s *Server) reservedKey(c echo.Context, key string) *problem {
	if s.keys == nil || key == "" {
		return nil
	}
	caller := s.callerOf(c).Principal
	ns := s.namespaceOf(c)
	prefix, reserved := s.keys.ReservedPrefix(ns, caller, key)
	if !reserved {
		return nil
	}
	p := newProblem(CodeKeyReserved, fmt.Sprintf(
		"keys starting with %q in namespace %q are reserved to another API key (a front end's key_prefixes); key %q cannot claim them", prefix, ns, caller))
	p.Field = "key"
	return p
}

// complete serves POST /v1/intents/{key}/complete.
func (s *Server) complete(c echo.Context) error {
	key, p := keyParam(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	var req completeBody
	body, p := s.decode(c, &req)
	if p != nil {
		return s.writeProblem(c, p)
	}
	r, err := s.svc.Complete(c.Request().Context(), ledger.CompleteRequest{
		Namespace: s.namespaceOf(c), Key: key, Owner: req.Owner, FencingToken: req.FencingToken,
		Outcome: fsm.Outcome(req.Outcome), Result: req.Result, Caller: s.callerOf(c),
	})
	if err != nil {
		return s.fail(c, err, body)
	}
	return s.answer(c, r)
}

// renew serves POST /v1/intents/{key}/renew.
func (s *Server) renew(c echo.Context) error {
	key, p := keyParam(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	var req renewBody
	body, p := s.decode(c, &req)
	if p != nil {
		return s.writeProblem(c, p)
	}
	r, err := s.svc.Renew(c.Request().Context(), ledger.RenewRequest{
		Namespace: s.namespaceOf(c), Key: key, Owner: req.Owner, FencingToken: req.FencingToken,
		Lease: leaseOf(req.LeaseMS), Caller: s.callerOf(c),
	})
	if err != nil {
		return s.fail(c, err, body)
	}
	return s.answer(c, r)
}

// commit serves POST /v1/intents/{key}/commit.
func (s *Server) commit(c echo.Context) error {
	key, p := keyParam(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	var req commitBody
	body, p := s.decode(c, &req)
	if p != nil {
		return s.writeProblem(c, p)
	}
	r, err := s.svc.Commit(c.Request().Context(), ledger.CommitRequest{
		Namespace: s.namespaceOf(c), Key: key, Owner: req.Owner, Caller: s.callerOf(c),
	})
	if err != nil {
		return s.fail(c, err, body)
	}
	return s.answer(c, r)
}

// resolve serves POST /v1/intents/{key}/resolve.
func (s *Server) resolve(c echo.Context) error {
	key, p := keyParam(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	var req resolveBody
	body, p := s.decode(c, &req)
	if p != nil {
		return s.writeProblem(c, p)
	}
	r, err := s.svc.Resolve(c.Request().Context(), ledger.ResolveRequest{
		Namespace: s.namespaceOf(c), Key: key, Outcome: fsm.Outcome(req.Outcome), Result: req.Result,
		Actor: s.actorOf(c, req.Actor), Reason: req.Reason,
	})
	if err != nil {
		return s.fail(c, err, body)
	}
	return s.answer(c, r)
}

// get serves GET /v1/intents/{key}.
func (s *Server) get(c echo.Context) error {
	in, answered, err := s.readIntent(c)
	if answered {
		return err
	}
	return writeJSON(c, http.StatusOK, newIntentView(in))
}

// audit serves GET /v1/intents/{key}/audit.
func (s *Server) audit(c echo.Context) error {
	in, answered, err := s.readIntent(c)
	if answered {
		return err
	}
	return writeJSON(c, http.StatusOK, newAuditView(in))
}

// readIntent reads the intent the path names. When it could not, it has
// already answered (with a problem or by forwarding) and says so.
func (s *Server) readIntent(c echo.Context) (in *fsm.Intent, answered bool, err error) {
	key, p := keyParam(c)
	if p != nil {
		return nil, true, s.writeProblem(c, p)
	}
	cons, p := consistencyOf(c)
	if p != nil {
		return nil, true, s.writeProblem(c, p)
	}
	wait, after, waiting, p := waitParams(c)
	if p != nil {
		return nil, true, s.writeProblem(c, p)
	}
	if waiting {
		in, err = s.svc.Wait(c.Request().Context(), s.namespaceOf(c), key, after, wait, cons)
	} else {
		in, err = s.svc.Get(c.Request().Context(), s.namespaceOf(c), key, cons)
	}
	if err != nil {
		return nil, true, s.fail(c, err, nil)
	}
	return in, false, nil
}

// list serves GET /v1/intents.
func (s *Server) list(c echo.Context) error {
	cons, p := consistencyOf(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	req := ledger.ListRequest{
		Namespace: s.namespaceOf(c), Prefix: c.QueryParam("prefix"), State: fsm.State(c.QueryParam("state")),
		Cursor: c.QueryParam("cursor"),
	}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			p := newProblem(CodeBadRequest, fmt.Sprintf("limit: %q is not an integer", v))
			p.Field = "limit"
			return s.writeProblem(c, p)
		}
		req.Limit = n
	}
	page, next, err := s.svc.List(c.Request().Context(), req, cons)
	if err != nil {
		return s.fail(c, err, nil)
	}
	resp := listResponse{Intents: make([]*intentView, 0, len(page)), NextCursor: next}
	for _, in := range page {
		resp.Intents = append(resp.Intents, newIntentView(in))
	}
	return writeJSON(c, http.StatusOK, resp)
}
