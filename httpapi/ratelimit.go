package httpapi

import (
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/intentledger/intentd/auth"
)

// RateLimits bound how fast one client, and traffic on one intent key,
// may call the API. A zero rate turns that limit off.
type RateLimits struct {
	// PerClient is requests per second per client (its API key's name, or
	// its address without auth), with a burst of ClientBurst.
	PerClient   float64
	ClientBurst int
	// PerKey is requests per second on one intent key (all clients
	// together), with a burst of KeyBurst: an agent stuck in a retry loop
	// on one key cannot crowd out the rest.
	PerKey   float64
	KeyBurst int
}

// DefaultRateLimits are generous: they stop runaway loops, not traffic.
var DefaultRateLimits = RateLimits{PerClient: 20000, ClientBurst: 40000, PerKey: 100, KeyBurst: 200}

// maxLimiters bounds how many buckets one limiter set keeps; past it the
// idle ones are dropped first, then the oldest.
const maxLimiters = 100_000

// limiterIdle is how long an unused bucket is kept.
const limiterIdle = 2 * time.Minute

// limiterSet is a bounded map of token buckets.
type limiterSet struct {
	mu      sync.Mutex
	limit   rate.Limit
	burst   int
	buckets map[string]*bucket
	now     func() time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

func newLimiterSet(perSecond float64, burst int, now func() time.Time) *limiterSet {
	if perSecond <= 0 {
		return nil
	}
	return &limiterSet{limit: rate.Limit(perSecond), burst: max(burst, 1), buckets: map[string]*bucket{}, now: now}
}

// take spends a token of id's bucket; when none is left it returns how
// long until one is.
func (s *limiterSet) take(id string) (ok bool, wait time.Duration) {
	if s == nil {
		return true, 0 // the limit is off
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	b, found := s.buckets[id]
	if !found {
		if len(s.buckets) >= maxLimiters {
			s.prune(now)
		}
		b = &bucket{lim: rate.NewLimiter(s.limit, s.burst)}
		s.buckets[id] = b
	}
	b.used = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// prune drops idle buckets and, if that is not enough, arbitrary ones
// until half the bound is free (a dropped bucket starts full again).
func (s *limiterSet) prune(now time.Time) {
	for id, b := range s.buckets {
		if now.Sub(b.used) > limiterIdle {
			delete(s.buckets, id)
		}
	}
	for id := range s.buckets {
		if len(s.buckets) <= maxLimiters/2 {
			break
		}
		delete(s.buckets, id)
	}
}

// rateLimit is the middleware that answers 429 rate_limited, with
// Retry-After, when the client's or the key's bucket is empty. Public
// routes (health, readiness, metrics, keys) are never limited.
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Path() {
		case "/healthz", "/readyz", "/metrics", "/v1/keys":
			return next(c)
		}
		if ok, wait := s.clientLimits.take(clientID(c)); !ok {
			return s.limited(c, "client", wait)
		}
		if key := c.Param("key"); key != "" && !forwarded(c.Request()) {
			// Counted once, where the request entered the cluster.
			if ok, wait := s.keyLimits.take(s.namespaceOf(c) + "\x00" + key); !ok {
				return s.limited(c, "key", wait)
			}
		}
		return next(c)
	}
}

func (s *Server) limited(c echo.Context, what string, wait time.Duration) error {
	s.metrics.rateLimited.WithLabelValues(what).Inc()
	p := newProblem(CodeRateLimited, fmt.Sprintf("too many requests for this %s; retry after %d ms", what, wait.Milliseconds()))
	p.setRetryAfter(time.Duration(math.Max(float64(wait), float64(time.Millisecond))))
	return s.writeProblem(c, p)
}

// clientID names the caller for the per-client limit: its API key's name,
// else the address it came from (the original client's, for a request a
// follower forwarded).
func clientID(c echo.Context) string {
	if p, ok := auth.PrincipalFrom(c); ok && p.Name != "" {
		return "key:" + p.Name
	}
	r := c.Request()
	if forwarded(r) {
		if xff := r.Header.Get("X-Forwarded-For"); xff != "" {
			return "ip:" + strings.TrimSpace(strings.Split(xff, ",")[0])
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host
}
