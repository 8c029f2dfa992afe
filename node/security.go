package node

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/internal/peerauth"
	"github.com/intentledger/intentd/internal/tlsutil"
)

// SecurityConfig is the node's transport security. With TLSCert and TLSKey
// set, the HTTP API serves HTTPS, Raft runs over mutual TLS (TLSCA
// required) and forwarding to the leader uses HTTPS with the node's
// certificate; without them everything is plaintext, as before.
type SecurityConfig struct {
	// TLSCert and TLSKey are the node's PEM certificate and key; the
	// certificate must name the node's advertised hosts and allow server
	// and client authentication (intentctl certs makes such).
	TLSCert, TLSKey string
	// TLSCA is the PEM bundle of the CA that signs node certificates: Raft
	// peers and leaders that followers forward to are verified against it.
	TLSCA string
	// TLSClientCA, when set, makes the HTTP API require client
	// certificates signed by it. Node certificates must be signed by it
	// too, because followers forward with theirs.
	TLSClientCA string
	// GossipKey is a base64 AES key (16, 24 or 32 bytes) that encrypts
	// and authenticates gossip; every member needs the same one. It is the
	// cluster's membership credential (a node without it cannot join) and
	// keys the proof that a forwarded request comes from a node, so it is
	// required whenever auth is required or TLS is on.
	GossipKey string
	// ClusterName is the cluster node certificates name (their
	// server.<name>.intentd DNS SAN and intentd://<name>/server/<id> URI).
	ClusterName string
}

// TLS reports whether the node runs with TLS.
func (s SecurityConfig) TLS() bool { return s.TLSCert != "" || s.TLSKey != "" }

// ErrGossipKeyRequired refuses a node that would run without its
// membership credential.
var ErrGossipKeyRequired = errors.New("--gossip-key is required when auth is required or TLS is on: it is the cluster's membership " +
	"credential (without it anyone who reaches the gossip port can join, become a voter and receive forwarded requests); " +
	"make one with: head -c32 /dev/urandom | base64 (--auth=off without TLS, for development only, runs without one)")

// Validate checks the settings fit together (files are read at start);
// authRequired says whether the node requires API keys.
func (s SecurityConfig) Validate(authRequired bool) error {
	if s.GossipKey == "" && (authRequired || s.TLS()) {
		return ErrGossipKeyRequired
	}
	if !validClusterName(s.ClusterName) {
		return fmt.Errorf("--cluster-name %q: want 1-63 lower-case letters, digits and dashes", s.ClusterName)
	}
	if s.TLS() && (s.TLSCert == "" || s.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if s.TLS() && s.TLSCA == "" {
		return errors.New("--tls-cert needs --tls-ca: Raft peers authenticate each other with it")
	}
	if !s.TLS() && (s.TLSCA != "" || s.TLSClientCA != "") {
		return errors.New("--tls-ca and --tls-client-ca need --tls-cert and --tls-key")
	}
	if _, err := s.gossipKey(); err != nil {
		return err
	}
	return nil
}

// validClusterName reports whether name fits a DNS label, as it stands in
// the node certificates' server.<name>.intentd.
func validClusterName(name string) bool {
	if name == "" || len(name) > 63 || name[0] == '-' || name[len(name)-1] == '-' {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

func (s SecurityConfig) gossipKey() ([]byte, error) {
	if s.GossipKey == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s.GossipKey))
	if err != nil {
		return nil, fmt.Errorf("--gossip-key: not base64: %w", err)
	}
	if n := len(k); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("--gossip-key: %d bytes; want 16, 24 or 32 (e.g. head -c32 /dev/urandom | base64)", n)
	}
	return k, nil
}

// security is the loaded material.
type security struct {
	http      *tls.Config // HTTP API server; nil: plaintext
	peer      *tls.Config // Raft and forwarding (mutual, node identities)
	forward   *http.Client
	gossipKey []byte
	// identity names the node a verified peer certificate carries; nil
	// without TLS.
	identity func(*tls.ConnectionState) (string, error)
	// peers signs and verifies forwarded requests.
	peers *peerauth.Auth
}

// load reads the certificate files of node id.
func (s SecurityConfig) load(id string) (*security, error) {
	key, err := s.gossipKey()
	if err != nil {
		return nil, err
	}
	if s.ClusterName == "" {
		s.ClusterName = tlsutil.DefaultCluster
	}
	out := &security{gossipKey: key}
	if !s.TLS() {
		out.peers = peerauth.New(id, key, nil)
		return out, nil
	}
	if out.http, err = tlsutil.ServerConfig(s.TLSCert, s.TLSKey, s.TLSClientCA, s.TLSCA); err != nil {
		return nil, err
	}
	if out.peer, err = tlsutil.PeerConfig(s.TLSCert, s.TLSKey, s.TLSCA, s.ClusterName, id); err != nil {
		return nil, err
	}
	nodeCAs, cluster := out.peer.RootCAs, s.ClusterName
	out.identity = func(cs *tls.ConnectionState) (string, error) { return tlsutil.PeerIdentity(cs, nodeCAs, cluster) }
	out.peers = peerauth.New(id, key, func(cs *tls.ConnectionState) (string, bool) {
		id, err := out.identity(cs)
		return id, err == nil
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Forwarding presents this node's certificate and talks only to a
	// server of the cluster (the peer configuration's node identity check).
	tr.TLSClientConfig = out.peer.Clone()
	out.forward = &http.Client{
		Timeout:   httpapi.DefaultForwardTimeout,
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return out, nil
}

// clusterName is the cluster's name as the node runs with it.
func clusterName(s SecurityConfig) string {
	if s.ClusterName == "" {
		return tlsutil.DefaultCluster
	}
	return s.ClusterName
}
