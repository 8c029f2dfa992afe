package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// MaxLongPoll is the longest wait Wait accepts: the cluster's limit of a
// long-poll. (WithMaxWait is another matter: how long Do waits.)
const MaxLongPoll = 60 * time.Second

// Wait long-polls one intent: it answers as soon as the intent's version
// is above afterVersion (it changed, or appeared), or after wait (at most
// MaxLongPoll) with the intent as it is; ErrNotFound if it still does not
// exist. Use it to wait for an approval or for another owner's result
// instead of polling. The HTTP client's timeout (WithHTTPClient; 30 s by
// default) must outlast wait.
func (c *Client) Wait(ctx context.Context, key string, afterVersion uint64, wait time.Duration) (*Intent, error) {
	if err := needKey(key); err != nil {
		return nil, err
	}
	if wait < 0 || wait > MaxLongPoll {
		return nil, fmt.Errorf("client: wait %q: %w: wait %v is outside 0s..%v", key, ErrBadRequest, wait, MaxLongPoll)
	}
	q := url.Values{"wait": {wait.String()}, "after_version": {strconv.FormatUint(afterVersion, 10)}}
	var out Intent
	if _, err := c.do(ctx, request{method: http.MethodGet, path: intentPath(key, ""), query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
