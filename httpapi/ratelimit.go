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
	"github.com/intentledger/intentd/ledger"
)

// RateLimits bound how fast one client, and one client on one intent key,
// may call the API, and how often one address may fail to authenticate. A
// zero rate turns that limit off.
type RateLimits struct {
	// PerClient is requests per second per client (its API key's name, or
	// its address without auth), with a burst of ClientBurst.
	PerClient   float64
	ClientBurst int
	// PerKey is requests per second by one client on one intent key, with
	// a burst of KeyBurst: an agent stuck in a retry loop on one key
	// cannot crowd out the rest. Each client has its own bucket per key,
	// so readers polling an intent never spend the tokens of the key that
	// holds its grant (its renew and complete).
	PerKey   float64
	KeyBurst int
	// AuthFailures is failed authentications (401, and 403 for a key
	// without the role) per second per client address, with a burst of
	// AuthFailureBurst. Once an address has spent its burst, its requests
	// to protected routes whose key does not authenticate (a bad key, or
	// none) are answered 429 until its bucket refills; a request with a
	// valid key is never refused by this limit, so a client flooding bad
	// keys cannot lock out the good keys of its address (a NAT, a shared
	// host). The per-client limit above only counts requests that
	// authenticated, so without this one a flood of bad keys is never
	// limited. It applies only with auth on.
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
// Retry-After, when the client's bucket, or its bucket for the intent key,
// is empty. The paths of public routes (health, readiness, metrics, keys)
// are never limited. It also names the client to the ledger
// (ledger.WithWaitCaller), which caps the long-polls one client may hold
// waiting at once (Limits.MaxWaitersPerCaller).
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.public(c) {
			return next(c)
		}
		client := clientID(c)
		if ok, wait := s.clientLimits.take(client); !ok {
			return s.limited(c, "client", wait)
		}
		if c.Param("key") != "" && !forwarded(c.Request()) {
			// Counted once, where the request entered the cluster, on the
			// key as the handler will see it (keyParam), so that every
			// spelling of one key (a%2Fb, %61) shares one bucket. A key
			// that does not decode is refused by the handler. The bucket
			// is the client's own (takeKey).
			if key, p := keyParam(c); p == nil {
				if ok, wait := s.takeKey(c, key); !ok {
					return s.limited(c, "key", wait)
				}
			}
		}
		r := c.Request()
		c.SetRequest(r.WithContext(ledger.WithWaitCaller(r.Context(), client)))
		return next(c)
	}
}

// takeKey spends a token of the client's bucket for intent key (in the
// request's namespace), RateLimits.PerKey; when none is left it returns
// how long until one is. Each client has its own bucket per key, so one
// client's traffic on a key never spends another's: readers polling an
// intent cannot starve the renew and complete of the key holding its
// grant. The buckets stay bounded by maxLimiters like every limiter set.
func (s *Server) takeKey(c echo.Context, key string) (ok bool, wait time.Duration) {
	return s.keyLimits.take(clientID(c) + "\x00" + s.namespaceOf(c) + "\x00" + key)
}

// limitAuthFailures is the middleware, registered in front of
// auth.Middleware, that limits failed authentications per client address
// (RateLimits.AuthFailures): a request that auth.Middleware refuses (401,
// or 403 for a key without the route's role; a handler's own 403 comes
// after authentication) spends a token of its address's bucket, and while
// that bucket is empty a request from the address whose key does not
// authenticate (a bad key, or none) is answered 429 rate_limited, with
// Retry-After. A request whose key authenticates goes on even then (to
// auth.Middleware, which checks its role): a client flooding bad keys
// slows only itself, never the good keys of its address. Public routes
// are never limited.
func (s *Server) limitAuthFailures(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.authFailures == nil || s.roleOf(c) == auth.Public {
			return next(c)
		}
		addr := clientAddr(c.Request())
		if blocked, wait := s.authFailures.blocked(addr); blocked && !s.authenticates(c.Request()) {
			return s.limited(c, "auth_failures", wait)
		}
		err := next(c)
		if refusedByAuth(err) {
			s.authFailures.spend(addr)
		}
		return err
	}
}

// authenticates reports whether r presents a valid API key, whatever its
// roles: the one request limitAuthFailures lets through from an address
// over its failure limit. Checking it costs what authenticating any
// request does (a SHA-256 and a constant-time comparison per key).
func (s *Server) authenticates(r *http.Request) bool {
	_, err := s.keys.Check(r, auth.Authenticated)
	return err == nil
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
