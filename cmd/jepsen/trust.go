package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"path/filepath"

	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/jepsen/nemesis"
	"github.com/intentledger/intentd/jepsen/netns"
	"github.com/intentledger/intentd/jepsen/nodes"
)

// trust is a run's cluster credentials: a fresh gossip key every run (the
// nodes' membership credential) and, with --tls, a development PKI whose
// node certificates name the nodes' addresses.
type trust struct {
	key       []byte
	gossipKey string // base64, as --gossip-key takes it
	pkiDir    string // "" without --tls
	files     *tlsutil.Files
	hostIP    string
}

func newTrust(o options, nw *netns.Net) (*trust, error) {
	t := &trust{key: make([]byte, 32), hostIP: nw.HostIP()}
	if _, err := rand.Read(t.key); err != nil {
		return nil, fmt.Errorf("gossip key: %w", err)
	}
	t.gossipKey = base64.StdEncoding.EncodeToString(t.key)
	if !o.tls {
		return t, nil
	}
	var names, hosts []string
	for i := 1; i <= o.nodes; i++ {
		names = append(names, nodes.Name(i))
		hosts = append(hosts, nw.NodeIP(i))
	}
	t.pkiDir = filepath.Join(o.results, "pki")
	files, err := tlsutil.DevPKI{Dir: t.pkiDir, Nodes: names, Hosts: hosts}.Generate()
	if err != nil {
		return nil, fmt.Errorf("node PKI: %w", err)
	}
	t.files = &files
	return t, nil
}

// env is what the trust-boundary nemeses get.
func (t *trust) env() *nemesis.Trust {
	return &nemesis.Trust{GossipKey: t.key, PKI: t.files, HostIP: t.hostIP}
}
