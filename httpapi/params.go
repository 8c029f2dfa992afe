package httpapi

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/ledger"
)

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

// keyParam returns the intent key of the path. Routing runs on the escaped
// path when the request has one (URL.RawPath), so a key may hold '/'; the
// parameter is then unescaped here, exactly once. Without RawPath the
// parameter comes from the already unescaped URL.Path.
func keyParam(c echo.Context) (string, *problem) {
	raw := c.Param("key")
	if c.Request().URL.RawPath == "" {
		return raw, nil
	}
	key, err := url.PathUnescape(raw)
	if err != nil {
		return "", newProblem(CodeBadRequest, fmt.Sprintf("key: bad escape in the path: %v", err))
	}
	return key, nil
}

// consistencyOf reads ?consistency= (linearizable by default).
func consistencyOf(c echo.Context) (ledger.Consistency, *problem) {
	switch v := c.QueryParam("consistency"); v {
	case "", "linearizable":
		return ledger.Linearizable, nil
	case "stale":
		return ledger.Stale, nil
	default:
		return 0, newProblem(CodeBadRequest, fmt.Sprintf("consistency: must be \"linearizable\" or \"stale\", not %q", v))
	}
}
