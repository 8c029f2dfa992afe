package client

import (
	"net/http"
	"time"
)

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: one with a 30 s timeout).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithRetries sets how many times a call is retried after its first
// attempt (default 4); 0 disables retries.
func WithRetries(n int) Option {
	return func(c *Client) {
		if n >= 0 {
			c.retries = n
		}
	}
}

// WithBackoff sets the exponential backoff between retries: base doubles
// each attempt up to max, with jitter. A server's Retry-After lengthens the
// wait, but never beyond max. Do also polls an in_flight key with it when
// it cannot long-poll the key (see Do).
func WithBackoff(base, max time.Duration) Option {
	return func(c *Client) {
		if base > 0 {
			c.base = base
		}
		if max > 0 {
			c.max = max
		}
		if c.max < c.base {
			c.max = c.base
		}
	}
}

// WithDiscovery turns leader discovery on (the default) or off. With it
// on, the first call asks the configured nodes, one at a time, for GET
// /v1/cluster and from then on tries the leader first, then the configured
// addresses, then the other members the status lists. It asks again after
// a call could not be served (no_leader, not_leader, outcome_unknown, a
// lost connection ...) and when what it knows is older than
// DefaultDiscoveryRefresh. When no node names a leader the client keeps
// the order it had. Writes then go straight to the leader instead of being
// forwarded by a follower. Off, calls go to the configured addresses in
// order, moving on when one cannot answer.
func WithDiscovery(on bool) Option {
	return func(c *Client) { c.discovery = on }
}

// WithMaxWait bounds how long Do waits for its claim to settle (default
// 30 s): while another owner holds the key (in_flight) and while the
// claim's outcome is unknown. It also bounds how long any call waits out
// 429s (each for its Retry-After), which do not use up WithRetries. The
// caller's context bounds both.
func WithMaxWait(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.maxWait = d
		}
	}
}

// WithReportTimeout bounds how long Do keeps trying to record the outcome
// of an effect that ran (complete, then commit), default 30 s. It applies
// also after the caller's context ended: an effect that happened must be
// reported, or the intent turns in_doubt and needs reconciliation.
func WithReportTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.reportTimeout = d
		}
	}
}

// WithAutoCommit sets whether Do commits (acknowledges) an executed
// intent after recording it (default true). Commit is best-effort: its
// failure does not fail Do.
func WithAutoCommit(on bool) Option {
	return func(c *Client) { c.autoCommit = on }
}

// WithAPIKey sends key as a bearer token with every request (clusters that
// run with --auth=required).
func WithAPIKey(key string) Option {
	return func(c *Client) { c.apiKey = key }
}

// bearerTransport adds the API key to every request, discovery probes
// included.
type bearerTransport struct {
	key  string
	base http.RoundTripper
}

// RoundTrip sends r with the API key.
func (t *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.key)
	return t.base.RoundTrip(r)
}
