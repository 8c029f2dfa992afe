package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Wait long-polls one intent: it answers as soon as the intent's version
// is above afterVersion (it changed, or appeared), or after wait (at most
// 60 s) with the intent as it is; ErrNotFound if it still does not exist.
// Use it to wait for an approval or for another owner's result instead of
// polling.
func (c *Client) Wait(ctx context.Context, key string, afterVersion uint64, wait time.Duration) (*Intent, error) {
	if err := needKey(key); err != nil {
		return nil, err
	}
	q := url.Values{"wait": {wait.String()}, "after_version": {strconv.FormatUint(afterVersion, 10)}}
	var out Intent
	if _, err := c.do(ctx, request{method: http.MethodGet, path: intentPath(key, ""), query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
