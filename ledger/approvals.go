package ledger

import (
	"context"

	"github.com/intentledger/intentd/fsm"
)

// Decision approves or rejects a pending intent.
type Decision struct {
	Namespace string
	Key       string
	Actor     string
	Reason    string
	Approve   bool
	// Fingerprint, when set, binds the decision to the payload the
	// decider saw: it is refused if the intent's fingerprint differs.
	Fingerprint string
}

// Decide proposes an approval or a rejection. With auth on the actor is
// the deciding API key's name, so the state machine refuses an approval
// by the key that claimed the intent (fsm.StatusSelfApproval) unless the
// intent's policy sets allow_self_approval.
func (s *Service) Decide(ctx context.Context, d Decision) (*fsm.Result, error) {
	ns, err := s.keyAndNamespace(d.Namespace, d.Key)
	if err != nil {
		return nil, err
	}
	if err := s.actor(d.Actor, d.Reason); err != nil {
		return nil, err
	}
	if d.Fingerprint != "" && !isFingerprint(d.Fingerprint) {
		return nil, badField(ErrBadRequest, "fingerprint", "must be 64 lowercase hex digits")
	}
	if d.Approve {
		return s.propose(ctx, &fsm.Approve{Namespace: ns, Key: d.Key, Actor: d.Actor, Reason: d.Reason, Fingerprint: d.Fingerprint})
	}
	return s.propose(ctx, &fsm.Reject{Namespace: ns, Key: d.Key, Actor: d.Actor, Reason: d.Reason, Fingerprint: d.Fingerprint})
}

// isFingerprint reports whether s looks like a fingerprint: 64 lowercase
// hex digits.
func isFingerprint(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
