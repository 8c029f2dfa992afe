package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/intentledger/intentd/fsm"
)

// ErrPolicyMismatch refuses a claim that names a policy other than the
// one the ledger picks for its tool: the ledger alone chooses a claim's
// policy, so the agent a policy gates cannot opt out of it by naming
// another. Nothing was written.
var ErrPolicyMismatch = errors.New("the claim names a policy the ledger does not pick for its tool")

// checkPolicy refuses a claim whose named policy is not the one the ledger
// picks for tool (on this node's copy of the policies: the state machine
// then picks by tool whatever the caller named, so a policy changed in
// between governs the claim, never the caller's choice).
func (s *Service) checkPolicy(ctx context.Context, tool, named string) error {
	if named == "" {
		return nil
	}
	var picked string
	var known bool
	if err := s.r.Read(ctx, Stale, func(l *fsm.Machine) {
		picked, known = l.PolicyForTool(tool).Name, l.Policy(named) != nil
	}); err != nil {
		return err
	}
	switch {
	case !known:
		return badField(ErrUnprocessable, "policy", "no policy %q", named)
	case picked != named:
		return &FieldError{Field: "policy", Kind: ErrPolicyMismatch, Detail: fmt.Sprintf(
			"tool %q is governed by policy %q, not %q: the ledger picks a claim's policy by its tool; leave policy out, or name %q",
			tool, picked, named, picked)}
	}
	return nil
}

// PutPolicy validates p and proposes it. expectVersion, when not zero,
// makes it a compare-and-set on the stored version.
func (s *Service) PutPolicy(ctx context.Context, p fsm.Policy, expectVersion uint64, actor string) (*fsm.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, badField(ErrUnprocessable, "policy", "%v", err)
	}
	for _, t := range p.Tools {
		if err := fsm.ValidToolPattern(t); err != nil {
			return nil, badField(ErrUnprocessable, "policy", "tools: %v", err)
		}
	}
	if err := s.limits.name("actor", actor, false); err != nil {
		return nil, err
	}
	p.Version = 0
	return s.propose(ctx, &fsm.PutPolicy{Policy: p, ExpectVersion: expectVersion, Actor: actor})
}

// DeletePolicy proposes removing the named policy.
func (s *Service) DeletePolicy(ctx context.Context, name, actor string) (*fsm.Result, error) {
	if err := s.limits.name("policy", name, true); err != nil {
		return nil, err
	}
	if name == fsm.DefaultPolicyName {
		return nil, badField(ErrUnprocessable, "policy", "the default policy cannot be deleted")
	}
	return s.propose(ctx, &fsm.DeletePolicy{Name: name, Actor: actor})
}

// Policies reads every policy, the default first, then in matching order.
func (s *Service) Policies(ctx context.Context, c Consistency) ([]*fsm.Policy, error) {
	var out []*fsm.Policy
	err := s.r.Read(ctx, c, func(l *fsm.Machine) { out = l.Policies() })
	return out, err
}

// Policy reads one policy; fsm.ErrUnknownPolicy when there is none.
func (s *Service) Policy(ctx context.Context, name string, c Consistency) (*fsm.Policy, error) {
	if err := s.limits.name("policy", name, true); err != nil {
		return nil, err
	}
	var p *fsm.Policy
	if err := s.r.Read(ctx, c, func(l *fsm.Machine) { p = l.Policy(name) }); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w %q", fsm.ErrUnknownPolicy, name)
	}
	return p, nil
}
