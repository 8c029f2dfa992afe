package main

import (
	"errors"
	"flag"
	"strings"

	"github.com/dustin/go-humanize"

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

// sizeFlag is a size in bytes (node.ParseSize: 512MiB, 2GB); the words in
// auto (e.g. "auto") set *auto instead, and "0" or "off" turn it off.
type sizeFlag struct {
	v    *uint64
	auto *bool
}

func (f sizeFlag) String() string {
	switch {
	case f.v == nil:
		return ""
	case f.auto != nil && *f.auto:
		return "auto"
	case *f.v == 0:
		return "off"
	}
	return humanize.IBytes(*f.v)
}

func (f sizeFlag) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		if f.auto == nil {
			return errors.New(`"auto" is not a value of this flag`)
		}
		*f.auto, *f.v = true, 0
		return nil
	case "off", "0", "":
		if f.auto != nil {
			*f.auto = false
		}
		*f.v = 0
		return nil
	}
	n, err := node.ParseSize(s)
	if err != nil {
		return err
	}
	if f.auto != nil {
		*f.auto = false
	}
	*f.v = n
	return nil
}

// registerCapacityFlags adds the flags of the capacity past which the
// leader refuses claims of new keys (507 ledger_full).
func registerCapacityFlags(fs *flag.FlagSet, c *node.CapacityConfig) {
	fs.Var(sizeFlag{&c.MinFreeDisk, &c.MinFreeDiskAuto}, "min-free-disk", "free space to keep on the file system of --data-dir: below it the leader refuses claims of new keys with 507 ledger_full (e.g. 512MiB, 2GB; auto: the smaller of 1 GiB and 10% of the file system; off)")
	fs.Var(sizeFlag{v: &c.MaxDataBytes}, "max-data-bytes", "cap on the bytes in --data-dir: past it the leader refuses claims of new keys with 507 ledger_full (e.g. 20GiB; off)")
	fs.Var(sizeFlag{&c.MaxMemory, &c.MaxMemoryAuto}, "max-memory", "the node's memory capacity (e.g. 4GiB; auto: the memory cgroup's limit, else GOMEMLIMIT, else the machine's memory; off): the leader refuses claims of new keys with 507 ledger_full while the Go live heap is over --memory-high-water of it, and GOMEMLIMIT is set to 90% of it unless set")
	fs.Float64Var(&c.MemoryHighWater, "memory-high-water", node.DefaultMemoryHighWater, "fraction of --max-memory the Go live heap may reach before the leader refuses claims of new keys (the ledger is held in memory)")
}
