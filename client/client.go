// Package client is the Go SDK for intentd, the at-most-once gate in front
// of side-effecting tool calls.
//
// Most callers need three things: New to connect to a cluster, Key to name
// a logical effect after the business entity it acts on, and Client.Do to
// run the effect at most once under that key:
//
//	c, err := client.New([]string{"127.0.0.1:8101", "127.0.0.1:8102", "127.0.0.1:8103"})
//	...
//	res, err := c.Do(ctx, client.Effect{
//		Key:     client.Key("stripe.charge", orderID, ""),
//		Tool:    "stripe.charge",
//		Payload: charge,
//	}, func(ctx context.Context, g *client.Grant) (any, error) {
//		return stripe.Charge(ctx, charge, g.ExecutionToken)
//	})
//
// The lower-level calls map one to one onto the HTTP API: intents (Claim,
// Complete, Renew, Commit, Resolve, Approve, Reject, Get, List, Wait,
// Audit), the gate (PutPolicy and the other policy calls, VerifyToken,
// JWKS, RotateKey, AuditLog, Settings, PutSettings), the cluster (Cluster,
// Health) and backups (SaveSnapshot, RestoreSnapshot). intentctl speaks
// through them alone.
//
// Routing: the client asks any configured node for GET /v1/cluster on its
// first call and sends every call to the leader first, then to the other
// nodes (see WithDiscovery). It asks again after an answer that says the
// node could not serve (no_leader, not_leader, a lost connection ...).
//
// Retries: every ledger write is idempotent when repeated with the same key,
// owner, payload and fencing token, so the client retries writes and reads
// on answers that say the cluster could not answer (503: no leader, not the
// leader, outcome unknown, shutting down, unavailable) and on connection
// errors, moving through the nodes with exponential backoff and jitter,
// always within the caller's context. It never retries a definite answer
// (any 4xx). Refusals come back as *Problem errors that match the sentinel
// errors (ErrInFlight, ErrDivergent ...) with errors.Is and can be
// inspected with errors.As.
package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the options.
const (
	DefaultRetries     = 4
	DefaultBackoffBase = 50 * time.Millisecond
	DefaultBackoffMax  = 2 * time.Second
	DefaultHTTPTimeout = 30 * time.Second
	// DefaultMaxWait bounds how long Do waits for its claim to settle (an
	// in_flight holder, an unknown outcome).
	DefaultMaxWait = 30 * time.Second
	// DefaultReportTimeout bounds how long Do keeps trying to record the
	// outcome of an effect that ran, also after the caller's context ended.
	DefaultReportTimeout = 30 * time.Second
	// DefaultDiscoveryRefresh is how old the client's knowledge of the
	// leader may grow before a call asks the cluster again.
	DefaultDiscoveryRefresh = time.Minute
)

// Client talks to an intentd cluster. It is safe for concurrent use.
type Client struct {
	seeds       []string // the configured addresses, normalized
	hc          *http.Client
	retries     int
	base, max   time.Duration
	userAgent   string
	jitterFloat func() float64

	// Routing: rt is the current order of addresses; discovery replaces it.
	rt               atomic.Pointer[route]
	discovery        bool
	discoveryRefresh time.Duration
	probeTimeout     time.Duration
	now              func() time.Time
	mu               sync.Mutex
	discovering      chan struct{} // closed when the running discovery ends

	// apiKey, when set, is sent as a bearer token with every request.
	apiKey string
	// injectTrace writes a request's trace context (trace.go); nil: only
	// WithTraceparent's is sent.
	injectTrace func(ctx context.Context, h http.Header)

	// Do.
	maxWait       time.Duration
	reportTimeout time.Duration
	autoCommit    bool
}

// New returns a client for the nodes at addrs ("http://127.0.0.1:8101" or
// "127.0.0.1:8101"; an element may hold a comma-separated list). Any node
// answers any call; with discovery (the default) the client finds the
// leader on its first call and sends calls there.
func New(addrs []string, opts ...Option) (*Client, error) {
	c := &Client{
		hc:               &http.Client{Timeout: DefaultHTTPTimeout},
		retries:          DefaultRetries,
		base:             DefaultBackoffBase,
		max:              DefaultBackoffMax,
		userAgent:        "intentd-client/1",
		jitterFloat:      rand.Float64,
		discovery:        true,
		discoveryRefresh: DefaultDiscoveryRefresh,
		probeTimeout:     discoveryProbeTimeout,
		now:              time.Now,
		maxWait:          DefaultMaxWait,
		reportTimeout:    DefaultReportTimeout,
		autoCommit:       true,
	}
	for _, a := range addrs {
		for _, part := range strings.Split(a, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			norm, err := normalizeAddr(part)
			if err != nil {
				return nil, err
			}
			c.seeds = append(c.seeds, norm)
		}
	}
	if len(c.seeds) == 0 {
		return nil, errors.New("client: no server address")
	}
	for _, o := range opts {
		o(c)
	}
	if c.apiKey != "" {
		hc := *c.hc
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		hc.Transport = &bearerTransport{key: c.apiKey, base: base}
		c.hc = &hc
	}
	c.rt.Store(&route{addrs: dedupe(c.seeds), at: c.now()})
	return c, nil
}

// Addrs returns the configured server addresses, normalized.
func (c *Client) Addrs() []string { return append([]string(nil), c.seeds...) }

// normalizeAddr turns "host:port" or a URL into a base URL without a
// trailing slash.
func normalizeAddr(a string) (string, error) {
	return normalizeAddrScheme(a, "http")
}

// normalizeAddrScheme is normalizeAddr with the scheme to assume when a
// has none.
func normalizeAddrScheme(a, scheme string) (string, error) {
	if !strings.Contains(a, "://") {
		a = scheme + "://" + a
	}
	u, err := url.Parse(a)
	if err != nil {
		return "", fmt.Errorf("client: address %q: %w", a, err)
	}
	if u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("client: address %q: want http://host:port", a)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("client: address %q: no query or fragment allowed", a)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// dedupe returns addrs without repeats, in order.
func dedupe(addrs []string) []string {
	seen := make(map[string]bool, len(addrs))
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}
