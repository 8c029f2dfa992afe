package httpapi

import (
	"fmt"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/ledger"
)

// auditWait reads ?wait= of GET /v1/audit: a long-poll that answers as
// soon as the namespace's audit log holds an event at seq since or later
// (ledger.Service.WaitAudit), or after wait with the page as it is. A
// client follows the namespace by asking for since = head.last_seq + 1.
func auditWait(c echo.Context) (wait time.Duration, ok bool, p *problem) {
	w := c.QueryParam("wait")
	if w == "" {
		return 0, false, nil
	}
	wait, err := time.ParseDuration(w)
	if err != nil || wait < 0 || wait > ledger.MaxWait {
		p := newProblem(CodeBadRequest, fmt.Sprintf("wait: %q must be a duration between 0s and %v, e.g. 30s", w, ledger.MaxWait))
		p.Field = "wait"
		return 0, false, p
	}
	return wait, true, nil
}
