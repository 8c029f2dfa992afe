package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestLeaderIDAsksTheCluster: LeaderID names the leader the ledger's GET
// /v1/cluster names, "" when it names none, and fails with the ledger's
// refusal (the front ends' readiness is this question).
func TestLeaderIDAsksTheCluster(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
		err    error
	}{
		{"a leader", http.StatusOK, `{"node_id":"n2","leader_id":"n1","nodes":[]}`, "n1", nil},
		{"no leader", http.StatusOK, `{"node_id":"n2","leader_id":"","nodes":[]}`, "", nil},
		{"refused", http.StatusUnauthorized, `{"code":"unauthenticated","title":"no API key","status":401}`, "", client.ErrUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/cluster" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if tc.status != http.StatusOK {
					w.Header().Set("Content-Type", "application/problem+json")
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			ln, err := net.Listen("tcp", nodetest.FreePort(t))
			if err != nil {
				t.Fatal(err)
			}
			srv.Listener.Close()
			srv.Listener = ln
			srv.Start()
			defer srv.Close()
			c, err := client.New([]string{srv.URL}, client.WithDiscovery(false), client.WithRetries(0))
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.LeaderID(context.Background())
			if got != tc.want || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Errorf("LeaderID = %q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
}
