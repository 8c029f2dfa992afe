package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	cmdcli "github.com/intentledger/intentd/internal/cli"
	"github.com/intentledger/intentd/internal/tlsutil"
)

// cmdCerts writes a development PKI (never for production: the CA key sits
// next to the certificates), or, as "certs node" and "certs client",
// signs one more certificate with the CA of an existing one.
func cmdCerts(ctx context.Context, c *cli, args []string) error {
	sub, rest, fs := c.subcommandFlags("certs", args, tlsutil.KindNode, tlsutil.KindClient)
	if sub != "" {
		return cmdCertsIssue(ctx, c, sub, rest)
	}
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
	fmt.Fprintf(c.stdout, "more later from the same CAs: intentctl certs node --ca-dir %s --cluster %s --id n4; intentctl certs client --ca-dir %s --name NAME\n",
		*dir, *cluster, *dir)
	return nil
}

// cmdCertsIssue is "certs node" and "certs client": one certificate from
// the CA in --ca-dir, never replacing a file.
func cmdCertsIssue(_ context.Context, c *cli, kind string, args []string) error {
	fs := c.flags("certs " + kind)
	caDir := fs.String("ca-dir", "certs", "directory of the CA (ca.pem and ca-key.pem for nodes, client-ca.pem and client-ca-key.pem for clients)")
	out := fs.String("out", "", "directory to write NAME.pem and NAME-key.pem into (default --ca-dir); existing files are never replaced")
	validity := fs.Duration("validity", 365*24*time.Hour, "how long the certificate is valid (never past the CA's expiry)")
	var name, cluster, hosts *string
	if kind == tlsutil.KindNode {
		name = fs.String("id", "", "the node's ID (intentd --id): its identity intentd://CLUSTER/server/ID and its file names")
		cluster = fs.String("cluster", tlsutil.DefaultCluster, "the cluster name (intentd --cluster-name)")
		hosts = fs.String("hosts", "", "extra DNS names or IPs the node is reached at")
	} else {
		name = fs.String("name", "", "the client's name (its certificate's common name and file names)")
		cluster, hosts = new(string), new(string)
	}
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	flagName := "name"
	if kind == tlsutil.KindNode {
		flagName = "id"
	}
	if err := required(flagName, *name); err != nil {
		return err
	}
	issued, err := tlsutil.Issue{Kind: kind, CADir: *caDir, Cluster: *cluster, Name: *name, Hosts: cmdcli.SplitList(*hosts),
		Validity: *validity, OutDir: *out}.Do()
	if errors.Is(err, tlsutil.ErrExists) {
		return usagef("certs %s: %v", kind, err)
	}
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]any{"cert": issued.Cert, "key": issued.Key, "ca": issued.CA,
			"not_after": issued.NotAfter.UTC().Format(time.RFC3339), "identity": issued.Identity})
	}
	fmt.Fprintf(c.stdout, "%s certificate %s\n  key: %s (mode 0600)\n  signed by: %s\n  valid until: %s\n",
		kind, issued.Cert, issued.Key, issued.CA, issued.NotAfter.UTC().Format(time.RFC3339))
	if kind == tlsutil.KindNode {
		fmt.Fprintf(c.stdout, "  node identity: %s\n", issued.Identity)
		fmt.Fprintf(c.stdout, "start the node with: intentd --id %s --cluster-name %s --tls-cert %s --tls-key %s --tls-ca %s ...\n",
			*name, *cluster, issued.Cert, issued.Key, issued.CA)
	} else {
		fmt.Fprintf(c.stdout, "call with: intentctl --ca %s --cert %s --key %s ...\n",
			filepath.Join(*caDir, tlsutil.NodeCAFile), issued.Cert, issued.Key)
	}
	return nil
}
