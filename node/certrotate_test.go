package node

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestNodeCertificateRotation performs docs/operations.md's certificate
// runbook on a TLS cluster: a new certificate for n2 from the existing CA
// (intentctl certs node does the same through tlsutil.Issue), n2 restarted
// on it with its data and addresses, and the cluster serving through n2
// over HTTPS afterwards, n2 still a voter proving its identity to the
// others with the new certificate (the serial it serves is the new one).
func TestNodeCertificateRotation(t *testing.T) {
	p := newPKI(t)
	tn := newTestNodes(t)
	addrs := map[string][3]string{}
	certs := map[string][2]string{}
	for _, id := range []string{"n1", "n2", "n3"} {
		addrs[id] = [3]string{nodetest.FreePort(t), nodetest.FreePort(t), nodetest.FreePort(t)}
		certs[id] = [2]string{p.files.Node[id], p.files.NodeKey[id]}
	}
	start := func(id string) {
		var join []string
		for other, m := range tn.mains {
			if other != id {
				join = append(join, m.Cluster().GossipAddr())
			}
		}
		tn.startCfg(id, 3, addrs[id], func(c *Config) {
			c.Security = SecurityConfig{ClusterName: tlsutil.DefaultCluster, TLSCert: certs[id][0], TLSKey: certs[id][1],
				TLSCA: p.files.CA, TLSClientCA: p.files.ClientCA, GossipKey: testGossipKey}
		}, join...)
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		start(id)
	}
	hc := httpsClient(t, p.files.CA, p.files.Client, p.files.ClientKey)
	ready := func(id string) bool {
		code, _, err := doJSON(hc, "GET", "https://"+addrs[id][0]+"/readyz", nil)
		return err == nil && code == http.StatusOK
	}
	nodetest.WaitFor(t, 30*time.Second, "three ready nodes over HTTPS", func() bool { return ready("n1") && ready("n2") && ready("n3") })

	// The runbook: issue into a fresh directory, point the node at it,
	// restart that node alone.
	issued, err := tlsutil.Issue{Kind: tlsutil.KindNode, CADir: filepath.Dir(p.files.CA), Cluster: tlsutil.DefaultCluster,
		Name: "n2", OutDir: filepath.Join(t.TempDir(), "n2-rotated")}.Do()
	if err != nil {
		t.Fatal(err)
	}
	oldSerial, newSerial := serialOf(t, p.files.Node["n2"]), serialOf(t, issued.Cert)
	if oldSerial == newSerial {
		t.Fatal("the rotated certificate has the old serial")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tn.mains["n2"].Shutdown(sctx); err != nil {
		t.Fatalf("stopping n2: %v", err)
	}
	delete(tn.mains, "n2")
	certs["n2"] = [2]string{issued.Cert, issued.Key}
	start("n2")
	nodetest.WaitFor(t, 30*time.Second, "n2 ready on its new certificate", func() bool { return ready("n2") })

	// n2 serves the new certificate, and a write through it is forwarded to
	// the leader (or made by it) and read back through another node.
	resp, err := hc.Get("https://" + addrs["n2"][0] + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.TLS.PeerCertificates[0].SerialNumber.String(); got != newSerial {
		t.Fatalf("n2 serves serial %s, want the rotated %s", got, newSerial)
	}
	for i := range 3 {
		key := fmt.Sprintf("rotated:%d", i)
		claim := map[string]any{"key": key, "tool": "t", "owner": "o", "payload": map[string]any{"i": i}}
		nodetest.WaitFor(t, 30*time.Second, "a claim through n2", func() bool {
			code, _, err := doJSON(hc, "POST", "https://"+addrs["n2"][0]+"/v1/intents", claim)
			return err == nil && (code == http.StatusCreated || code == http.StatusOK)
		})
		code, body, err := doJSON(hc, "GET", "https://"+addrs["n3"][0]+"/v1/intents/"+key+"?consistency=linearizable", nil)
		if err != nil || code != http.StatusOK || body["owner"] != "o" {
			t.Fatalf("reading %s through n3: %d %v %v", key, code, body, err)
		}
	}
	st := tn.mains["n1"].Cluster().Status()
	for _, ns := range st.Nodes {
		if ns.ID == "n2" && ns.Suffrage != "voter" {
			t.Fatalf("n2 is %q after the rotation, want a voter", ns.Suffrage)
		}
	}
}

// serialOf is the serial number of the PEM certificate in file.
func serialOf(t *testing.T, file string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("%s holds no PEM block", file)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert.SerialNumber.String()
}
