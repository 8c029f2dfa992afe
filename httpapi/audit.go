package httpapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// auditPageView is the body of GET /v1/audit.
type auditPageView struct {
	Head   fsm.ChainHead     `json:"head"`
	Events []*fsm.ChainEvent `json:"events"`
	// Next is the since to ask for the next page; 0 at the end.
	Next uint64 `json:"next"`
}

// auditLog serves GET /v1/audit?since=&limit=&wait=&format=json|jsonl: a
// page of the caller's namespace's hash-chained audit log. wait=30s
// long-polls until the log holds an event at seq since or later
// (auditWait). format=jsonl streams every event from since on as JSON
// lines (an export), with the head first.
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
	wait, waiting, p := auditWait(c)
	if p != nil {
		return s.writeProblem(c, p)
	}
	switch f := c.QueryParam("format"); f {
	case "", "json":
		var page *ledger.AuditPage
		var err error
		if waiting {
			page, err = s.svc.WaitAudit(c.Request().Context(), ns, since, int(min(limit, ledger.MaxAuditPage)), wait, cons)
		} else {
			page, err = s.svc.Audit(c.Request().Context(), ns, since, int(min(limit, ledger.MaxAuditPage)), cons)
		}
		if err != nil {
			return s.fail(c, err, nil)
		}
		if page.Events == nil {
			page.Events = []*fsm.ChainEvent{}
		}
		return writeJSON(c, http.StatusOK, auditPageView{Head: page.Head, Events: page.Events, Next: page.Next})
	case "jsonl":
		if waiting {
			return s.writeProblem(c, newProblem(CodeBadRequest, "wait: an export (format=jsonl) does not wait; long-poll a page (format=json)"))
		}
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

// jsonLine encodes v as one line of JSON. encoding/json escapes < > & in
// strings; the audit log's event bodies are HTML-safe already (fsm writes
// them so), so each event's bytes stay the ones that were hashed.
func jsonLine(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
