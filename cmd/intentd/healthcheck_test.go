package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/node"
)

// TestHealthcheckSpeaksTLSWithTheNodesOwnFiles: the container healthcheck
// (intentd healthcheck) probes a TLS node with the node's certificate and
// CA, and fails when it trusts another CA.
func TestHealthcheckSpeaksTLSWithTheNodesOwnFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node: integration tier")
	}
	t.Parallel()
	pki := func() tlsutil.Files {
		f, err := tlsutil.DevPKI{Dir: filepath.Join(t.TempDir(), "pki"), Nodes: []string{"n1"}}.Generate()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	good, other := pki(), pki()
	cfg := node.DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.Auth, cfg.BootstrapExpect = "n1", t.TempDir(), node.AuthOff, 1
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Security = node.SecurityConfig{ClusterName: tlsutil.DefaultCluster, TLSCert: good.Node["n1"], TLSKey: good.NodeKey["n1"], TLSCA: good.CA,
		TLSClientCA: good.ClientCA, GossipKey: testGossipKey}
	n := node.New(cfg)
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	getenv := func(string) string { return "" }
	args := func(ca string) []string {
		return []string{"healthcheck", "--live", "--http-addr", n.HTTPAddr(), "--tls-cert", good.Node["n1"], "--tls-key",
			good.NodeKey["n1"], "--tls-ca", ca}
	}
	if rc := run(context.Background(), args(good.CA), getenv, io.Discard); rc != 0 {
		t.Fatalf("healthcheck with the cluster CA exited %d", rc)
	}
	if rc := run(context.Background(), args(other.CA), getenv, io.Discard); rc != 1 {
		t.Fatalf("healthcheck trusting another CA exited %d, want 1", rc)
	}
}
