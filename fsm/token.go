package fsm

// UseToken spends an execution token: the tool side's single use. The
// signature was checked before proposing; the state machine checks the
// binding to the current grant, the payload, the expiry and single use.
type UseToken struct {
	Header
	Namespace    string
	Key          string
	Owner        string
	FencingToken uint64
	// Fingerprint is the one the token binds; Presented the fingerprint
	// of the payload the tool is about to send (empty: not checked).
	Fingerprint string
	Presented   string
	// Expires is the token's expiry in Unix seconds.
	Expires int64
	Actor   string
}

// Type implements Command.
func (*UseToken) Type() CommandType { return TypeUseToken }

func (a *applier) useToken(c *UseToken) *Result {
	orig, w := a.begin(c.Namespace, c.Key)
	if w == nil {
		return notFound(c.Namespace, c.Key)
	}
	attempt := AuditEvent{Op: "token.use", Owner: c.Owner, Actor: c.Actor, FencingToken: c.FencingToken, Fingerprint: c.Presented}
	switch {
	case c.Fingerprint != w.Fingerprint:
		return a.refuse(orig, w, StatusTokenMismatch, attempt, "the token binds fingerprint %s; the intent has %s", c.Fingerprint, w.Fingerprint)
	case c.Presented != "" && c.Presented != w.Fingerprint:
		return a.refuse(orig, w, StatusTokenMismatch, attempt, "the payload's fingerprint %s is not the one the token binds (%s)", c.Presented, w.Fingerprint)
	case a.now > c.Expires*1e9:
		return a.refuse(orig, w, StatusTokenExpired, attempt, "the token expired")
	case w.TokenUsed == c.FencingToken && c.FencingToken != 0:
		return a.refuse(orig, w, StatusTokenUsed, attempt, "the token of fencing token %d was already used", c.FencingToken)
	case w.Owner != c.Owner || w.FencingToken != c.FencingToken:
		return a.refuse(orig, w, StatusFenced, attempt, "the current grant is fencing token %d of owner %q", w.FencingToken, w.Owner)
	case w.State == StateInDoubt:
		return a.refuse(orig, w, StatusInDoubt, attempt, "the grant's lease passed; the token no longer authorises the effect")
	case w.State != StateDeclared:
		return a.refuse(orig, w, StatusInvalidState, attempt, "the intent is %s; only a declared grant can use its token", w.State)
	}
	w.TokenUsed = c.FencingToken
	attempt.Status = StatusOK
	a.event(w, attempt)
	a.save(orig, w)
	return &Result{Status: StatusOK, Intent: w}
}
