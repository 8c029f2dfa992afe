package ledger

import (
	"context"

	"github.com/intentledger/intentd/fsm"
)

// SetSettings validates and proposes cluster-wide settings.
func (s *Service) SetSettings(ctx context.Context, st fsm.Settings, actor string) (*fsm.Result, error) {
	if err := st.Validate(); err != nil {
		return nil, badField(ErrUnprocessable, "settings", "%v", err)
	}
	return s.propose(ctx, &fsm.SetSettings{Settings: st, Actor: actor})
}

// Settings reads the cluster-wide settings.
func (s *Service) Settings(ctx context.Context, c Consistency) (fsm.Settings, error) {
	var st fsm.Settings
	err := s.r.Read(ctx, c, func(l *fsm.Machine) { st = l.Settings() })
	return st, err
}
