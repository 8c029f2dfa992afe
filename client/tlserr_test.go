package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/intentledger/intentd/client"
)

// TestClientCertificateRefusalIsNotRetried: a node that requires a client
// certificate refuses the handshake; the client tries once, whatever its
// retries, and answers ErrUnauthorized (a credential problem), not
// ErrUnavailable. Before, it backed off through every retry first.
func TestClientCertificateRefusalIsNotRetried(t *testing.T) {
	var handshakes atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert, MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { handshakes.Add(1); return nil, nil }}
	srv.StartTLS()
	defer srv.Close()
	c, err := client.New([]string{srv.URL}, client.WithHTTPClient(srv.Client()), client.WithRetries(4), client.WithDiscovery(false))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(context.Background(), "k", client.GetOptions{})
	if !errors.Is(err, client.ErrUnauthorized) || errors.Is(err, client.ErrUnavailable) || !client.ClientCertRefused(err) {
		t.Fatalf("err = %v, want ErrUnauthorized from a refused client certificate", err)
	}
	if n := handshakes.Load(); n != 1 {
		t.Fatalf("%d handshakes, want 1: a refused certificate is not retried", n)
	}
}
