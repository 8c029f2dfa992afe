package ledger

import (
	"context"
	"fmt"

	"github.com/intentledger/intentd/fsm"
)

// PutPolicy validates p and proposes it. expectVersion, when not zero,
// makes it a compare-and-set on the stored version.
func (s *Service) PutPolicy(ctx context.Context, p fsm.Policy, expectVersion uint64, actor string) (*fsm.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, badField(ErrUnprocessable, "policy", "%v", err)
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
	err := s.r.Read(ctx, c, func(l *fsm.Ledger) { out = l.Policies() })
	return out, err
}

// Policy reads one policy; fsm.ErrUnknownPolicy when there is none.
func (s *Service) Policy(ctx context.Context, name string, c Consistency) (*fsm.Policy, error) {
	if err := s.limits.name("policy", name, true); err != nil {
		return nil, err
	}
	var p *fsm.Policy
	if err := s.r.Read(ctx, c, func(l *fsm.Ledger) { p = l.Policy(name) }); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("%w %q", fsm.ErrUnknownPolicy, name)
	}
	return p, nil
}
