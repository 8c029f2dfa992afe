package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// DefaultCluster is the cluster name node certificates carry when none is
// given.
const DefaultCluster = "local"

// A node certificate of cluster C for node N carries two SANs besides its
// host names: the DNS name NodeSAN(C), which says "a server of C" (peers
// verify it as the server name they expect, as Consul's
// verify_server_hostname does), and the URI NodeURI(C, N), which says
// which one. A client certificate carries neither, so it cannot speak Raft
// or pass for a node that forwards, even when one CA signs both.

// NodeSAN is the DNS SAN every node certificate of cluster carries.
func NodeSAN(cluster string) string { return "server." + cluster + ".intentd" }

// NodeURI is the URI SAN that names node id of cluster.
func NodeURI(cluster, id string) *url.URL {
	return &url.URL{Scheme: "intentd", Host: cluster, Path: "/server/" + id}
}

// ErrNotANode is returned for a peer whose certificate carries no node
// identity of the cluster.
var ErrNotANode = errors.New("tls: the peer's certificate is not a node certificate of this cluster")

// NodeIdentity returns the ID of the node that cert names in cluster: it
// must carry NodeSAN(cluster) and exactly one NodeURI of cluster, and
// allow both server and client authentication.
func NodeIdentity(cert *x509.Certificate, cluster string) (string, error) {
	hasSAN := false
	for _, d := range cert.DNSNames {
		if strings.EqualFold(d, NodeSAN(cluster)) {
			hasSAN = true
		}
	}
	if !hasSAN {
		return "", fmt.Errorf("%w: no DNS name %s (subject %q)", ErrNotANode, NodeSAN(cluster), cert.Subject.CommonName)
	}
	id := ""
	for _, u := range cert.URIs {
		if u.Scheme != "intentd" {
			continue
		}
		rest, ok := strings.CutPrefix(u.Path, "/server/")
		if u.Host != cluster || !ok || rest == "" || id != "" {
			return "", fmt.Errorf("%w: URI %s is not one node identity of cluster %q", ErrNotANode, u, cluster)
		}
		id = rest
	}
	if id == "" {
		return "", fmt.Errorf("%w: no node URI of cluster %q (subject %q)", ErrNotANode, cluster, cert.Subject.CommonName)
	}
	server, client := false, false
	for _, u := range cert.ExtKeyUsage {
		server = server || u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny
		client = client || u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny
	}
	if !server || !client {
		return "", fmt.Errorf("%w: node %q's certificate must allow server and client authentication", ErrNotANode, id)
	}
	return id, nil
}

// PeerIdentity returns the node ID of the verified certificate a TLS peer
// presented, checked against nodeCAs (the node CA, not a client CA that
// might also have verified it on a shared listener).
func PeerIdentity(cs *tls.ConnectionState, nodeCAs *x509.CertPool, cluster string) (string, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return "", fmt.Errorf("%w: no certificate", ErrNotANode)
	}
	leaf := cs.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: nodeCAs, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return "", fmt.Errorf("%w: not signed by the node CA: %v", ErrNotANode, err)
	}
	return NodeIdentity(leaf, cluster)
}
