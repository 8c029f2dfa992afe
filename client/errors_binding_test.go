package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/intentledger/intentd/client"
)

// TestGrantBindingCodesMatchTheirSentinels: a 403 not_grant_holder or
// self_approval matches its own sentinel and ErrUnauthorized, no other,
// and is not retried.
func TestGrantBindingCodesMatchTheirSentinels(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		code string
		want error
	}{
		{"not_grant_holder", client.ErrNotGrantHolder},
		{"self_approval", client.ErrSelfApproval},
	} {
		var hits atomic.Int64
		srv := fixed(t, http.StatusForbidden, tc.code, &hits)
		c := newClient(t, []string{srv.URL}, client.WithDiscovery(false))
		var err error
		if tc.code == "self_approval" {
			_, err = c.Approve(ctx, client.DecisionRequest{Key: "k"})
		} else {
			_, err = c.Complete(ctx, client.CompleteRequest{Key: "k", Owner: "o", FencingToken: 1, Outcome: client.OutcomeExecuted})
		}
		if !errors.Is(err, tc.want) || !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("%s: %v matches neither its sentinel nor ErrUnauthorized", tc.code, err)
		}
		for name, s := range sentinels {
			if errors.Is(err, s) {
				t.Errorf("%s: matches %s too", tc.code, name)
			}
		}
		for _, other := range []error{client.ErrNotGrantHolder, client.ErrSelfApproval} {
			if other != tc.want && errors.Is(err, other) {
				t.Errorf("%s: matches %v too", tc.code, other)
			}
		}
		if hits.Load() != 1 {
			t.Errorf("%s: sent %d times", tc.code, hits.Load())
		}
	}
}
