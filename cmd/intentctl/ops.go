package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/tlsutil"
)

// httpClient is the HTTP client for --ca, --cert and --key (nil: the
// client package's default).
func (c *cli) httpClient() (*http.Client, error) {
	if c.ca == "" && c.cert == "" && c.key == "" {
		return nil, nil
	}
	conf, err := tlsutil.ClientConfig(c.ca, c.cert, c.key)
	if err != nil {
		return nil, usagef("%v", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = conf
	return &http.Client{Transport: tr, Timeout: client.DefaultHTTPTimeout}, nil
}

// cmdSnapshot is "snapshot save FILE", "snapshot restore FILE [--force]"
// and "snapshot dump FILE [--out OUT]".
func cmdSnapshot(ctx context.Context, c *cli, args []string) error {
	if len(args) == 0 {
		return usagef("snapshot needs save, restore or dump")
	}
	switch args[0] {
	case "save":
		return snapshotSave(ctx, c, args[1:])
	case "restore":
		return snapshotRestore(ctx, c, args[1:])
	case "dump":
		return snapshotDump(c, args[1:])
	}
	return usagef("snapshot: unknown subcommand %q (save, restore or dump)", args[0])
}

// snapshotDump verifies a snapshot file and writes it again as a JSON
// dump (fsm.Ledger.WriteSnapshotJSON): a header line, one JSON object per
// intent, one per audit log event and the SHA-256 trailer. jq reads it;
// it is a view, not a snapshot (restore refuses it).
func snapshotDump(c *cli, args []string) error {
	fs := c.flags("snapshot dump")
	out := fs.String("out", "-", "where to write (- for standard output)")
	pos, err := c.parse(fs, args, "FILE")
	if err != nil {
		return err
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	defer f.Close()
	l, err := fsm.Restore(f)
	if err != nil {
		return usagef("snapshot dump: %s is not a good snapshot: %v", pos[0], err)
	}
	if *out == "-" {
		w := bufio.NewWriter(c.stdout)
		if err := l.WriteSnapshotJSON(w); err != nil {
			return fmt.Errorf("snapshot dump: %w", err)
		}
		return w.Flush()
	}
	tmp, err := os.CreateTemp(filepath.Dir(*out), filepath.Base(*out)+".tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	w := bufio.NewWriter(tmp)
	err = l.WriteSnapshotJSON(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), *out)
	}
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	fmt.Fprintf(c.stderr, "wrote %s: index %d, %d intents as JSON lines\n", *out, l.AppliedIndex(), l.Len())
	return nil
}

// snapshotSave streams the snapshot into FILE.tmp, verifies its format
// and SHA-256 trailer by decoding it, then renames it to FILE: a file
// named FILE is always a complete, verified snapshot. FILE has mode 0600:
// a snapshot holds every intent and the signing keys (sealed or not).
func snapshotSave(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("snapshot save")
	pos, err := c.parse(fs, args, "FILE")
	if err != nil {
		return err
	}
	file := pos[0]
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	// CreateTemp makes 0600 files; say so rather than rely on it.
	err = tmp.Chmod(0o600)
	var info client.SnapshotInfo
	if err == nil {
		info, err = cl.SaveSnapshot(ctx, tmp)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	v, err := verifySnapshot(tmp.Name())
	if err != nil {
		return fmt.Errorf("snapshot save: the downloaded snapshot is bad, nothing kept: %w", err)
	}
	if v.Index != info.Index || v.Intents != info.Intents {
		return fmt.Errorf("snapshot save: headers said index %d, %d intents; the body holds index %d, %d intents", info.Index, info.Intents, v.Index, v.Intents)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	if c.output == "json" {
		return c.printJSON(map[string]any{"file": file, "snapshot": v})
	}
	fmt.Fprintf(c.stdout, "saved %s: index %d, %d intents, %d bytes, sha256 %s (verified)\n", file, v.Index, v.Intents, v.Bytes, v.Digest)
	return nil
}

// verifySnapshot decodes a snapshot file completely (format, order, count
// and SHA-256 trailer) and returns what it holds.
func verifySnapshot(path string) (client.SnapshotInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return client.SnapshotInfo{}, err
	}
	defer f.Close()
	h := sha256.New()
	n := &countReader{r: io.TeeReader(f, h)}
	l, err := fsm.Restore(n)
	if err != nil {
		return client.SnapshotInfo{}, err
	}
	if extra, _ := io.Copy(io.Discard, n); extra > 0 {
		return client.SnapshotInfo{}, fmt.Errorf("%d bytes after the trailer", extra)
	}
	return client.SnapshotInfo{Index: l.AppliedIndex(), Intents: l.Len(), Digest: hex.EncodeToString(h.Sum(nil)), Bytes: n.n}, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// snapshotRestore verifies FILE locally, then restores it into the
// cluster (refused by a non-empty ledger unless --force).
func snapshotRestore(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("snapshot restore")
	force := fs.Bool("force", false, "replace a ledger that holds intents (destroys them)")
	pos, err := c.parse(fs, args, "FILE")
	if err != nil {
		return err
	}
	v, err := verifySnapshot(pos[0])
	if err != nil {
		return usagef("snapshot restore: %s is not a good snapshot: %v", pos[0], err)
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	info, err := cl.RestoreSnapshot(ctx, data, *force)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]any{"status": "restored", "snapshot": info})
	}
	fmt.Fprintf(c.stdout, "restored %s: index %d, %d intents, sha256 %s\n", pos[0], info.Index, info.Intents, v.Digest)
	return nil
}

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
	files, err := tlsutil.DevPKI{Dir: *dir, Nodes: splitList(*nodes), Hosts: splitList(*hosts), Validity: *validity,
		Cluster: *cluster}.Generate()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "development PKI in %s (keep the *-key.pem of the CAs away from the nodes):\n  node CA:   %s\n  client CA: %s\n",
		*dir, files.CA, files.ClientCA)
	for _, n := range splitList(*nodes) {
		fmt.Fprintf(c.stdout, "  %-6s  %s  %s  (node identity %s)\n", n+":", files.Node[n], files.NodeKey[n], tlsutil.NodeURI(*cluster, n))
	}
	fmt.Fprintf(c.stdout, "  client: %s  %s\n", files.Client, files.ClientKey)
	fmt.Fprintf(c.stdout, "start a node with: intentd --cluster-name %s --tls-cert %s --tls-key %s --tls-ca %s [--tls-client-ca %s] --gossip-key KEY ...\n",
		*cluster, files.Node[splitList(*nodes)[0]], files.NodeKey[splitList(*nodes)[0]], files.CA, files.ClientCA)
	fmt.Fprintf(c.stdout, "and call it with: intentctl --addr https://127.0.0.1:8101 --ca %s [--cert %s --key %s] cluster\n",
		files.CA, files.Client, files.ClientKey)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
