package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxPrincipalBytes bounds the principal a claim binds an intent to (API
// key names are at most 64 bytes). Apply refuses a longer one, and so does
// Restore.
const MaxPrincipalBytes = 256

// principalOK reports whether p is a principal apply records.
func principalOK(p string) bool { return len(p) <= MaxPrincipalBytes && utf8.ValidString(p) }

// mayHold reports whether a caller (its principal, and whether its roles
// let it settle others' grants) may act on w's grant: the grant is bound
// to no key, or to the caller's, or the caller may settle any. A caller
// that names no key (development mode, where the service knows no keys)
// is checked by owner and fencing token only.
func mayHold(w *Intent, principal string, override bool) bool {
	return w.Principal == "" || principal == "" || override || principal == w.Principal
}

// notHolder refuses an attempt on w's grant by another key; the audit
// event names the key that tried.
func (a *applier) notHolder(orig *record, w *Intent, attempt AuditEvent, principal string) *Result {
	attempt.Actor = principal
	return a.refuse(orig, w, StatusNotGrantHolder, attempt,
		"the grant is bound to API key %q; key %q may not act on it", w.Principal, principal)
}

// settledBy names, in an accepted attempt on w's grant, a caller other
// than the key the grant is bound to (a reconciler's report).
func settledBy(w *Intent, attempt *AuditEvent, principal string) {
	if principal != "" && principal != w.Principal {
		attempt.Actor = principal
	}
}

// applier applies one command at one index and time.
type applier struct {
	l     *Machine
	index uint64
	now   int64
}

// begin returns the stored record and the intent it holds, as a private
// copy to change (both nil when absent). A declared intent whose lease has
// passed at the command's time becomes in_doubt in the copy first: the
// lazy half of lease expiry.
func (a *applier) begin(ns, key string) (orig *record, w *Intent) {
	orig = a.l.get(ns, key)
	if orig == nil {
		return nil, nil
	}
	w = orig.intent()
	a.expireLease(w)
	return orig, w
}

// leasePassed reports whether an intent in state with that lease deadline
// is a declared grant whose lease has passed at now.
func leasePassed(state State, deadline, now int64) bool {
	return state == StateDeclared && now > deadline
}

// expireLease moves w to in_doubt if it is declared and its lease passed.
func (a *applier) expireLease(w *Intent) bool {
	if !leasePassed(w.State, w.LeaseDeadline, a.now) {
		return false
	}
	w.State = StateInDoubt
	w.UpdatedAt = a.now
	a.event(w, AuditEvent{Op: "expire", Status: StatusExpired, Owner: w.Owner, FencingToken: w.FencingToken,
		Reason: "lease passed without a report"})
	return true
}

// save stores w in place of orig (nil for a new key).
func (a *applier) save(orig *record, w *Intent) {
	w.Version = a.index
	r, err := compact(w)
	if err != nil {
		panic(fmt.Sprintf("fsm: %v", err)) // the transitions only make known states
	}
	a.l.put(orig, r)
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
	a.l.appendChain(w.Namespace, w.Key, ev)
}

// refuse records a refused attempt on w and answers with status.
func (a *applier) refuse(orig *record, w *Intent, status Status, ev AuditEvent, format string, args ...any) *Result {
	ev.Status = status
	a.event(w, ev)
	a.save(orig, w)
	return &Result{Status: status, Intent: w, Detail: fmt.Sprintf(format, args...)}
}

// unchanged answers without writing anything, except a pending lazy expiry.
func (a *applier) unchanged(orig *record, w *Intent, status Status) *Result {
	if w.State != orig.state.State() {
		a.save(orig, w)
	}
	return &Result{Status: status, Intent: w}
}

// transition moves w to state to, records the accepted attempt and answers
// ok.
func (a *applier) transition(orig *record, w *Intent, to State, attempt AuditEvent) *Result {
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

// grant makes w a declared grant of c under policy pol.
func (a *applier) grant(w *Intent, c *Claim, pol *Policy, leaseMS int64) {
	w.State = StateDeclared
	w.Owner = c.Owner
	w.Principal = c.Principal
	w.FencingToken = a.index
	w.Generation++
	w.LeaseMS = leaseMS
	w.LeaseDeadline = a.now + leaseMS*1e6
	w.Result = nil
	a.decideUnder(w, c, pol)
	w.GrantedAt = a.now
	w.TokenKey = ""
	if n := len(a.l.keys); n > 0 {
		w.TokenKey = a.l.keys[n-1].ID
	}
	w.UpdatedAt = a.now
	a.event(w, AuditEvent{Op: "claim", Status: StatusGranted, Owner: c.Owner, Fingerprint: c.Fingerprint,
		FencingToken: a.index})
}

// decideUnder records the policy a decision on w is made under.
func (a *applier) decideUnder(w *Intent, c *Claim, pol *Policy) {
	w.Policy, w.PolicyVersion = pol.Name, pol.Version
	w.DedupeWindowMS = a.l.effective(pol, func(p *Policy) int64 { return p.DedupeWindowMS }, c.DedupeWindowMS)
	w.TokenTTLMS = a.l.effective(pol, func(p *Policy) int64 { return p.TokenTTLMS }, DefaultTokenTTLMS)
}

// windowOK reports whether ms (a lease or dedupe window, 0 meaning the
// default) is one a snapshot can hold.
func windowOK(ms int64) bool { return ms >= 0 && ms <= MaxWindowMS }

// claimGate is what a claim that would start a new grant or approval
// needs from its policy: the policy, and the lease a grant gets.
type claimGate struct {
	pol     *Policy
	leaseMS int64
}

func (a *applier) claim(c *Claim) *Result {
	payload, err := compactJSON(c.Payload)
	if err != nil || c.Owner == "" || !windowOK(c.LeaseMS) || !windowOK(c.DefaultLeaseMS) || !windowOK(c.DedupeWindowMS) ||
		!principalOK(c.Principal) {
		return &Result{Status: StatusMalformed, Detail: fmt.Sprintf(
			"claim needs a JSON payload, an owner, a lease and dedupe window of 0..%d ms and a principal of 0..%d bytes of UTF-8",
			MaxWindowMS, MaxPrincipalBytes)}
	}
	pol, err := a.l.policyFor(c.Policy, c.Tool)
	if err != nil {
		return &Result{Status: StatusUnknownPolicy, Detail: err.Error()}
	}
	if limit := a.l.effective(pol, func(p *Policy) int64 { return int64(p.MaxPayloadBytes) }, 0); limit > 0 && int64(len(payload)) > limit {
		return &Result{Status: StatusTooLarge, Detail: fmt.Sprintf("the payload's %d bytes are over policy %s's limit of %d", len(payload), pol.Name, limit)}
	}
	leaseMS := c.LeaseMS
	if leaseMS == 0 {
		leaseMS = a.l.effective(pol, func(p *Policy) int64 { return p.LeaseMS }, c.DefaultLeaseMS)
	}
	if leaseMS <= 0 {
		return &Result{Status: StatusMalformed, Detail: "claim has no lease and no policy or default sets one"}
	}
	blocked := func(orig *record, w *Intent) *Result {
		ev := AuditEvent{Op: "claim", Status: StatusBlocked, Owner: c.Owner, Fingerprint: c.Fingerprint,
			Reason: fmt.Sprintf("policy %s version %d blocks tool %s", pol.Name, pol.Version, c.Tool)}
		if w == nil {
			// Nothing to record it on: the namespace's audit log has it.
			ev.Index, ev.At = a.index, a.now
			a.l.appendChain(c.Namespace, c.Key, ev)
			return &Result{Status: StatusBlocked, Detail: ev.Reason}
		}
		return a.refuse(orig, w, StatusBlocked, ev, "%s", ev.Reason)
	}
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		if pol.Blocked {
			return blocked(nil, nil)
		}
		w = &Intent{
			Namespace: c.Namespace, Key: c.Key, Tool: c.Tool, Fingerprint: c.Fingerprint, Payload: payload,
			Principal: c.Principal, CreatedAt: a.now, UpdatedAt: a.now,
		}
		if c.RequireApproval || pol.RequireApproval {
			w.State = StatePendingApproval
			w.RequireApproval = true
			w.ApprovalsRequired = max(pol.approvalsRequired(), 1)
			w.Approvers = pol.Approvers
			a.decideUnder(w, c, pol)
			a.event(w, AuditEvent{Op: "claim", Status: StatusPendingApproval, Owner: c.Owner, Fingerprint: c.Fingerprint,
				Reason: fmt.Sprintf("policy %s version %d requires %d approval(s)", pol.Name, pol.Version, w.ApprovalsRequired)})
			a.save(nil, w)
			return &Result{Status: StatusPendingApproval, Intent: w}
		}
		a.grant(w, c, pol, leaseMS)
		a.save(nil, w)
		return &Result{Status: StatusGranted, Intent: w, Created: true}
	}
	attempt := AuditEvent{Op: "claim", Owner: c.Owner, Fingerprint: c.Fingerprint}
	if w.Fingerprint != c.Fingerprint {
		w.Divergent++
		r := a.refuse(orig, w, StatusDivergent, attempt, "%s", divergentDetail(c.Key, w.Fingerprint, c.Fingerprint))
		r.Fingerprint = c.Fingerprint
		return r
	}
	switch w.State {
	case StateDeclared:
		if w.Owner == c.Owner {
			if !mayHold(w, c.Principal, false) {
				// The answer carries the grant's execution token: another
				// key that names the owner (a reader sees it) gets nothing.
				return a.notHolder(orig, w, attempt, c.Principal)
			}
			// The owner's first answer may have been lost: same grant again.
			attempt.Status, attempt.FencingToken, attempt.Reason = StatusGranted, w.FencingToken, "repeated by owner"
			a.event(w, attempt)
			a.save(orig, w)
			return &Result{Status: StatusGranted, Intent: w}
		}
		return a.refuse(orig, w, StatusInFlight, attempt, "%s", inFlightDetail(w))
	case StateExecuted, StateCommitted:
		w.Duplicates++
		attempt.Status = StatusDuplicate
		a.event(w, attempt)
		a.save(orig, w)
		return &Result{Status: StatusDuplicate, Intent: w}
	case StateFailed, StateApproved:
		if pol.Blocked {
			return blocked(orig, w)
		}
		if w.State == StateApproved && !mayHold(w, c.Principal, false) {
			// The approvers approved this key's request: another key with
			// the same payload may not redeem their approval.
			return a.notHolder(orig, w, attempt, c.Principal)
		}
		a.grant(w, c, pol, leaseMS)
		a.save(orig, w)
		return &Result{Status: StatusGranted, Intent: w, Created: true}
	case StateInDoubt:
		return a.refuse(orig, w, StatusInDoubt, attempt, "%s", inDoubtDetail(w))
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
	if bytes.IndexAny(raw, " \t\r\n") < 0 && json.Valid(raw) {
		// No whitespace at all: already compact (the canonical payloads
		// the service proposes mostly are).
		return raw, nil
	}
	b := bytes.NewBuffer(make([]byte, 0, len(raw))) // never grows: compacting only removes
	if err := json.Compact(b, raw); err != nil {
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
	if !mayHold(w, c.Principal, c.Override) {
		return a.notHolder(orig, w, attempt, c.Principal)
	}
	settledBy(w, &attempt, c.Principal)
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

func (a *applier) unchangedMalformed(orig *record, w *Intent, detail string) *Result {
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
	if c.LeaseMS <= 0 || !windowOK(c.LeaseMS) {
		return a.unchangedMalformed(orig, w, fmt.Sprintf("lease_ms must be 1..%d", MaxWindowMS))
	}
	if w.Owner != c.Owner || w.FencingToken != c.FencingToken {
		return a.refuse(orig, w, StatusFenced, attempt,
			"the current grant is fencing token %d of owner %q", w.FencingToken, w.Owner)
	}
	if !mayHold(w, c.Principal, c.Override) {
		return a.notHolder(orig, w, attempt, c.Principal)
	}
	settledBy(w, &attempt, c.Principal)
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
	if !mayHold(w, c.Principal, c.Override) {
		return a.notHolder(orig, w, attempt, c.Principal)
	}
	settledBy(w, &attempt, c.Principal)
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

// approve records one approval; the intent moves to approved with the
// last one required.
func (a *applier) approve(c *Approve) *Result {
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		return notFound(c.Namespace, c.Key)
	}
	attempt := AuditEvent{Op: "approve", Actor: c.Actor, Reason: c.Reason, Fingerprint: c.Fingerprint}
	if c.Actor == "" {
		return a.unchangedMalformed(orig, w, "an approval needs an actor")
	}
	approved := slices.ContainsFunc(w.Approvals, func(ap Approval) bool { return ap.Actor == c.Actor })
	if r := a.checkDecider(orig, w, attempt, c.Fingerprint, approved); r != nil {
		return r
	}
	if w.Principal != "" && c.Actor == w.Principal && !a.l.allowsSelfApproval(w.Policy) {
		// An approver's actor is its key's name: the key that claimed
		// does not vouch for its own claim.
		return a.refuse(orig, w, StatusSelfApproval, attempt,
			"%s claimed this intent and may not approve it: policy %s does not set allow_self_approval", c.Actor, w.Policy)
	}
	w.Approvals = append(slices.Clone(w.Approvals), Approval{Actor: c.Actor, At: a.now, Reason: c.Reason})
	if len(w.Approvals) >= max(w.ApprovalsRequired, 1) {
		return a.transition(orig, w, StateApproved, attempt)
	}
	attempt.Status = StatusOK
	attempt.Reason = strings.TrimSpace(fmt.Sprintf("%s [%d of %d approvals]", c.Reason, len(w.Approvals), max(w.ApprovalsRequired, 1)))
	a.event(w, attempt)
	a.save(orig, w)
	return &Result{Status: StatusOK, Intent: w}
}

// reject rejects a pending intent: one rejection is enough.
func (a *applier) reject(c *Reject) *Result {
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		return notFound(c.Namespace, c.Key)
	}
	attempt := AuditEvent{Op: "reject", Actor: c.Actor, Reason: c.Reason, Fingerprint: c.Fingerprint}
	if c.Actor == "" {
		return a.unchangedMalformed(orig, w, "a rejection needs an actor")
	}
	if w.State == StateRejected && (c.Fingerprint == "" || c.Fingerprint == w.Fingerprint) {
		return a.unchanged(orig, w, StatusOK) // a retried rejection
	}
	if r := a.checkDecider(orig, w, attempt, c.Fingerprint, false); r != nil {
		return r
	}
	return a.transition(orig, w, StateRejected, attempt)
}

// checkDecider refuses an approval or rejection that may not be recorded:
// the intent is not pending, the fingerprint the decider saw is not the
// intent's, the actor is not one of the policy's approvers, or already
// approved.
func (a *applier) checkDecider(orig *record, w *Intent, attempt AuditEvent, fp string, already bool) *Result {
	switch {
	case already && (w.State == StatePendingApproval || w.State == StateApproved):
		return a.refuse(orig, w, StatusAlreadyApproved, attempt, "%s already approved this intent", attempt.Actor)
	case w.State != StatePendingApproval:
		return a.refuse(orig, w, StatusNotPending, attempt, "the intent is %s, not pending_approval", w.State)
	case fp != "" && fp != w.Fingerprint:
		r := a.refuse(orig, w, StatusDivergent, attempt, "the decision is for fingerprint %s; the intent has %s", fp, w.Fingerprint)
		r.Fingerprint = fp
		return r
	case len(w.Approvers) > 0 && !slices.Contains(w.Approvers, attempt.Actor):
		return a.refuse(orig, w, StatusNotAnApprover, attempt, "%s is not one of the policy's approvers", attempt.Actor)
	}
	return nil
}

func (a *applier) expire(c *Expire) *Result {
	n := 0
	for _, ref := range c.Keys {
		orig := a.l.get(ref.Namespace, ref.Key)
		if orig == nil || !leasePassed(orig.state.State(), orig.leaseDeadline, a.now) {
			continue // checked on the record, before building the Intent
		}
		w := orig.intent()
		if a.expireLease(w) {
			a.save(orig, w)
			n++
		}
	}
	return &Result{Status: StatusOK, Count: n}
}

func (a *applier) purge(c *Purge) *Result {
	n := 0
	for _, ref := range c.Keys {
		orig := a.l.get(ref.Namespace, ref.Key)
		if orig == nil || !orig.state.State().Finished() || a.now < orig.purgeAt() {
			continue
		}
		a.l.put(orig, nil)
		a.l.appendChain(ref.Namespace, ref.Key, AuditEvent{Index: a.index, At: a.now, Op: "purge", Status: StatusPurged,
			State: orig.state.State(), Reason: "dedupe window passed"})
		n++
	}
	return &Result{Status: StatusOK, Count: n}
}
