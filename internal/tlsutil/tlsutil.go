// Package tlsutil loads the TLS material of an intentd deployment (a CA
// bundle, a node or client certificate and key) into crypto/tls
// configurations, and generates a development PKI (a CA, node and client
// certificates) with the standard library only.
package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// MinVersion is the oldest TLS version any intentd endpoint accepts.
const MinVersion = tls.VersionTLS12

// LoadCAPool reads a PEM bundle of CA certificates.
func LoadCAPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// LoadKeyPair reads a PEM certificate (chain) and its key.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return tls.Certificate{}, errors.New("tls: a certificate needs both a cert file and a key file")
	}
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tls: key pair %s, %s: %w", certFile, keyFile, err)
	}
	return c, nil
}

// ServerConfig is the HTTP API's TLS: the node's certificate; client
// certificates signed by the node CA (nodeCAFile) are verified when given,
// so the leader can tell a node that forwards a request (PeerIdentity);
// with clientCAFile set, every client must present a certificate signed by
// the client CA or the node CA.
func ServerConfig(certFile, keyFile, clientCAFile, nodeCAFile string) (*tls.Config, error) {
	cert, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: MinVersion, Certificates: []tls.Certificate{cert}}
	if nodeCAFile != "" {
		if c.ClientCAs, err = LoadCAPool(nodeCAFile); err != nil {
			return nil, err
		}
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: client CA file: %w", err)
		}
		if c.ClientCAs == nil {
			c.ClientCAs = x509.NewCertPool()
		}
		if !c.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: client CA file %s holds no PEM certificate", clientCAFile)
		}
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// PeerConfig is mutual TLS between the nodes of cluster (Raft, and HTTP
// forwarding to the leader): the node presents its certificate both as
// server and client and accepts a peer only if the node CA signed its
// certificate and it carries a node identity of the cluster (NodeSAN and
// NodeURI): a client certificate is refused even from the same CA. The
// node's own certificate must name nodeID, or PeerConfig fails.
func PeerConfig(certFile, keyFile, caFile, cluster, nodeID string) (*tls.Config, error) {
	cert, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	if caFile == "" {
		return nil, errors.New("tls: mutual TLS between nodes needs a CA file")
	}
	pool, err := LoadCAPool(caFile)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls: %s: %w", certFile, err)
	}
	id, err := NodeIdentity(leaf, cluster)
	if err != nil {
		return nil, fmt.Errorf("tls: %s cannot be this node's certificate (reissue it with intentctl certs --cluster %s): %w", certFile, cluster, err)
	}
	if id != nodeID {
		return nil, fmt.Errorf("tls: %s names node %q, but this node is %q", certFile, id, nodeID)
	}
	return &tls.Config{
		MinVersion:   MinVersion,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		// Dialling, the peer must be a server of this cluster whatever
		// address it was reached at.
		ServerName: NodeSAN(cluster),
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := PeerIdentity(&cs, pool, cluster)
			return err
		},
	}, nil
}

// ClientConfig is a client's TLS: servers are verified against caFile (the
// system roots when empty) and, when certFile and keyFile are set, the
// client presents that certificate.
func ClientConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: MinVersion}
	if caFile != "" {
		pool, err := LoadCAPool(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := LoadKeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
