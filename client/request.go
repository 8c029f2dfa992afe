package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"
)

// jsonAccept is the Accept header of a JSON call.
const jsonAccept = "application/json, application/problem+json"

// request is one API call.
type request struct {
	method string
	path   string // escaped
	query  url.Values
	body   any
	// raw, when not nil, is sent as it is, as contentType, instead of body
	// as JSON (a snapshot upload).
	raw         []byte
	contentType string
	// accept is the Accept header; empty asks for JSON.
	accept string
	// addr pins the call to one node without retries (Health).
	addr string
	// single sends the call once, to the first node of the route, and
	// never again: for a write that is not safe to repeat (a restore).
	single bool
}

// streamer takes a 2xx answer as it arrives instead of having it decoded
// as JSON (a snapshot download). Its error is returned as it is and never
// retried: once the body streams, a repeat would deliver it twice.
type streamer interface {
	stream(resp *http.Response) error
}

func (r *request) write() bool { return r.method != http.MethodGet && r.method != http.MethodHead }

// do performs the call, retrying as the package documents, and decodes a
// 2xx answer into out. It returns the HTTP status of the answer.
func (c *Client) do(ctx context.Context, r request, out any) (int, error) {
	payload := r.raw
	if payload == nil && r.body != nil {
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
	if r.single {
		attempts = 1
	}
	var lastErr error
	unknown := false // an attempt of this write may have been applied
	limited := 0     // 429s waited out so far
	limitDeadline := time.Now().Add(c.maxWait)
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
		if retry && !r.single && errors.Is(err, ErrRateLimited) && time.Now().Before(limitDeadline) {
			// A node that asks to slow down is up and answered: wait its
			// Retry-After out (within the max wait) without using up one
			// of the retries meant for a cluster that cannot answer.
			if werr := c.sleep(ctx, c.backoff(limited, wait)); werr != nil {
				lastErr = fmt.Errorf("%w (stopped waiting: %w)", err, werr)
				break
			}
			limited++
			attempt--
			continue
		}
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
	accept, contentType := r.accept, r.contentType
	if accept == "" {
		accept = jsonAccept
	}
	if contentType == "" {
		contentType = "application/json"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.userAgent)
	c.setTrace(ctx, req.Header)
	if payload != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ClientCertRefused(err) {
			// Refused at the handshake: nothing was sent, and every node
			// of the cluster asks for the same client certificate.
			return 0, false, 0, fmt.Errorf("%w: %w", ErrUnauthorized, err)
		}
		kind := ErrUnavailable
		if r.write() && wrote.Load() {
			kind = ErrOutcomeUnknown
		}
		// The caller's context ending is not the server's fault: stop.
		return 0, ctx.Err() == nil, 0, fmt.Errorf("%w: %w", kind, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if s, ok := out.(streamer); ok {
			return resp.StatusCode, false, 0, s.stream(resp)
		}
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
