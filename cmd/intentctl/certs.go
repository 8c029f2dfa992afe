package main

import (
	"context"
	"fmt"
	"time"

	cmdcli "github.com/intentledger/intentd/internal/cli"
	"github.com/intentledger/intentd/internal/tlsutil"
)

// cmdCerts writes a development PKI (never for production: the CA key sits
// next to the certificates).
func cmdCerts(_ context.Context, c *cli, args []string) error {
	fs := c.flags("certs")
	dir := fs.String("dir", "certs", "directory to write into (must not hold a CA yet)")
	nodes := fs.String("nodes", "n1,n2,n3", "comma separated node names (each is a DNS name on its certificate)")
	hosts := fs.String("hosts", "", "extra DNS names or IPs on every node certificate")
	validity := fs.Duration("validity", 365*24*time.Hour, "how long the certificates are valid")
	cluster := fs.String("cluster", tlsutil.DefaultCluster, "the cluster name the node identities carry (intentd --cluster-name)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	files, err := tlsutil.DevPKI{Dir: *dir, Nodes: cmdcli.SplitList(*nodes), Hosts: cmdcli.SplitList(*hosts), Validity: *validity,
		Cluster: *cluster}.Generate()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "development PKI in %s (keep the *-key.pem of the CAs away from the nodes):\n  node CA:   %s\n  client CA: %s\n",
		*dir, files.CA, files.ClientCA)
	for _, n := range cmdcli.SplitList(*nodes) {
		fmt.Fprintf(c.stdout, "  %-6s  %s  %s  (node identity %s)\n", n+":", files.Node[n], files.NodeKey[n], tlsutil.NodeURI(*cluster, n))
	}
	fmt.Fprintf(c.stdout, "  client: %s  %s\n", files.Client, files.ClientKey)
	fmt.Fprintf(c.stdout, "start a node with: intentd --cluster-name %s --tls-cert %s --tls-key %s --tls-ca %s [--tls-client-ca %s] --gossip-key KEY ...\n",
		*cluster, files.Node[cmdcli.SplitList(*nodes)[0]], files.NodeKey[cmdcli.SplitList(*nodes)[0]], files.CA, files.ClientCA)
	fmt.Fprintf(c.stdout, "and call it with: intentctl --addr https://127.0.0.1:8101 --ca %s [--cert %s --key %s] cluster\n",
		files.CA, files.Client, files.ClientKey)
	return nil
}
