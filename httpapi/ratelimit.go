package httpapi

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/intentledger/intentd/auth"
)

// RateLimits bound how fast one client, and traffic on one intent key,
// may call the API, and how often one address may fail to authenticate. A
// zero rate turns that limit off.
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
	// AuthFailures is failed authentications (401, and 403 for a key
	// without the role) per second per client address, with a burst of
	// AuthFailureBurst. Once an address has spent its burst, its requests
	// to protected routes are answered 429 without being authenticated
	// until its bucket refills, good keys included: the per-client limit
	// above only counts requests that authenticated, so without this one
	// a flood of bad keys is never limited. It applies only with auth on.
	AuthFailures     float64
	AuthFailureBurst int
}

// DefaultRateLimits are generous: they stop runaway loops, not traffic.
// Authentication failures are the exception: a client with a working key
// fails rarely, so a few per second are plenty.
var DefaultRateLimits = RateLimits{PerClient: 20000, ClientBurst: 40000, PerKey: 100, KeyBurst: 200,
	AuthFailures: 5, AuthFailureBurst: 50}

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
	b := s.bucketFor(id, now)
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// bucketFor returns id's bucket, made full if it is new, marked used at
// now. The caller holds s.mu.
func (s *limiterSet) bucketFor(id string, now time.Time) *bucket {
	b, found := s.buckets[id]
	if !found {
		if len(s.buckets) >= maxLimiters {
			s.prune(now)
		}
		b = &bucket{lim: rate.NewLimiter(s.limit, s.burst)}
		s.buckets[id] = b
	}
	b.used = now
	return b
}

// blocked reports whether id's bucket is empty, and then how long until
// it holds a token again, without spending one.
func (s *limiterSet) blocked(id string) (bool, time.Duration) {
	if s == nil {
		return false, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, found := s.buckets[id]
	if !found {
		return false, 0
	}
	now := s.now()
	tokens := b.lim.TokensAt(now)
	if tokens >= 1 {
		return false, 0
	}
	return true, time.Duration((1 - tokens) / float64(s.limit) * float64(time.Second))
}

// spend takes a token from id's bucket if one is left (a bucket is never
// overdrawn, so a burst of concurrent failures cannot push it into debt).
func (s *limiterSet) spend(id string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.bucketFor(id, now).lim.AllowN(now, 1)
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
// Retry-After, when the client's or the key's bucket is empty. The paths
// of public routes (health, readiness, metrics, keys) are never limited.
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.public(c) {
			return next(c)
		}
		if ok, wait := s.clientLimits.take(clientID(c)); !ok {
			return s.limited(c, "client", wait)
		}
		if c.Param("key") != "" && !forwarded(c.Request()) {
			// Counted once, where the request entered the cluster, on the
			// key as the handler will see it (keyParam), so that every
			// spelling of one key (a%2Fb, %61) shares one bucket. A key
			// that does not decode is refused by the handler.
			if key, p := keyParam(c); p == nil {
				if ok, wait := s.keyLimits.take(s.namespaceOf(c) + "\x00" + key); !ok {
					return s.limited(c, "key", wait)
				}
			}
		}
		return next(c)
	}
}

// limitAuthFailures is the middleware, registered in front of
// auth.Middleware, that limits failed authentications per client address
// (RateLimits.AuthFailures): a request from an address whose bucket is
// empty is answered 429 rate_limited, with Retry-After, before its key is
// looked at; a request that auth.Middleware refuses (401, or 403 for a key
// without the route's role; a handler's own 403 comes after
// authentication) spends a token. Public routes are never limited.
func (s *Server) limitAuthFailures(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.authFailures == nil || s.roleOf(c) == auth.Public {
			return next(c)
		}
		addr := clientAddr(c.Request())
		if blocked, wait := s.authFailures.blocked(addr); blocked {
			return s.limited(c, "auth_failures", wait)
		}
		err := next(c)
		if refusedByAuth(err) {
			s.authFailures.spend(addr)
		}
		return err
	}
}

// limited answers 429 rate_limited for the limit what (client, key or
// auth_failures), with Retry-After.
func (s *Server) limited(c echo.Context, what string, wait time.Duration) error {
	s.metrics.rateLimited.WithLabelValues(what).Inc()
	detail := fmt.Sprintf("too many requests for this %s; retry after %d ms", what, wait.Milliseconds())
	if what == "auth_failures" {
		detail = fmt.Sprintf("too many failed authentications from this address; retry after %d ms", wait.Milliseconds())
	}
	p := newProblem(CodeRateLimited, detail)
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
	return clientAddr(c.Request())
}

// clientAddr names the address a request came from: r.RemoteAddr's host,
// or, for a request a node of the cluster forwarded (trustForwarding has
// dropped the forwarding headers of every other), the original client's
// from X-Forwarded-For.
func clientAddr(r *http.Request) string {
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
