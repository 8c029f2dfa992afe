package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/intentledger/intentd/fsm"
)

// waitKey is what a long-poll waits on.
type waitKey struct{ ns, key string }

// waiter is one long-poll's registration.
type waiter struct {
	k   waitKey
	pos int // index in its key's slice
	// caller names who waits (WithWaitCaller); "" for none.
	caller string
	// ch is closed at the key's next change, then set to nil until the
	// long-poll arms again. Guarded by the registry's mu.
	ch chan struct{}
}

// waiters is a Service's registry of long-polls by (namespace, key), the
// empty key standing for a namespace-wide one (WaitAudit). The
// replicator tells it which keys an apply changed (it is the Service's
// ChangeSink) and only the long-polls of those keys wake. It bounds how many
// long-polls wait on the node, on one key and for one caller.
type waiters struct {
	maxTotal, maxPerKey, maxPerCaller int
	// done is closed by close: every long-poll answers with what it has.
	done chan struct{}

	mu    sync.Mutex
	byKey map[waitKey][]*waiter
	// byCaller counts the registrations of each named caller; a caller
	// with none has no entry, so the map holds at most maxTotal entries.
	byCaller map[string]int
	closed   bool
	// total counts registrations; changed under mu, read without it so
	// that an apply with nobody waiting costs one atomic load.
	total atomic.Int64
}

func newWaiters(maxTotal, maxPerKey, maxPerCaller int) *waiters {
	return &waiters{maxTotal: maxTotal, maxPerKey: maxPerKey, maxPerCaller: maxPerCaller, done: make(chan struct{}),
		byKey: map[waitKey][]*waiter{}, byCaller: map[string]int{}}
}

// waitCallerKey is the context key of WithWaitCaller.
type waitCallerKey struct{}

// WithWaitCaller returns ctx naming caller as who a long-poll (Wait,
// WaitAudit) made with it waits for: the API key's name, or the client's
// address with auth off. Long-polls of one caller hold at most
// Limits.MaxWaitersPerCaller of the node's slots at once, so that one key
// cannot take them all and starve the others. A long-poll whose context
// names no caller (or the empty one) is bounded only per node and per key.
func WithWaitCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, waitCallerKey{}, caller)
}

// waitCaller is the caller WithWaitCaller put in ctx; "" for none.
func waitCaller(ctx context.Context) string {
	caller, _ := ctx.Value(waitCallerKey{}).(string)
	return caller
}

// add registers a long-poll of caller ("" for none) on (ns, key) and
// returns it with the channel closed at the key's next change. Register
// before reading: a change applied after the read then closes the
// channel. A cap reached (the node's, the key's or the caller's) is
// ErrTooManyWaiters. After close nothing is registered (nil, nil, nil):
// the poll answers with its first read.
func (r *waiters) add(ns, key, caller string) (*waiter, <-chan struct{}, error) {
	k := waitKey{ns: ns, key: key}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, nil
	}
	// The caller's cap first: a caller at its own cap is told so, not that
	// the node is full because of it.
	if caller != "" && r.byCaller[caller] >= r.maxPerCaller {
		return nil, nil, fmt.Errorf("%w: %d long-polls of this caller already wait on this node", ErrTooManyWaiters, r.maxPerCaller)
	}
	if int(r.total.Load()) >= r.maxTotal {
		return nil, nil, fmt.Errorf("%w: %d long-polls already wait on this node", ErrTooManyWaiters, r.maxTotal)
	}
	list := r.byKey[k]
	if len(list) >= r.maxPerKey {
		if key == namespaceWide {
			return nil, nil, fmt.Errorf("%w: %d long-polls already wait on namespace %q", ErrTooManyWaiters, r.maxPerKey, ns)
		}
		return nil, nil, fmt.Errorf("%w: %d long-polls already wait on key %q", ErrTooManyWaiters, r.maxPerKey, key)
	}
	w := &waiter{k: k, pos: len(list), caller: caller, ch: make(chan struct{})}
	r.byKey[k] = append(list, w)
	if caller != "" {
		r.byCaller[caller]++
	}
	r.total.Add(1)
	return w, w.ch, nil
}

// arm returns the channel closed at w's key's next change, made anew if the
// last one was closed. Arm before reading again.
func (r *waiters) arm(w *waiter) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// remove frees w's slot.
func (r *waiters) remove(w *waiter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.byKey[w.k]
	if w.pos >= len(list) || list[w.pos] != w {
		return // not registered (removed twice)
	}
	last := len(list) - 1
	list[w.pos] = list[last]
	list[w.pos].pos = w.pos
	list[last] = nil
	if last == 0 {
		delete(r.byKey, w.k)
	} else {
		r.byKey[w.k] = list[:last]
	}
	if w.caller != "" {
		if n := r.byCaller[w.caller] - 1; n > 0 {
			r.byCaller[w.caller] = n
		} else {
			delete(r.byCaller, w.caller)
		}
	}
	r.total.Add(-1)
}

// wake closes w's channel if it is armed. Call with mu held.
func wake(w *waiter) {
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// KeysChanged implements ChangeSink: it wakes the long-polls of keys.
func (r *waiters) KeysChanged(keys []fsm.Ref) {
	if r.total.Load() == 0 || len(keys) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ref := range keys {
		for _, w := range r.byKey[waitKey{ns: ref.Namespace, key: ref.Key}] {
			wake(w)
		}
		// A namespace-wide long-poll (WaitAudit) wakes for any of its keys.
		for _, w := range r.byKey[waitKey{ns: ref.Namespace, key: namespaceWide}] {
			wake(w)
		}
	}
}

// AllChanged implements ChangeSink: it wakes every long-poll.
func (r *waiters) AllChanged() {
	if r.total.Load() == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, list := range r.byKey {
		for _, w := range list {
			wake(w)
		}
	}
}

// close makes every long-poll, waiting or to come, answer at once.
func (r *waiters) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.done)
	}
}

// len is the number of registered long-polls.
func (r *waiters) len() int { return int(r.total.Load()) }
