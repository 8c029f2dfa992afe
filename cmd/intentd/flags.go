package main

import (
	"flag"

	"github.com/intentledger/intentd/node"
)

// registerSecurityFlags adds the security flags to fs (and so to the
// INTENTD_* environment).
func registerSecurityFlags(fs *flag.FlagSet, s *node.SecurityConfig) {
	fs.StringVar(&s.TLSCert, "tls-cert", "", "PEM certificate of this node: enables HTTPS, Raft over mutual TLS and HTTPS forwarding")
	fs.StringVar(&s.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&s.TLSCA, "tls-ca", "", "PEM CA bundle that signs node certificates (required with --tls-cert)")
	fs.StringVar(&s.TLSClientCA, "tls-client-ca", "", "require HTTP API clients to present a certificate signed by this PEM CA")
	fs.StringVar(&s.GossipKey, "gossip-key", "", "base64 AES key (16, 24 or 32 bytes) encrypting and authenticating gossip, the same on every node; required unless --auth=off without TLS")
	fs.StringVar(&s.ClusterName, "cluster-name", s.ClusterName, "the cluster's name in node certificates (intentctl certs --cluster)")
}

// registerKEKFlag adds --kek-file to fs (and so INTENTD_KEK_FILE to the
// environment).
func registerKEKFlag(fs *flag.FlagSet, k *node.KEKConfig) {
	fs.StringVar(&k.File, "kek-file", "", "file of the 32-byte key-encryption key (raw or base64, mode 0600) that seals execution-token signing seeds "+
		"in the Raft log and snapshots, the same on every node (intentctl kek new); also "+node.KEKEnvVar+" (base64)")
}
