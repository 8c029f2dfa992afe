package tlsutil

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// handshake runs one TLS handshake between a client and a server config
// over an in-memory connection and returns the client's and the server's
// errors.
func handshake(t *testing.T, client, server *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	deadline := time.Now().Add(10 * time.Second)
	_ = c.SetDeadline(deadline)
	_ = s.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		srv := tls.Server(s, server)
		err := srv.Handshake()
		if err == nil {
			// TLS 1.3: the client learns of a refusal on its first read.
			_, err = srv.Write([]byte("x"))
		}
		done <- err
	}()
	cl := tls.Client(c, client)
	clientErr = cl.Handshake()
	if clientErr == nil {
		_, clientErr = cl.Read(make([]byte, 1))
	}
	_ = c.Close()
	return clientErr, <-done
}

func leafOf(t *testing.T, certFile string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, certFile[:len(certFile)-len(".pem")]+"-key.pem")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// TestIssueFromExistingCA: a node certificate issued later from a
// DevPKI's CA (a fourth node, a replacement, a rotation) is one the
// cluster's mutual TLS accepts as that node, and a client certificate
// from its client CA is accepted by the HTTP API but is no node.
func TestIssueFromExistingCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	files, err := DevPKI{Dir: dir, Nodes: []string{"n1", "n2", "n3"}, Cluster: "prod"}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	n4, err := Issue{Kind: KindNode, CADir: dir, Cluster: "prod", Name: "n4", Hosts: []string{"n4.internal", "10.0.0.4"}}.Do()
	if err != nil {
		t.Fatal(err)
	}
	if n4.Cert != filepath.Join(dir, "n4.pem") || n4.Key != filepath.Join(dir, "n4-key.pem") || n4.Identity != "intentd://prod/server/n4" {
		t.Fatalf("issued %+v", n4)
	}
	leaf := leafOf(t, n4.Cert)
	if id, err := NodeIdentity(leaf, "prod"); err != nil || id != "n4" {
		t.Fatalf("NodeIdentity of n4's certificate = %q, %v", id, err)
	}
	if _, err := NodeIdentity(leaf, "local"); !errors.Is(err, ErrNotANode) {
		t.Fatalf("n4's certificate is a node of another cluster: %v", err)
	}
	for _, host := range []string{"n4", NodeSAN("prod"), "n4.internal", "localhost", "10.0.0.4", "127.0.0.1"} {
		if err := leaf.VerifyHostname(host); err != nil {
			t.Errorf("n4's certificate: %v", err)
		}
	}
	if st, err := os.Stat(n4.Key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st, err)
	}

	// Raft's mutual TLS between an original node and n4, both ways.
	n1Peer, err := PeerConfig(files.Node["n1"], files.NodeKey["n1"], files.CA, "prod", "n1")
	if err != nil {
		t.Fatal(err)
	}
	n4Peer, err := PeerConfig(n4.Cert, n4.Key, files.CA, "prod", "n4")
	if err != nil {
		t.Fatalf("intentd would refuse n4's certificate: %v", err)
	}
	for _, pair := range [][2]*tls.Config{{n1Peer, n4Peer}, {n4Peer, n1Peer}} {
		if ce, se := handshake(t, pair[0], pair[1]); ce != nil || se != nil {
			t.Fatalf("mutual TLS with n4: client %v, server %v", ce, se)
		}
	}

	// A rotated certificate for n1, written elsewhere, is n1 again.
	rotated, err := Issue{Kind: KindNode, CADir: dir, Cluster: "prod", Name: "n1", OutDir: filepath.Join(dir, "rotated")}.Do()
	if err != nil {
		t.Fatal(err)
	}
	if leafOf(t, rotated.Cert).SerialNumber.Cmp(leafOf(t, files.Node["n1"]).SerialNumber) == 0 {
		t.Fatal("the rotated certificate is the old one")
	}
	if _, err := PeerConfig(rotated.Cert, rotated.Key, files.CA, "prod", "n1"); err != nil {
		t.Fatalf("the rotated n1 certificate: %v", err)
	}

	// A client certificate: accepted by an HTTP API that requires one,
	// never a node.
	ops, err := Issue{Kind: KindClient, CADir: dir, Name: "ops"}.Do()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NodeIdentity(leafOf(t, ops.Cert), "prod"); !errors.Is(err, ErrNotANode) || ops.Identity != "" {
		t.Fatalf("the client certificate is a node: %v %q", err, ops.Identity)
	}
	api, err := ServerConfig(files.Node["n1"], files.NodeKey["n1"], files.ClientCA, files.CA)
	if err != nil {
		t.Fatal(err)
	}
	api.ServerName = "n1"
	opsClient, err := ClientConfig(files.CA, ops.Cert, ops.Key)
	if err != nil {
		t.Fatal(err)
	}
	opsClient.ServerName = "n1"
	if ce, se := handshake(t, opsClient, api); ce != nil || se != nil {
		t.Fatalf("HTTPS with the ops client certificate: client %v, server %v", ce, se)
	}
	opsAsPeer := opsClient.Clone()
	opsAsPeer.ServerName = NodeSAN("prod")
	if _, se := handshake(t, opsAsPeer, n1Peer); se == nil {
		t.Fatal("Raft's mutual TLS accepted a client certificate")
	}
}

func TestIssueRefuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	files, err := DevPKI{Dir: dir, Nodes: []string{"n1"}}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(files.Node["n1"])
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		issue Issue
		is    error
	}{
		{"existing node certificate", Issue{Kind: KindNode, CADir: dir, Name: "n1"}, ErrExists},
		{"existing client certificate", Issue{Kind: KindClient, CADir: dir, Name: "client"}, ErrExists},
		{"path in the name", Issue{Kind: KindNode, CADir: dir, Name: "../n9"}, nil},
		{"empty name", Issue{Kind: KindClient, CADir: dir}, nil},
		{"unknown kind", Issue{Kind: "server", CADir: dir, Name: "x"}, nil},
		{"no CA", Issue{Kind: KindNode, CADir: t.TempDir(), Name: "n2"}, nil},
		{"hosts on a client", Issue{Kind: KindClient, CADir: dir, Name: "c2", Hosts: []string{"h"}}, nil},
		{"expired CA", Issue{Kind: KindNode, CADir: dir, Name: "n3", Now: func() time.Time { return time.Now().AddDate(2, 0, 0) }}, nil},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.issue.Do()
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("Do = %v, want an error (%v)", err, tt.is)
			}
		})
	}
	after, err := os.ReadFile(files.Node["n1"])
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("n1.pem changed: %v", err)
	}
	for _, f := range []string{"n2.pem", "n3.pem", "n3-key.pem", "c2.pem", "x.pem"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s written by a refused issue", f)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".issue-*")); len(m) != 0 {
		t.Errorf("temporary directories left: %v", m)
	}
}
