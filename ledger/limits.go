package ledger

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/intentledger/intentd/fsm"
)

// Limits bound what a request may carry. Zero fields take the defaults.
type Limits struct {
	MaxKeyBytes     int
	MaxNameBytes    int // tool, owner, policy, actor
	MaxReasonBytes  int
	MaxPayloadBytes int
	MaxResultBytes  int
	MinLease        time.Duration
	MaxLease        time.Duration
	DefaultLease    time.Duration
	DedupeWindow    time.Duration
	MaxListLimit    int
	// MaxWaiters bounds the long-polls (Service.Wait, WaitAudit) waiting
	// on this node at once, MaxWaitersPerKey those waiting on one
	// (namespace, key), and MaxWaitersPerCaller those of one caller (an
	// API key, named by WithWaitCaller) across every key, so that one key
	// cannot hold all of the node's slots: a long-poll that would have to
	// wait past any of them is refused with ErrTooManyWaiters.
	MaxWaiters          int
	MaxWaitersPerKey    int
	MaxWaitersPerCaller int
}

// DefaultLimits are the limits used when a field is zero.
var DefaultLimits = Limits{
	MaxKeyBytes:     256,
	MaxNameBytes:    256,
	MaxReasonBytes:  1024,
	MaxPayloadBytes: 64 << 10,
	MaxResultBytes:  64 << 10,
	MinLease:        100 * time.Millisecond,
	MaxLease:        time.Hour,
	DefaultLease:    30 * time.Second,
	DedupeWindow:    24 * time.Hour,
	MaxListLimit:    1000,

	MaxWaiters:          4096,
	MaxWaitersPerKey:    64,
	MaxWaitersPerCaller: 256,
}

// Validate refuses limits the ledger cannot honour: a payload or result
// larger than the state machine stores (fsm.MaxBlobBytes).
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"payload", l.MaxPayloadBytes}, {"result", l.MaxResultBytes}} {
		if f.v > fsm.MaxBlobBytes {
			return fmt.Errorf("largest %s %d is over the ledger's limit of %d", f.name, f.v, fsm.MaxBlobBytes)
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"maximum lease", l.MaxLease}, {"default lease", l.DefaultLease}, {"dedupe window", l.DedupeWindow}} {
		if f.d.Milliseconds() > fsm.MaxWindowMS {
			return fmt.Errorf("%s %v is over the ledger's limit of %d ms", f.name, f.d, fsm.MaxWindowMS)
		}
	}
	return nil
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pickD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&l.MaxKeyBytes, d.MaxKeyBytes)
	pick(&l.MaxNameBytes, d.MaxNameBytes)
	pick(&l.MaxReasonBytes, d.MaxReasonBytes)
	pick(&l.MaxPayloadBytes, d.MaxPayloadBytes)
	pick(&l.MaxResultBytes, d.MaxResultBytes)
	pick(&l.MaxListLimit, d.MaxListLimit)
	pick(&l.MaxWaiters, d.MaxWaiters)
	pick(&l.MaxWaitersPerKey, d.MaxWaitersPerKey)
	pick(&l.MaxWaitersPerCaller, d.MaxWaitersPerCaller)
	pickD(&l.MinLease, d.MinLease)
	pickD(&l.MaxLease, d.MaxLease)
	pickD(&l.DefaultLease, d.DefaultLease)
	pickD(&l.DedupeWindow, d.DedupeWindow)
	// Leases travel in whole milliseconds: a shorter one would reach the
	// state machine as zero and be refused there, after being written.
	if l.MinLease < time.Millisecond {
		l.MinLease = time.Millisecond
	}
	return l
}

// printable reports whether s is valid UTF-8 made only of printable
// characters (letters, marks, numbers, punctuation, symbols, ASCII space).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func (l Limits) key(key string) error {
	switch {
	case key == "":
		return badField(ErrBadRequest, "key", "is required (in the body or the Idempotency-Key header)")
	case len(key) > l.MaxKeyBytes:
		return badField(ErrBadRequest, "key", "%d bytes is over the limit of %d", len(key), l.MaxKeyBytes)
	case !printable(key):
		return badField(ErrBadRequest, "key", "must be printable UTF-8")
	}
	return nil
}

func (l Limits) name(field, v string, required bool) error {
	switch {
	case v == "" && required:
		return badField(ErrBadRequest, field, "is required")
	case len(v) > l.MaxNameBytes:
		return badField(ErrBadRequest, field, "%d bytes is over the limit of %d", len(v), l.MaxNameBytes)
	case !printable(v):
		return badField(ErrBadRequest, field, "must be printable UTF-8")
	}
	return nil
}

func (l Limits) lease(d time.Duration) (time.Duration, error) {
	if d == 0 {
		return l.DefaultLease, nil
	}
	if d < l.MinLease || d > l.MaxLease {
		return 0, badField(ErrUnprocessable, "lease_ms", "%d ms is outside %d..%d ms", d.Milliseconds(),
			l.MinLease.Milliseconds(), l.MaxLease.Milliseconds())
	}
	return d, nil
}

func (l Limits) result(o fsm.Outcome, result json.RawMessage) (json.RawMessage, error) {
	if !o.Valid() {
		return nil, badField(ErrUnprocessable, "outcome", "must be %q or %q, not %q", fsm.OutcomeExecuted, fsm.OutcomeFailed, o)
	}
	if len(result) > l.MaxResultBytes {
		return nil, badField(ErrTooLarge, "result", "%d bytes is over the limit of %d", len(result), l.MaxResultBytes)
	}
	if len(result) == 0 {
		return nil, nil
	}
	if !json.Valid(result) {
		return nil, badField(ErrBadRequest, "result", "is not valid JSON")
	}
	return result, nil
}
