package ledger_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/replication"
)

// TestReplicationErrorsAreTheLedgers: the replicated write's errors the
// cluster returns (package replication's) are the ledger's under both
// names, wrapped or not, and stay apart from each other.
func TestReplicationErrorsAreTheLedgers(t *testing.T) {
	pairs := []struct {
		name        string
		ledger, rep error
	}{
		{"ErrNotLeader", ledger.ErrNotLeader, replication.ErrNotLeader},
		{"ErrNoLeader", ledger.ErrNoLeader, replication.ErrNoLeader},
		{"ErrOutcomeUnknown", ledger.ErrOutcomeUnknown, replication.ErrOutcomeUnknown},
		{"ErrShuttingDown", ledger.ErrShuttingDown, replication.ErrShuttingDown},
	}
	for i, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			wrapped := fmt.Errorf("cluster: %w", p.rep)
			if !errors.Is(wrapped, p.ledger) {
				t.Errorf("errors.Is(%v, ledger.%s) = false", wrapped, p.name)
			}
			for j, other := range pairs {
				if j != i && errors.Is(wrapped, other.ledger) {
					t.Errorf("%s also matches ledger.%s", p.name, other.name)
				}
			}
		})
	}
	var err error = fmt.Errorf("forward: %w", &replication.NotLeaderError{LeaderID: "n2", LeaderHTTP: "127.0.0.1:8102"})
	var nl *ledger.NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderHTTP != "127.0.0.1:8102" || !errors.Is(err, ledger.ErrNotLeader) {
		t.Errorf("%v: not a *ledger.NotLeaderError matching ErrNotLeader", err)
	}
}
