package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/namespace"
)

// NamespaceQuota bounds what one namespace may do: how fast it may claim
// and how many intents it may hold. A zero field turns that bound off.
type NamespaceQuota struct {
	// ClaimsPerSecond is the claims per second the leader accepts for the
	// namespace, with a burst of Burst (at least 1).
	ClaimsPerSecond float64 `json:"claims_per_second,omitempty"`
	Burst           int     `json:"burst,omitempty"`
	// MaxIntents is how many intents the namespace may hold: a claim that
	// would add one more (its key is not in the ledger) is refused while
	// the namespace holds MaxIntents. A claim of a key the ledger holds
	// (a duplicate, a retry after failed) adds none and is never refused
	// by it.
	MaxIntents int `json:"max_intents,omitempty"`
}

// NamespaceQuotas are the quotas by namespace; a namespace not named has
// none.
type NamespaceQuotas map[string]NamespaceQuota

// Errors of the namespace quotas (see QuotaError). Nothing was written.
var (
	// ErrNamespaceRateLimited: the namespace claimed faster than its
	// ClaimsPerSecond; retry after QuotaError.RetryAfter.
	ErrNamespaceRateLimited = errors.New("the namespace is over its claims per second")
	// ErrNamespaceFull: the namespace holds its MaxIntents; a claim of a
	// new key waits until intents are purged.
	ErrNamespaceFull = errors.New("the namespace holds its maximum of intents")
)

// QuotaError is a claim refused by its namespace's quota.
type QuotaError struct {
	Namespace string
	// Kind is ErrNamespaceRateLimited or ErrNamespaceFull.
	Kind error
	// RetryAfter is, for ErrNamespaceRateLimited, when a claim would be
	// accepted again.
	RetryAfter time.Duration
	// Stored and Max are, for ErrNamespaceFull, what the namespace holds
	// and may hold.
	Stored, Max int
}

func (e *QuotaError) Error() string {
	if errors.Is(e.Kind, ErrNamespaceFull) {
		return fmt.Sprintf("namespace %q holds %d intents, its maximum is %d; claims of new keys are refused until intents are purged (reports, reads and claims of keys it holds are served)",
			e.Namespace, e.Stored, e.Max)
	}
	return fmt.Sprintf("namespace %q is over its quota of claims per second; retry after %d ms", e.Namespace, e.RetryAfter.Milliseconds())
}

// Unwrap returns Kind.
func (e *QuotaError) Unwrap() error { return e.Kind }

// Validate refuses quotas the ledger cannot apply: an invalid namespace,
// a negative or non-finite field, a burst without a rate.
func (q NamespaceQuotas) Validate() error {
	for ns, v := range q {
		switch {
		case !namespace.Valid(ns):
			return fmt.Errorf("namespace %q must match [a-z0-9][a-z0-9_-]{0,62}", ns)
		case v.ClaimsPerSecond < 0 || math.IsNaN(v.ClaimsPerSecond) || math.IsInf(v.ClaimsPerSecond, 0):
			return fmt.Errorf("namespace %q: claims_per_second %v must be a finite number, 0 or more", ns, v.ClaimsPerSecond)
		case v.Burst < 0:
			return fmt.Errorf("namespace %q: burst %d must be 0 or more", ns, v.Burst)
		case v.Burst > 0 && v.ClaimsPerSecond == 0:
			return fmt.Errorf("namespace %q: burst %d without claims_per_second", ns, v.Burst)
		case v.MaxIntents < 0:
			return fmt.Errorf("namespace %q: max_intents %d must be 0 or more", ns, v.MaxIntents)
		}
	}
	return nil
}

// Namespaces returns the namespaces the quotas name, in order.
func (q NamespaceQuotas) Namespaces() []string {
	out := make([]string, 0, len(q))
	for ns := range q {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// ParseNamespaceQuotas reads quotas from JSON, an object by namespace:
// {"payments": {"claims_per_second": 50, "burst": 100, "max_intents": 100000}}.
// Unknown fields are refused, and so are quotas that do not Validate.
func ParseNamespaceQuotas(data []byte) (NamespaceQuotas, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var q NamespaceQuotas
	if err := dec.Decode(&q); err != nil {
		return nil, fmt.Errorf("namespace quotas: %w", err)
	}
	if dec.More() {
		return nil, errors.New("namespace quotas: more than one JSON value")
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("namespace quotas: %w", err)
	}
	return q, nil
}

// LoadNamespaceQuotas reads the quotas file at path (ParseNamespaceQuotas).
func LoadNamespaceQuotas(path string) (NamespaceQuotas, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("namespace quotas: %w", err)
	}
	q, err := ParseNamespaceQuotas(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return q, nil
}

// quotas holds the namespace quotas in force and their token buckets.
type quotas struct {
	now func() time.Time
	// leading reports whether this node leads; nil: always (one node).
	leading func() bool

	mu      sync.Mutex
	cfg     NamespaceQuotas
	buckets map[string]*rate.Limiter // by namespace, those with a rate
}

func newQuotas(now func() time.Time) *quotas {
	return &quotas{now: now, buckets: map[string]*rate.Limiter{}}
}

// set replaces the quotas; a namespace whose rate and burst did not
// change keeps its bucket (a reload does not refill it).
func (q *quotas) set(cfg NamespaceQuotas) {
	q.mu.Lock()
	defer q.mu.Unlock()
	buckets := make(map[string]*rate.Limiter, len(cfg))
	for ns, v := range cfg {
		if v.ClaimsPerSecond <= 0 {
			continue
		}
		old, had := q.cfg[ns]
		if b := q.buckets[ns]; b != nil && had && old.ClaimsPerSecond == v.ClaimsPerSecond && old.Burst == v.Burst {
			buckets[ns] = b
			continue
		}
		buckets[ns] = rate.NewLimiter(rate.Limit(v.ClaimsPerSecond), max(v.Burst, 1))
	}
	q.cfg, q.buckets = cfg, buckets
}

func (q *quotas) get() NamespaceQuotas {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(NamespaceQuotas, len(q.cfg))
	for ns, v := range q.cfg {
		out[ns] = v
	}
	return out
}

func (q *quotas) of(ns string) (NamespaceQuota, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	v, ok := q.cfg[ns]
	return v, ok
}

// take spends one of ns's claim tokens; when none is left it returns how
// long until one is. A namespace without a rate always gets one.
func (q *quotas) take(ns string) (ok bool, wait time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.buckets[ns]
	if b == nil {
		return true, 0
	}
	now := q.now()
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// checkFull is the stored-intents decision: a claim that would add an
// intent (creates) to a namespace holding stored of its max is refused.
func checkFull(ns string, quota NamespaceQuota, stored int, creates bool) error {
	if quota.MaxIntents <= 0 || !creates || stored < quota.MaxIntents {
		return nil
	}
	return &QuotaError{Namespace: ns, Kind: ErrNamespaceFull, Stored: stored, Max: quota.MaxIntents}
}

// SetNamespaceQuotas puts quotas in force (nil: none), replacing the
// ones before; it may be called while the service serves (a reload).
// Quotas that do not Validate are refused and change nothing.
func (s *Service) SetNamespaceQuotas(q NamespaceQuotas) error {
	if err := q.Validate(); err != nil {
		return err
	}
	s.quotas.set(q)
	return nil
}

// NamespaceQuota returns namespace ns's quota, and whether it has one.
func (s *Service) NamespaceQuota(ns string) (NamespaceQuota, bool) { return s.quotas.of(ns) }

// NamespaceQuotas returns the quotas in force (a copy).
func (s *Service) NamespaceQuotas() NamespaceQuotas { return s.quotas.get() }

// NamespaceUsage reads what namespace ns holds (fsm.Machine.NamespaceUsage)
// at consistency c.
func (s *Service) NamespaceUsage(ctx context.Context, ns string, c Consistency) (fsm.Usage, error) {
	ns, err := s.namespace(ns)
	if err != nil {
		return fsm.Usage{}, err
	}
	var u fsm.Usage
	err = s.r.Read(ctx, c, func(l *fsm.Machine) { u = l.NamespaceUsage(ns) })
	return u, err
}

// UsageByNamespace reads what every namespace holding an intent holds,
// from this node's copy (a stale read: for metrics).
func (s *Service) UsageByNamespace(ctx context.Context) (map[string]fsm.Usage, error) {
	var out map[string]fsm.Usage
	err := s.r.Read(ctx, Stale, func(l *fsm.Machine) {
		names := l.Namespaces()
		out = make(map[string]fsm.Usage, len(names))
		for _, ns := range names {
			out[ns] = l.NamespaceUsage(ns)
		}
	})
	return out, err
}

// checkQuota refuses claim when its namespace is over a quota: its claims
// per second (a token of its bucket), or its stored intents when the
// claim would add one. It decides on the leader, against the leader's
// state before proposing: the stored count can be passed by at most the
// claims of new keys in flight (proposed, not applied) when it is read.
// A follower sends a claim of a namespace with a quota to the leader
// (a *NotLeaderError with the leader's address, when the request may be
// forwarded); a claim it cannot forward is proposed unchecked.
func (s *Service) checkQuota(ctx context.Context, c *fsm.Claim) error {
	quota, ok := s.quotas.of(c.Namespace)
	if !ok {
		return nil
	}
	if s.quotas.leading != nil && !s.quotas.leading() {
		if ctx.Value(mayForwardKey{}) == nil {
			return nil
		}
		// On a follower a linearizable read fails at once with the
		// leader's address (no round trip).
		err := s.r.Read(ctx, Linearizable, func(*fsm.Machine) {})
		var nl *NotLeaderError
		if errors.As(err, &nl) && nl.LeaderHTTP != "" {
			return nl
		}
		return nil
	}
	if ok, wait := s.quotas.take(c.Namespace); !ok {
		return &QuotaError{Namespace: c.Namespace, Kind: ErrNamespaceRateLimited, RetryAfter: wait}
	}
	if quota.MaxIntents <= 0 {
		return nil
	}
	var stored int
	var creates bool
	if err := s.r.Read(ctx, Stale, func(l *fsm.Machine) {
		stored, creates = l.NamespaceIntents(c.Namespace), l.Get(c.Namespace, c.Key) == nil
	}); err != nil {
		return err
	}
	return checkFull(c.Namespace, quota, stored, creates)
}
