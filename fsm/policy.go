package fsm

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
)

// DefaultPolicyName names the policy that always exists and applies when
// no other policy matches a claim's tool.
const DefaultPolicyName = "default"

// Built-in values of the default policy, used until an operator sets them.
const (
	DefaultTokenTTLMS = 15 * 60 * 1000
	// MaxPolicies bounds how many policies the ledger holds.
	MaxPolicies = 1000
	// MaxPolicyPatterns bounds the tool patterns of one policy.
	MaxPolicyPatterns = 64
	// MaxPolicyApprovers bounds the named approvers of one policy.
	MaxPolicyApprovers = 64
)

// Policy selects intents by tool pattern and sets how they are gated.
// Zero-valued durations and sizes defer to the default policy, and from
// there to the node's defaults carried in the claim.
type Policy struct {
	Name string `json:"name"`
	// Version is the log index of the command that last set the policy;
	// an intent records the version it was decided under.
	Version uint64 `json:"version"`
	// Tools are path.Match patterns on the claim's tool ("payments.*");
	// the default policy has none and matches whatever no other does.
	Tools []string `json:"tools,omitempty"`
	// Priority orders matching: higher first, then by name.
	Priority int `json:"priority,omitempty"`
	// DedupeWindowMS is how long a finished record blocks reuse of its key.
	DedupeWindowMS int64 `json:"dedupe_window_ms,omitempty"`
	// LeaseMS is the lease a grant gets when the claim asks for none.
	LeaseMS int64 `json:"lease_ms,omitempty"`
	// TokenTTLMS is the execution token's lifetime.
	TokenTTLMS int64 `json:"token_ttl_ms,omitempty"`
	// RequireApproval makes a new intent wait in pending_approval for
	// ApprovalsRequired distinct approvals (default 1), from Approvers
	// when that list is not empty.
	RequireApproval   bool     `json:"require_approval,omitempty"`
	ApprovalsRequired int      `json:"approvals_required,omitempty"`
	Approvers         []string `json:"approvers,omitempty"`
	// AllowSelfApproval lets the API key that claimed an intent approve
	// it (count as one of its approvals). By default it may not: an
	// approver's actor is its key's name, and a key that is both agent
	// and approver would otherwise approve its own claims. It is read
	// from the policy as it stands when an approval is applied, so
	// turning it off holds intents already pending too.
	AllowSelfApproval bool `json:"allow_self_approval,omitempty"`
	// Blocked refuses every claim the policy selects.
	Blocked bool `json:"blocked,omitempty"`
	// MaxPayloadBytes caps the canonical payload of a claim.
	MaxPayloadBytes int `json:"max_payload_bytes,omitempty"`
}

// Errors of policy validation.
var (
	ErrBadPolicy     = errors.New("invalid policy")
	ErrUnknownPolicy = errors.New("unknown policy")
)

var policyNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// Validate checks a policy an operator submits. It is called by the
// service before proposing and again at apply time, so a malformed policy
// can never enter the state.
func (p *Policy) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadPolicy, fmt.Sprintf(format, args...))
	}
	if !policyNameRE.MatchString(p.Name) {
		return bad("name %q must match %s", p.Name, policyNameRE)
	}
	if p.Name == DefaultPolicyName && len(p.Tools) > 0 {
		return bad("the default policy matches every tool no other policy matches; it takes no tool patterns")
	}
	if p.Name != DefaultPolicyName && len(p.Tools) == 0 {
		return bad("tools: at least one pattern is required")
	}
	if len(p.Tools) > MaxPolicyPatterns {
		return bad("tools: %d patterns, at most %d", len(p.Tools), MaxPolicyPatterns)
	}
	for _, t := range p.Tools {
		if t == "" || len(t) > 256 {
			return bad("tools: pattern %q must be 1..256 bytes", t)
		}
		if _, err := path.Match(t, ""); err != nil {
			return bad("tools: pattern %q: %v", t, err)
		}
	}
	const hour, year = int64(3600 * 1000), int64(366 * 24 * 3600 * 1000)
	for _, f := range []struct {
		name     string
		v, lo, h int64
	}{
		{"dedupe_window_ms", p.DedupeWindowMS, 1000, 10 * year},
		{"lease_ms", p.LeaseMS, 100, hour},
		{"token_ttl_ms", p.TokenTTLMS, 1000, 24 * hour},
	} {
		if f.v != 0 && (f.v < f.lo || f.v > f.h) {
			return bad("%s: %d is outside %d..%d", f.name, f.v, f.lo, f.h)
		}
	}
	if p.MaxPayloadBytes < 0 || p.MaxPayloadBytes > MaxBlobBytes {
		return bad("max_payload_bytes: %d is outside 0..%d", p.MaxPayloadBytes, MaxBlobBytes)
	}
	if p.ApprovalsRequired < 0 || p.ApprovalsRequired > MaxPolicyApprovers {
		return bad("approvals_required: %d is outside 0..%d", p.ApprovalsRequired, MaxPolicyApprovers)
	}
	if p.ApprovalsRequired > 0 && !p.RequireApproval {
		return bad("approvals_required is set but require_approval is not")
	}
	if p.AllowSelfApproval && !p.RequireApproval {
		return bad("allow_self_approval is set but require_approval is not")
	}
	if len(p.Approvers) > MaxPolicyApprovers {
		return bad("approvers: %d names, at most %d", len(p.Approvers), MaxPolicyApprovers)
	}
	seen := map[string]bool{}
	for _, a := range p.Approvers {
		if a == "" || len(a) > 256 {
			return bad("approvers: name %q must be 1..256 bytes", a)
		}
		if seen[a] {
			return bad("approvers: %q is listed twice", a)
		}
		seen[a] = true
	}
	if len(p.Approvers) > 0 && p.approvalsRequired() > len(p.Approvers) {
		return bad("approvals_required %d is more than the %d approvers listed", p.approvalsRequired(), len(p.Approvers))
	}
	if p.Priority < -1000 || p.Priority > 1000 {
		return bad("priority: %d is outside -1000..1000", p.Priority)
	}
	return nil
}

// approvalsRequired is N of "N of M".
func (p *Policy) approvalsRequired() int {
	if !p.RequireApproval {
		return 0
	}
	return max(p.ApprovalsRequired, 1)
}

// allowsSelfApproval reports whether the policy named name, as it stands,
// lets an intent's claimant approve it; a policy deleted since does not.
func (l *Machine) allowsSelfApproval(name string) bool {
	p := l.policy(name)
	return p != nil && p.AllowSelfApproval
}

// matches reports whether the policy selects tool.
func (p *Policy) matches(tool string) bool {
	for _, t := range p.Tools {
		if ok, _ := path.Match(t, tool); ok {
			return true
		}
	}
	return false
}

// defaultPolicy is the default policy before any operator sets it.
func defaultPolicy() *Policy {
	return &Policy{Name: DefaultPolicyName}
}

// Policies returns every policy, the default first, then in matching order.
func (l *Machine) Policies() []*Policy {
	out := []*Policy{l.policy(DefaultPolicyName)}
	return append(out, l.ordered...)
}

// Policy returns the named policy or nil.
func (l *Machine) Policy(name string) *Policy { return l.policy(name) }

func (l *Machine) policy(name string) *Policy {
	if p, ok := l.policies[name]; ok {
		return p
	}
	if name == DefaultPolicyName {
		return defaultPolicy()
	}
	return nil
}

// PolicyForTool returns the policy the ledger picks for a claim of tool:
// the first policy in matching order whose patterns match it, else the
// default. A caller never chooses it (ledger.Service.Claim).
func (l *Machine) PolicyForTool(tool string) *Policy {
	p, _ := l.policyFor("", tool)
	return p
}

// policyFor picks the policy of a claim: the named one, else the first
// that matches the tool in matching order, else the default.
func (l *Machine) policyFor(name, tool string) (*Policy, error) {
	if name != "" {
		if p := l.policy(name); p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("%w %q", ErrUnknownPolicy, name)
	}
	for _, p := range l.ordered {
		if p.matches(tool) {
			return p, nil
		}
	}
	return l.policy(DefaultPolicyName), nil
}

// setPolicy stores p (nil deletes name) and rebuilds the matching order.
func (l *Machine) setPolicy(name string, p *Policy) {
	next := make(map[string]*Policy, len(l.policies)+1)
	for k, v := range l.policies {
		next[k] = v
	}
	if p == nil {
		delete(next, name)
	} else {
		next[name] = p
	}
	l.policies = next
	l.reorder()
	l.configDirty = true
}

func (l *Machine) reorder() {
	l.ordered = l.ordered[:0:0]
	for name, p := range l.policies {
		if name != DefaultPolicyName {
			l.ordered = append(l.ordered, p)
		}
	}
	sort.Slice(l.ordered, func(i, j int) bool {
		a, b := l.ordered[i], l.ordered[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return a.Name < b.Name
	})
}

// effective resolves a field: the policy's, else the default policy's,
// else fallback.
func (l *Machine) effective(p *Policy, get func(*Policy) int64, fallback int64) int64 {
	if v := get(p); v > 0 {
		return v
	}
	if v := get(l.policy(DefaultPolicyName)); v > 0 {
		return v
	}
	return fallback
}

// PutPolicy creates or replaces a policy. ExpectVersion, when not zero,
// makes it a compare-and-set on the stored version.
type PutPolicy struct {
	Header
	Policy        Policy `json:"policy"`
	ExpectVersion uint64 `json:"expect_version,omitempty"`
	Actor         string `json:"actor,omitempty"`
}

// DeletePolicy removes a policy; the default policy cannot be removed.
type DeletePolicy struct {
	Header
	Name  string `json:"name"`
	Actor string `json:"actor,omitempty"`
}

// Type implements Command.
func (*PutPolicy) Type() CommandType { return TypePutPolicy }

// Type implements Command.
func (*DeletePolicy) Type() CommandType { return TypeDeletePolicy }

func (a *applier) putPolicy(c *PutPolicy) *Result {
	p := c.Policy
	if err := p.Validate(); err != nil {
		return &Result{Status: StatusMalformed, Detail: err.Error()}
	}
	cur := a.l.policies[p.Name]
	if c.ExpectVersion != 0 && (cur == nil || cur.Version != c.ExpectVersion) {
		have := uint64(0)
		if cur != nil {
			have = cur.Version
		}
		return &Result{Status: StatusVersionMismatch, Detail: fmt.Sprintf("policy %q is at version %d, not %d", p.Name, have, c.ExpectVersion)}
	}
	if cur == nil && p.Name != DefaultPolicyName && len(a.l.policies) >= MaxPolicies {
		return &Result{Status: StatusMalformed, Detail: fmt.Sprintf("at most %d policies", MaxPolicies)}
	}
	p.Version = a.index
	p.Tools = append([]string(nil), p.Tools...)
	p.Approvers = append([]string(nil), p.Approvers...)
	a.l.setPolicy(p.Name, &p)
	a.l.appendChain(SystemNamespace, "", AuditEvent{Index: a.index, At: a.now, Op: "policy.put", Status: StatusOK, Actor: c.Actor,
		Reason: fmt.Sprintf("policy %s version %d", p.Name, p.Version)})
	return &Result{Status: StatusOK, Policy: &p}
}

func (a *applier) deletePolicy(c *DeletePolicy) *Result {
	if c.Name == DefaultPolicyName {
		return &Result{Status: StatusMalformed, Detail: "the default policy cannot be deleted"}
	}
	cur := a.l.policies[c.Name]
	if cur == nil {
		return &Result{Status: StatusUnknownPolicy, Detail: fmt.Sprintf("no policy %q", c.Name)}
	}
	a.l.setPolicy(c.Name, nil)
	a.l.appendChain(SystemNamespace, "", AuditEvent{Index: a.index, At: a.now, Op: "policy.delete", Status: StatusOK, Actor: c.Actor,
		Reason: fmt.Sprintf("policy %s version %d", c.Name, cur.Version)})
	return &Result{Status: StatusOK, Policy: cur}
}
