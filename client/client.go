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
// The lower-level calls (Claim, Complete, Renew, Commit, Resolve, Get,
// List, Audit, Cluster) map one to one onto the HTTP API.
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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
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

// discoveryProbeTimeout bounds one GET /v1/cluster of a discovery.
const discoveryProbeTimeout = time.Second

// maxProblemBytes bounds how much of an error answer is read.
const maxProblemBytes = 1 << 20

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

	// Do.
	maxWait       time.Duration
	reportTimeout time.Duration
	autoCommit    bool
}

// route is one immutable order of the addresses to try, with the index of
// the one that answered last.
type route struct {
	// version counts discoveries; 0 is the configured list, never
	// discovered.
	version uint64
	addrs   []string
	// leader is the discovered leader's address ("" when unknown).
	leader    string
	at        time.Time
	preferred atomic.Int32
}

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
// wait, but never beyond max. Do also polls an in_flight key with it.
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
// claim's outcome is unknown. The caller's context bounds it too.
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

// Endpoints returns the addresses in the order the next call tries them:
// the one that answered last first (the leader, once discovered), then the
// others in turn.
func (c *Client) Endpoints() []string {
	rt := c.rt.Load()
	start := int(rt.preferred.Load())
	out := make([]string, 0, len(rt.addrs))
	for i := range rt.addrs {
		out = append(out, rt.addrs[(start+i)%len(rt.addrs)])
	}
	return out
}

// Leader returns the HTTP address of the leader as last discovered, or ""
// when no discovery has named one.
func (c *Client) Leader() string { return c.rt.Load().leader }

// Discover asks the nodes for the cluster's status now and puts the leader
// first, as the client does by itself on its first call (see
// WithDiscovery). It returns the leader's address, or an error wrapping
// ErrNoLeader when no node could name one; the client then keeps the order
// it had.
func (c *Client) Discover(ctx context.Context) (string, error) {
	rt := c.rediscover(ctx, c.rt.Load())
	if rt.leader == "" {
		return "", fmt.Errorf("client: discovery: %w: no node named a leader", ErrNoLeader)
	}
	return rt.leader, nil
}

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

// currentRoute returns the order to try, discovering the leader first when
// the client has never done so or its knowledge is stale.
func (c *Client) currentRoute(ctx context.Context) *route {
	rt := c.rt.Load()
	if !c.discovery || (rt.version > 0 && c.now().Sub(rt.at) < c.discoveryRefresh) {
		return rt
	}
	return c.rediscover(ctx, rt)
}

// rediscover replaces seen by a freshly discovered route, unless another
// call already replaced it (then it returns that one). One discovery runs
// at a time; concurrent callers wait for it, each within its own context.
// A discovery failure still yields a new route (the same order), so a
// failing cluster is asked at most once per failed attempt.
func (c *Client) rediscover(ctx context.Context, seen *route) *route {
	for {
		c.mu.Lock()
		if cur := c.rt.Load(); cur != seen {
			c.mu.Unlock()
			return cur
		}
		if wait := c.discovering; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue // a route was stored: the check above returns it
			case <-ctx.Done():
				return c.rt.Load()
			}
		}
		done := make(chan struct{})
		c.discovering = done
		c.mu.Unlock()

		next := c.discover(ctx, seen)
		c.mu.Lock()
		c.rt.Store(next)
		c.discovering = nil
		close(done)
		c.mu.Unlock()
		return next
	}
}

// discover asks the nodes of cur, in its order, for the cluster's status
// and returns the route it implies: the leader, then the configured
// addresses, then the other members. A node that is ready wins over one
// that is not; without any answer naming a leader the order stays. It takes
// at most one probe timeout per node and half of ctx's remaining time.
func (c *Client) discover(ctx context.Context, cur *route) *route {
	next := &route{version: cur.version + 1, addrs: cur.addrs, leader: cur.leader, at: c.now()}
	next.preferred.Store(cur.preferred.Load())
	// Bound the whole discovery: one probe timeout per node, and never more
	// than half of what is left of the caller's time, which is for the call.
	budget := c.probeTimeout * time.Duration(len(cur.addrs))
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d)/2)
	}
	ctx, cancelAll := context.WithTimeout(ctx, budget)
	defer cancelAll()
	var found *route
	start := int(cur.preferred.Load())
	for i := range cur.addrs {
		base := cur.addrs[(start+i)%len(cur.addrs)]
		if ctx.Err() != nil {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, c.probeTimeout)
		var st ClusterStatus
		_, _, _, err := c.once(pctx, base, request{method: http.MethodGet, path: "/v1/cluster"}, nil, &st)
		cancel()
		if err != nil {
			continue
		}
		addrs, leader, ok := c.routeFromStatus(base, &st)
		if !ok {
			continue
		}
		r := &route{version: next.version, addrs: addrs, leader: leader, at: next.at}
		if st.Ready {
			found = r
			break
		}
		if found == nil {
			found = r
		}
	}
	if found != nil {
		return found
	}
	return next
}

// routeFromStatus orders the addresses by st, the status as the node at
// base sees it: the leader first (base itself when the node is the
// leader: it is reachable by that name), then the configured addresses,
// then the other members' advertised HTTP addresses. ok is false when st
// names no reachable leader.
func (c *Client) routeFromStatus(base string, st *ClusterStatus) (addrs []string, leader string, ok bool) {
	if st.LeaderID == "" {
		return nil, "", false
	}
	scheme := "http"
	if u, err := url.Parse(base); err == nil && u.Scheme != "" {
		scheme = u.Scheme
	}
	if st.NodeID == st.LeaderID {
		leader = base
	} else {
		if st.LeaderHTTP == "" {
			return nil, "", false
		}
		a, err := normalizeAddrScheme(st.LeaderHTTP, scheme)
		if err != nil {
			return nil, "", false
		}
		leader = a
	}
	addrs = append([]string{leader}, c.seeds...)
	for _, n := range st.Nodes {
		// The answering node is reachable by the name it was asked under,
		// the leader is first already; members that left are gone.
		if n.ID == st.NodeID || n.ID == st.LeaderID || n.HTTPAddr == "" || n.Gossip == "left" || n.Gossip == "dead" {
			continue
		}
		if a, err := normalizeAddrScheme(n.HTTPAddr, scheme); err == nil {
			addrs = append(addrs, a)
		}
	}
	return dedupe(addrs), leader, true
}

// request is one API call.
type request struct {
	method string
	path   string // escaped
	query  url.Values
	body   any
	// addr pins the call to one node without retries (Health).
	addr string
}

func (r *request) write() bool { return r.method != http.MethodGet && r.method != http.MethodHead }

// do performs the call, retrying as the package documents, and decodes a
// 2xx answer into out. It returns the HTTP status of the answer.
func (c *Client) do(ctx context.Context, r request, out any) (int, error) {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return 0, fmt.Errorf("client: encode request: %w", err)
		}
	}
	if r.addr != "" {
		status, _, _, err := c.once(ctx, r.addr, r, payload, out)
		return status, err
	}
	rt := c.currentRoute(ctx)
	idx := int(rt.preferred.Load()) % len(rt.addrs)
	attempts := c.retries + 1
	var lastErr error
	unknown := false // an attempt of this write may have been applied
	for attempt := 0; attempt < attempts; attempt++ {
		base := rt.addrs[idx]
		status, retry, wait, err := c.once(ctx, base, r, payload, out)
		if err == nil {
			rt.preferred.Store(int32(idx))
			return status, nil
		}
		if r.write() && maybeApplied(err) {
			unknown = true
		}
		lastErr = err
		if !retry || attempt == attempts-1 {
			break
		}
		if werr := c.sleep(ctx, c.backoff(attempt, wait)); werr != nil {
			lastErr = fmt.Errorf("%w (stopped retrying: %w)", err, werr)
			break
		}
		if errors.Is(err, ErrRateLimited) {
			continue // the node is up and asked us to slow down: same node again
		}
		// The node could not serve: perhaps the leader moved or died. Ask
		// the cluster again (at most once per failed route), else move on.
		next := (idx + 1) % len(rt.addrs)
		if c.discovery {
			if nrt := c.rediscover(ctx, rt); nrt != rt {
				rt = nrt
				next = int(rt.preferred.Load()) % len(rt.addrs)
				if rt.addrs[next] == base && len(rt.addrs) > 1 {
					next = (next + 1) % len(rt.addrs)
				}
			}
		}
		idx = next
	}
	if unknown && !errors.Is(lastErr, ErrOutcomeUnknown) && transient(lastErr) {
		// An earlier attempt may have been applied even though the last one
		// definitely was not.
		return 0, fmt.Errorf("%w: an earlier attempt may have been applied: %w", ErrOutcomeUnknown, lastErr)
	}
	return 0, lastErr
}

// maybeApplied reports whether a failed write attempt may have been
// applied.
func maybeApplied(err error) bool {
	var p *Problem
	if errors.As(err, &p) {
		return p.maybeApplied()
	}
	return errors.Is(err, ErrOutcomeUnknown)
}

// transient reports whether err says the cluster could not answer, rather
// than a definite answer.
func transient(err error) bool {
	var p *Problem
	if errors.As(err, &p) {
		return p.retryable() || p.Status >= 500
	}
	return true
}

// backoff is the wait before retry number attempt+1: exponential with
// jitter in [d/2, d], raised to the server's Retry-After, capped at max.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := c.base
	for i := 0; i < attempt && d < c.max; i++ {
		d *= 2
	}
	d = min(d, c.max)
	d = d/2 + time.Duration(c.jitterFloat()*float64(d/2))
	if retryAfter > d {
		d = min(retryAfter, c.max)
	}
	return d
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// once sends the call to one node. retry says whether the same call may be
// sent again; wait is the server's Retry-After.
func (c *Client) once(ctx context.Context, base string, r request, payload []byte, out any) (status int, retry bool, wait time.Duration, err error) {
	target := base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	var wrote atomic.Bool
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	req, err := http.NewRequestWithContext(tctx, r.method, target, body)
	if err != nil {
		return 0, false, 0, fmt.Errorf("client: %s %s: %w", r.method, target, err)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.userAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		kind := ErrUnavailable
		if r.write() && wrote.Load() {
			kind = ErrOutcomeUnknown
		}
		// The caller's context ending is not the server's fault: stop.
		return 0, ctx.Err() == nil, 0, fmt.Errorf("%w: %w", kind, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.StatusCode, false, 0, nil
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			// The call was answered; only its body is lost. For a write,
			// what it did is not known to the caller.
			kind := ErrUnavailable
			if r.write() {
				kind = ErrOutcomeUnknown
			}
			return 0, ctx.Err() == nil, 0, fmt.Errorf("%w: %s %s: decoding the %d answer: %w", kind, r.method, target, resp.StatusCode, err)
		}
		return resp.StatusCode, false, 0, nil
	}

	p := readProblem(resp)
	if r.write() && (p.Status == http.StatusBadGateway || p.Status == http.StatusGatewayTimeout) {
		return 0, p.retryable(), p.RetryAfter, fmt.Errorf("%w: %w", ErrOutcomeUnknown, p)
	}
	return 0, p.retryable(), p.RetryAfter, p
}

// readProblem decodes an error answer; one without a problem document
// still becomes a *Problem named by its status.
func readProblem(resp *http.Response) *Problem {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	p := &Problem{Status: resp.StatusCode}
	var w problemWire
	if err := json.Unmarshal(data, &w); err == nil && w.Code != "" {
		p.Code, p.Title, p.Detail, p.Type, p.Field = w.Code, w.Title, w.Detail, w.Type, w.Field
		p.Intent, p.Fingerprint, p.RequestFingerprint = w.Intent, w.Fingerprint, w.RequestFingerprint
		p.RetryAfter = time.Duration(w.RetryAfterMS) * time.Millisecond
	} else {
		p.Code = codeForStatus(resp.StatusCode)
		p.Title = http.StatusText(resp.StatusCode)
		p.Detail = strings.TrimSpace(string(data))
		if len(p.Detail) > 200 {
			p.Detail = p.Detail[:200] + "..."
		}
	}
	if p.RetryAfter == 0 {
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			p.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	return p
}
