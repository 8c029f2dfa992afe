package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// applier applies one command at one index and time.
type applier struct {
	l     *Ledger
	index uint64
	now   int64
}

// begin returns the stored intent and a private copy to change (both nil
// when absent). A declared intent whose lease has passed at the command's
// time becomes in_doubt in the copy first: the lazy half of lease expiry.
func (a *applier) begin(ns, key string) (orig, w *Intent) {
	orig = a.l.Get(ns, key)
	if orig == nil {
		return nil, nil
	}
	cp := *orig
	w = &cp
	a.expireLease(w)
	return orig, w
}

// expireLease moves w to in_doubt if it is declared and its lease passed.
func (a *applier) expireLease(w *Intent) bool {
	if w.State != StateDeclared || a.now <= w.LeaseDeadline {
		return false
	}
	w.State = StateInDoubt
	w.UpdatedAt = a.now
	a.event(w, AuditEvent{Op: "expire", Status: StatusExpired, Owner: w.Owner, FencingToken: w.FencingToken,
		Reason: "lease passed without a report"})
	return true
}

func (a *applier) save(orig, w *Intent) {
	w.Version = a.index
	a.l.put(orig, w)
}

func (a *applier) event(w *Intent, ev AuditEvent) {
	ev.Index, ev.At, ev.State = a.index, a.now, w.State
	keep := w.Audit
	if len(keep) >= MaxAuditEvents {
		drop := len(keep) - MaxAuditEvents + 1
		keep = keep[drop:]
		w.AuditDropped += uint64(drop)
	}
	audit := make([]AuditEvent, len(keep), len(keep)+1)
	copy(audit, keep)
	w.Audit = append(audit, ev)
}

// refuse records a refused attempt on w and answers with status.
func (a *applier) refuse(orig, w *Intent, status Status, ev AuditEvent, format string, args ...any) *Result {
	ev.Status = status
	a.event(w, ev)
	a.save(orig, w)
	return &Result{Status: status, Intent: w, Detail: fmt.Sprintf(format, args...)}
}

// unchanged answers without writing anything, except a pending lazy expiry.
func (a *applier) unchanged(orig, w *Intent, status Status) *Result {
	if w.State != orig.State {
		a.save(orig, w)
		return &Result{Status: status, Intent: w}
	}
	return &Result{Status: status, Intent: orig}
}

// transition moves w to state to, records the accepted attempt and answers
// ok.
func (a *applier) transition(orig, w *Intent, to State, attempt AuditEvent) *Result {
	w.State = to
	w.UpdatedAt = a.now
	attempt.Status = StatusOK
	a.event(w, attempt)
	a.save(orig, w)
	return &Result{Status: StatusOK, Intent: w}
}

func notFound(ns, key string) *Result {
	return &Result{Status: StatusNotFound, Detail: fmt.Sprintf("no intent %q in namespace %q", key, ns)}
}

func (a *applier) grant(w *Intent, c *Claim) {
	w.State = StateDeclared
	w.Owner = c.Owner
	w.FencingToken = a.index
	w.Generation++
	w.LeaseMS = c.LeaseMS
	w.LeaseDeadline = a.now + c.LeaseMS*1e6
	w.Result = nil
	w.Policy = c.Policy
	w.DedupeWindowMS = c.DedupeWindowMS
	w.UpdatedAt = a.now
	a.event(w, AuditEvent{Op: "claim", Status: StatusGranted, Owner: c.Owner, Fingerprint: c.Fingerprint,
		FencingToken: a.index})
}

func (a *applier) claim(c *Claim) *Result {
	payload, err := compactJSON(c.Payload)
	if err != nil || c.LeaseMS <= 0 || c.Owner == "" {
		return &Result{Status: StatusMalformed, Detail: "claim needs a JSON payload, an owner and a positive lease"}
	}
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		w = &Intent{
			Namespace: c.Namespace, Key: c.Key, Tool: c.Tool, Fingerprint: c.Fingerprint, Payload: payload,
			Policy: c.Policy, DedupeWindowMS: c.DedupeWindowMS, RequireApproval: c.RequireApproval,
			CreatedAt: a.now, UpdatedAt: a.now,
		}
		if c.RequireApproval {
			w.State = StatePendingApproval
			a.event(w, AuditEvent{Op: "claim", Status: StatusPendingApproval, Owner: c.Owner, Fingerprint: c.Fingerprint})
			a.save(nil, w)
			return &Result{Status: StatusPendingApproval, Intent: w}
		}
		a.grant(w, c)
		a.save(nil, w)
		return &Result{Status: StatusGranted, Intent: w, Created: true}
	}
	attempt := AuditEvent{Op: "claim", Owner: c.Owner, Fingerprint: c.Fingerprint}
	if w.Fingerprint != c.Fingerprint {
		w.Divergent++
		r := a.refuse(orig, w, StatusDivergent, attempt,
			"key %q was claimed with fingerprint %s; this claim has fingerprint %s", c.Key, w.Fingerprint, c.Fingerprint)
		r.Fingerprint = c.Fingerprint
		return r
	}
	switch w.State {
	case StateDeclared:
		if w.Owner == c.Owner {
			// The owner's first answer may have been lost: same grant again.
			attempt.Status, attempt.FencingToken, attempt.Reason = StatusGranted, w.FencingToken, "repeated by owner"
			a.event(w, attempt)
			a.save(orig, w)
			return &Result{Status: StatusGranted, Intent: w}
		}
		return a.refuse(orig, w, StatusInFlight, attempt, "owner %q holds the lease", w.Owner)
	case StateExecuted, StateCommitted:
		w.Duplicates++
		attempt.Status = StatusDuplicate
		a.event(w, attempt)
		a.save(orig, w)
		return &Result{Status: StatusDuplicate, Intent: w}
	case StateFailed, StateApproved:
		a.grant(w, c)
		a.save(orig, w)
		return &Result{Status: StatusGranted, Intent: w, Created: true}
	case StateInDoubt:
		return a.refuse(orig, w, StatusInDoubt, attempt,
			"the lease of owner %q passed without a report; resolve the intent after checking the tool", w.Owner)
	case StatePendingApproval:
		attempt.Status = StatusPendingApproval
		a.event(w, attempt)
		a.save(orig, w)
		return &Result{Status: StatusPendingApproval, Intent: w}
	case StateRejected:
		return a.refuse(orig, w, StatusRejected, attempt, "the intent was rejected")
	}
	panic(fmt.Sprintf("fsm: claim on unknown state %q", w.State))
}

// compactJSON returns raw without insignificant whitespace, so a value
// reads back byte-identical from a snapshot; nil stays nil.
func compactJSON(raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func sameReport(w *Intent, o Outcome, result []byte) bool {
	st := w.State
	if st == StateCommitted {
		st = StateExecuted
	}
	return st == o.state() && bytes.Equal(w.Result, result)
}

func (a *applier) complete(c *Complete) *Result {
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		return notFound(c.Namespace, c.Key)
	}
	attempt := AuditEvent{Op: "complete", Owner: c.Owner, FencingToken: c.FencingToken, Outcome: c.Outcome}
	if !c.Outcome.Valid() {
		return a.unchangedMalformed(orig, w, fmt.Sprintf("outcome %q is not executed or failed", c.Outcome))
	}
	result, err := compactJSON(c.Result)
	if err != nil {
		return a.unchangedMalformed(orig, w, "result is not JSON: "+err.Error())
	}
	if w.Owner != c.Owner || w.FencingToken != c.FencingToken {
		return a.refuse(orig, w, StatusFenced, attempt,
			"the current grant is fencing token %d of owner %q", w.FencingToken, w.Owner)
	}
	switch w.State {
	case StateDeclared, StateInDoubt:
		if w.State == StateInDoubt {
			attempt.Reason = "late report after the lease passed"
		}
		w.Result = result
		return a.transition(orig, w, c.Outcome.state(), attempt)
	case StateExecuted, StateFailed, StateCommitted:
		if sameReport(w, c.Outcome, result) {
			return a.unchanged(orig, w, StatusOK)
		}
		return a.refuse(orig, w, StatusInvalidState, attempt,
			"already completed as %s with a different result", w.State)
	}
	return a.refuse(orig, w, StatusInvalidState, attempt, "cannot complete an intent in state %s", w.State)
}

func (a *applier) unchangedMalformed(orig, w *Intent, detail string) *Result {
	r := a.unchanged(orig, w, StatusMalformed)
	r.Detail = detail
	return r
}

func (a *applier) renew(c *Renew) *Result {
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		return notFound(c.Namespace, c.Key)
	}
	attempt := AuditEvent{Op: "renew", Owner: c.Owner, FencingToken: c.FencingToken}
	if c.LeaseMS <= 0 {
		return a.unchangedMalformed(orig, w, "lease_ms must be positive")
	}
	if w.Owner != c.Owner || w.FencingToken != c.FencingToken {
		return a.refuse(orig, w, StatusFenced, attempt,
			"the current grant is fencing token %d of owner %q", w.FencingToken, w.Owner)
	}
	switch w.State {
	case StateDeclared:
		w.LeaseMS = c.LeaseMS
		w.LeaseDeadline = a.now + c.LeaseMS*1e6
		attempt.Status = StatusOK
		a.event(w, attempt)
		a.save(orig, w)
		return &Result{Status: StatusOK, Intent: w}
	case StateInDoubt:
		return a.refuse(orig, w, StatusInDoubt, attempt, "the lease already passed; report the outcome with complete")
	}
	return a.refuse(orig, w, StatusInvalidState, attempt, "cannot renew an intent in state %s", w.State)
}

func (a *applier) commit(c *Commit) *Result {
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		return notFound(c.Namespace, c.Key)
	}
	attempt := AuditEvent{Op: "commit", Owner: c.Owner}
	if w.Owner != c.Owner {
		return a.refuse(orig, w, StatusFenced, attempt, "the intent belongs to owner %q", w.Owner)
	}
	switch w.State {
	case StateExecuted:
		return a.transition(orig, w, StateCommitted, attempt)
	case StateCommitted:
		return a.unchanged(orig, w, StatusOK)
	}
	return a.refuse(orig, w, StatusInvalidState, attempt, "only an executed intent can be committed; it is %s", w.State)
}

func (a *applier) resolve(c *Resolve) *Result {
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		return notFound(c.Namespace, c.Key)
	}
	attempt := AuditEvent{Op: "resolve", Actor: c.Actor, Outcome: c.Outcome, Reason: c.Reason}
	if !c.Outcome.Valid() {
		return a.unchangedMalformed(orig, w, fmt.Sprintf("outcome %q is not executed or failed", c.Outcome))
	}
	result, err := compactJSON(c.Result)
	if err != nil {
		return a.unchangedMalformed(orig, w, "result is not JSON: "+err.Error())
	}
	switch w.State {
	case StateInDoubt:
		w.Result = result
		return a.transition(orig, w, c.Outcome.state(), attempt)
	case StateExecuted, StateFailed, StateCommitted:
		if sameReport(w, c.Outcome, result) {
			return a.unchanged(orig, w, StatusOK)
		}
	}
	return a.refuse(orig, w, StatusInvalidState, attempt, "only an in_doubt intent can be resolved; it is %s", w.State)
}

func (a *applier) decide(ns, key, actor, reason, op string, to State) *Result {
	orig, w := a.begin(ns, key)
	if w == nil {
		return notFound(ns, key)
	}
	attempt := AuditEvent{Op: op, Actor: actor, Reason: reason}
	switch w.State {
	case StatePendingApproval:
		return a.transition(orig, w, to, attempt)
	case to:
		return a.unchanged(orig, w, StatusOK)
	}
	return a.refuse(orig, w, StatusNotPending, attempt, "the intent is %s, not pending_approval", w.State)
}

func (a *applier) expire(c *Expire) *Result {
	n := 0
	for _, ref := range c.Keys {
		orig := a.l.Get(ref.Namespace, ref.Key)
		if orig == nil {
			continue
		}
		w := *orig
		if a.expireLease(&w) {
			a.save(orig, &w)
			n++
		}
	}
	return &Result{Status: StatusOK, Count: n}
}

func (a *applier) purge(c *Purge) *Result {
	n := 0
	for _, ref := range c.Keys {
		orig := a.l.Get(ref.Namespace, ref.Key)
		if orig == nil || !orig.State.Finished() || a.now < orig.purgeAt() {
			continue
		}
		a.l.put(orig, nil)
		n++
	}
	return &Result{Status: StatusOK, Count: n}
}
