// Package client is a Go client for the intentd HTTP API.
//
// Every ledger write is idempotent when repeated with the same key, owner,
// payload and fencing token, so the client retries writes and reads on
// answers that say the cluster could not answer (503: no leader, not the
// leader, outcome unknown, shutting down, unavailable) and on connection
// errors, rotating through the configured addresses with exponential
// backoff and jitter, always within the caller's context. It never retries
// a definite answer (any 4xx). Refusals come back as *Problem errors that
// match the sentinel errors (ErrInFlight, ErrDivergent ...) with errors.Is.
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
	"sync/atomic"
	"time"
)

// Defaults of the options.
const (
	DefaultRetries     = 4
	DefaultBackoffBase = 50 * time.Millisecond
	DefaultBackoffMax  = 2 * time.Second
	DefaultHTTPTimeout = 30 * time.Second
)

// maxProblemBytes bounds how much of an error answer is read.
const maxProblemBytes = 1 << 20

// Client talks to an intentd cluster. It is safe for concurrent use.
type Client struct {
	addrs       []string
	hc          *http.Client
	retries     int
	base, max   time.Duration
	preferred   atomic.Uint32 // index of the address that answered last
	userAgent   string
	jitterFloat func() float64
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
// wait, but never beyond max.
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

// New returns a client for the nodes at addrs ("http://127.0.0.1:8101" or
// "127.0.0.1:8101"). Any node answers any call; the client starts with the
// first and moves on when one cannot answer.
func New(addrs []string, opts ...Option) (*Client, error) {
	c := &Client{
		hc:          &http.Client{Timeout: DefaultHTTPTimeout},
		retries:     DefaultRetries,
		base:        DefaultBackoffBase,
		max:         DefaultBackoffMax,
		userAgent:   "intentd-client/1",
		jitterFloat: rand.Float64,
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
			c.addrs = append(c.addrs, norm)
		}
	}
	if len(c.addrs) == 0 {
		return nil, errors.New("client: no server address")
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Addrs returns the normalized server addresses.
func (c *Client) Addrs() []string { return append([]string(nil), c.addrs...) }

// normalizeAddr turns "host:port" or a URL into a base URL without a
// trailing slash.
func normalizeAddr(a string) (string, error) {
	if !strings.Contains(a, "://") {
		a = "http://" + a
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
	attempts := c.retries + 1
	start := int(c.preferred.Load())
	if r.addr != "" {
		attempts = 1
	}
	var lastErr error
	unknown := false // an attempt of this write may have been applied
	for attempt := 0; attempt < attempts; attempt++ {
		idx := (start + attempt) % len(c.addrs)
		base := r.addr
		if base == "" {
			base = c.addrs[idx]
		}
		status, retry, wait, err := c.once(ctx, base, r, payload, out)
		if err == nil {
			if r.addr == "" {
				c.preferred.Store(uint32(idx))
			}
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
