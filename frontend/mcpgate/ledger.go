package mcpgate

import (
	"context"
	"time"

	"github.com/intentledger/intentd/client"
)

// LedgerClient is what the gate asks of the ledger; *client.Client is one. The
// SDK finds the leader, re-sends a claim with the same owner while its
// outcome is unknown, records a report until the ledger answers, renews a
// lease while the upstream works, and waits out 429s: Do's steps, one by
// one (client/steps.go); a grant is held, recorded and committed by
// client.Hold, as Do does.
type LedgerClient interface {
	client.Steps
	Get(ctx context.Context, key string, opts client.GetOptions) (*client.Intent, error)
	Settle(ctx context.Context, req client.ClaimRequest) (*client.ClaimResponse, error)
	SettleAfterHolder(ctx context.Context, req client.ClaimRequest, inFlight error, poll time.Duration, each func(n int, holder *client.Intent)) (*client.ClaimResponse, error)
	Renew(ctx context.Context, req client.RenewRequest) (*client.IntentResponse, error)
}

var _ LedgerClient = (*client.Client)(nil)

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
