package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentledger/intentd/internal/tlsutil"
)

// parseCert reads a PEM certificate file.
func parseCert(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s holds no PEM", file)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCertsNodeAndClient: "certs node" issues a certificate for a node
// the development PKI did not name (n4) from its CA, verifying against
// that CA and carrying n4's node identity of the cluster as intentd
// checks it; "certs client" issues a client certificate with no node
// identity; neither ever replaces a file.
func TestCertsNodeAndClient(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	expect(t, runCLI(t, "certs", "--dir", dir, "--cluster", "prod"), exitOK, "intentd://prod/server/n1", "certs node --ca-dir")
	pool := x509.NewCertPool()
	pool.AddCert(parseCert(t, filepath.Join(dir, "ca.pem")))
	clientPool := x509.NewCertPool()
	clientPool.AddCert(parseCert(t, filepath.Join(dir, "client-ca.pem")))
	out := filepath.Join(t.TempDir(), "n4")

	r := runCLI(t, "certs", "node", "--ca-dir", dir, "--cluster", "prod", "--id", "n4", "--hosts", "n4.example", "--out", out)
	expect(t, r, exitOK, filepath.Join(out, "n4.pem"), "intentd://prod/server/n4", "--cluster-name prod")
	n4 := parseCert(t, filepath.Join(out, "n4.pem"))
	if _, err := n4.Verify(x509.VerifyOptions{Roots: pool, DNSName: "n4.example", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("n4 does not verify against the cluster's CA: %v", err)
	}
	if id, err := tlsutil.NodeIdentity(n4, "prod"); err != nil || id != "n4" {
		t.Fatalf("n4's node identity: %q, %v", id, err)
	}
	if _, err := tlsutil.PeerConfig(filepath.Join(out, "n4.pem"), filepath.Join(out, "n4-key.pem"), filepath.Join(dir, "ca.pem"), "prod", "n4"); err != nil {
		t.Fatalf("intentd --id n4 would refuse its certificate: %v", err)
	}

	r = runCLI(t, "certs", "client", "--ca-dir", dir, "--name", "ops", "--out", out, "--output", "json")
	expect(t, r, exitOK, `"cert"`, "ops.pem")
	ops := parseCert(t, filepath.Join(out, "ops.pem"))
	if _, err := ops.Verify(x509.VerifyOptions{Roots: clientPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("ops does not verify against the client CA: %v", err)
	}
	if id, err := tlsutil.NodeIdentity(ops, "prod"); err == nil {
		t.Fatalf("the client certificate carries node identity %q", id)
	}

	cases := []struct {
		name string
		args []string
		code int
	}{
		{"node certificate exists", []string{"certs", "node", "--ca-dir", dir, "--cluster", "prod", "--id", "n4", "--out", out}, exitUsage},
		{"original node certificate", []string{"certs", "node", "--ca-dir", dir, "--cluster", "prod", "--id", "n1"}, exitUsage},
		{"client certificate exists", []string{"certs", "client", "--ca-dir", dir, "--name", "ops", "--out", out}, exitUsage},
		{"no --id", []string{"certs", "node", "--ca-dir", dir}, exitUsage},
		{"no --name", []string{"certs", "client", "--ca-dir", dir}, exitUsage},
		{"no CA there", []string{"certs", "node", "--ca-dir", t.TempDir(), "--id", "n5"}, exitError},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := os.ReadFile(filepath.Join(out, "n4.pem"))
			if r := runCLI(t, tt.args...); r.code != tt.code {
				t.Fatalf("want exit %d, got %s", tt.code, r)
			}
			if after, _ := os.ReadFile(filepath.Join(out, "n4.pem")); string(after) != string(before) {
				t.Fatal("n4.pem was replaced")
			}
		})
	}
}

// TestTLSClientCertificateRefusalIsAuth: a node that requires client
// certificates refusing this client's (none, or one from another CA)
// is a credential problem, exit 10, over TLS 1.2 and 1.3 alike (the
// alerts differ); it used to exit 8, "retry the same command".
func TestTLSClientCertificateRefusalIsAuth(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	if r := runCLI(t, "certs", "--dir", dir, "--nodes", "n1"); r.code != exitOK {
		t.Fatal(r)
	}
	other := filepath.Join(t.TempDir(), "other")
	if r := runCLI(t, "certs", "--dir", other, "--nodes", "x"); r.code != exitOK {
		t.Fatal(r)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(parseCert(t, filepath.Join(dir, "client-ca.pem")))
	ca := filepath.Join(dir, "ca.pem")
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"not_found","title":"intent not found","status":404}`))
		}))
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert,
			ClientCAs: clientCAs, MinVersion: version, MaxVersion: version}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
		srv.StartTLS()
		defer srv.Close()
		cases := []struct {
			name   string
			args   []string
			code   int
			stderr string
		}{
			{"no client certificate", []string{"--ca", ca}, exitUnauthorized, "--cert and --key"},
			{"another CA's client certificate", []string{"--ca", ca, "--cert", filepath.Join(other, "client.pem"), "--key", filepath.Join(other, "client-key.pem")},
				exitUnauthorized, "client CA"},
			{"the client CA's certificate", []string{"--ca", ca, "--cert", filepath.Join(dir, "client.pem"), "--key", filepath.Join(dir, "client-key.pem")},
				exitNotFound, "not found"},
			// Not the client's credential: the client does not trust the
			// server (no --ca). Unchanged.
			{"server not trusted", []string{"--cert", filepath.Join(dir, "client.pem"), "--key", filepath.Join(dir, "client-key.pem")},
				exitUnavailable, "certificate"},
		}
		for _, tt := range cases {
			t.Run(tls.VersionName(version)+"/"+tt.name, func(t *testing.T) {
				args := append([]string{"--addr", srv.URL, "--retries", "0"}, tt.args...)
				r := runCLI(t, append(args, "get", "k")...)
				if r.code != tt.code || !strings.Contains(r.stderr, tt.stderr) {
					t.Fatalf("want exit %d and %q on stderr, got %s", tt.code, tt.stderr, r)
				}
			})
		}
	}
}
