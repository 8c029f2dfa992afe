package main

import (
	"path/filepath"
	"testing"

	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/testkit/clienttest"
)

func TestCertsAndTLSFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	r := runCLI(t, "certs", "--dir", dir, "--nodes", "a,b", "--hosts", "example.internal")
	expect(t, r, exitOK, "development PKI", "ca.pem", "client-ca.pem", "a.pem", "client.pem", "intentd://local/server/a")
	if r := runCLI(t, "certs", "--dir", dir); r.code == exitOK {
		t.Fatalf("a second run replaced the CA: %s", r)
	}
	// An HTTPS node that requires client certificates from the client CA.
	conf, err := tlsutil.ServerConfig(filepath.Join(dir, "a.pem"), filepath.Join(dir, "a-key.pem"), filepath.Join(dir, "client-ca.pem"), filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newEnv(t, clienttest.WithTLS(conf))

	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	cases := []struct {
		name string
		args []string
		env  map[string]string
		code int
	}{
		{"CA and client certificate", []string{"--ca", ca, "--cert", cert, "--key", key}, nil, exitOK},
		{"from the environment", nil, map[string]string{"INTENTCTL_CA": ca, "INTENTCTL_CERT": cert, "INTENTCTL_KEY": key}, exitOK},
		{"no client certificate", []string{"--ca", ca}, nil, exitUnauthorized},
		{"no CA", []string{"--cert", cert, "--key", key}, nil, exitUnavailable},
		{"key without certificate", []string{"--ca", ca, "--key", key}, nil, exitUsage},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := append([]string{"--addr", srv.addr, "--retries", "0"}, tt.args...)
			r := runCLI(t, append(args, "cluster")...)
			if r.code != tt.code {
				t.Fatalf("want exit %d, got %s", tt.code, r)
			}
		})
	}
}
