package main

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"

	"github.com/intentledger/intentd/httpapi"
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
	// and authenticates gossip; every member needs the same one.
	GossipKey string
}

// registerSecurityFlags adds the security flags to fs (and so to the
// INTENTD_* environment).
func registerSecurityFlags(fs *flag.FlagSet, s *SecurityConfig) {
	fs.StringVar(&s.TLSCert, "tls-cert", "", "PEM certificate of this node: enables HTTPS, Raft over mutual TLS and HTTPS forwarding")
	fs.StringVar(&s.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&s.TLSCA, "tls-ca", "", "PEM CA bundle that signs node certificates (required with --tls-cert)")
	fs.StringVar(&s.TLSClientCA, "tls-client-ca", "", "require HTTP API clients to present a certificate signed by this PEM CA")
	fs.StringVar(&s.GossipKey, "gossip-key", "", "base64 AES key (16, 24 or 32 bytes) encrypting gossip; the same on every node")
}

// TLS reports whether the node runs with TLS.
func (s SecurityConfig) TLS() bool { return s.TLSCert != "" || s.TLSKey != "" }

// validate checks the flags fit together (files are read at start).
func (s SecurityConfig) validate() error {
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
	peer      *tls.Config // Raft and forwarding (mutual)
	forward   *http.Client
	gossipKey []byte
}

// load reads the certificate files.
func (s SecurityConfig) load() (*security, error) {
	key, err := s.gossipKey()
	if err != nil {
		return nil, err
	}
	out := &security{gossipKey: key}
	if !s.TLS() {
		return out, nil
	}
	if out.http, err = tlsutil.ServerConfig(s.TLSCert, s.TLSKey, s.TLSClientCA); err != nil {
		return nil, err
	}
	if out.peer, err = tlsutil.PeerConfig(s.TLSCert, s.TLSKey, s.TLSCA); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tlsutil.MinVersion, RootCAs: out.peer.RootCAs, Certificates: out.peer.Certificates}
	out.forward = &http.Client{
		Timeout:   httpapi.DefaultForwardTimeout,
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return out, nil
}
