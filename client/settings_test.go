package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/intentledger/intentd/client"
)

func TestSettingsRoundTrip(t *testing.T) {
	n := newNode(t)
	c := newClient(t, []string{n.srv.URL}, client.WithDiscovery(false))
	ctx := context.Background()

	st, err := c.Settings(ctx)
	if err != nil || st.AuditRetention != 0 {
		t.Fatalf("settings = %+v, %v; want the default (0)", st, err)
	}
	st, err = c.PutSettings(ctx, client.Settings{AuditRetention: 5})
	if err != nil || st.AuditRetention != 5 {
		t.Fatalf("put settings = %+v, %v", st, err)
	}
	if st, err = c.Settings(ctx); err != nil || st.AuditRetention != 5 {
		t.Fatalf("settings after put = %+v, %v", st, err)
	}

	// Out of range: refused before anything is sent.
	before := n.hits.Load()
	for _, bad := range []int{-1, client.MaxAuditRetention + 1} {
		if _, err := c.PutSettings(ctx, client.Settings{AuditRetention: bad}); !errors.Is(err, client.ErrBadRequest) {
			t.Errorf("put settings %d: %v, want ErrBadRequest", bad, err)
		}
	}
	if n.hits.Load() != before {
		t.Errorf("out-of-range settings were sent (%d requests)", n.hits.Load()-before)
	}
}

// The settings calls go through the SDK's routing like every other call:
// past a node that cannot be reached, and past one that answers 503 (after
// its Retry-After), to one that answers.
func TestSettingsFailover(t *testing.T) {
	n := newNode(t)
	dead := httptest.NewServer(nil)
	dead.Close()
	var busy atomic.Int64
	unavailable := fixed(t, http.StatusServiceUnavailable, "no_leader", &busy)
	for name, addrs := range map[string][]string{
		"dead first":        {dead.URL, n.srv.URL},
		"unavailable first": {unavailable.URL, n.srv.URL},
	} {
		for _, discovery := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, discovery %t", name, discovery), func(t *testing.T) {
				c := newClient(t, addrs, client.WithDiscovery(discovery))
				if st, err := c.PutSettings(context.Background(), client.Settings{AuditRetention: 7}); err != nil || st.AuditRetention != 7 {
					t.Fatalf("put settings = %+v, %v", st, err)
				}
				if st, err := c.Settings(context.Background()); err != nil || st.AuditRetention != 7 {
					t.Fatalf("settings = %+v, %v", st, err)
				}
			})
		}
	}
	if busy.Load() == 0 {
		t.Error("the unavailable node was never asked")
	}

	// No node answers: unavailable, not a definite answer.
	c := newClient(t, []string{dead.URL}, client.WithRetries(1))
	if _, err := c.Settings(context.Background()); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("settings from a dead node: %v, want ErrUnavailable", err)
	}
}
