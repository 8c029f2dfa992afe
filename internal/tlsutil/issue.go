package tlsutil

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// The file names of a DevPKI's CAs, which Issue reads from its CADir.
const (
	NodeCAFile      = "ca.pem"
	NodeCAKeyFile   = "ca-key.pem"
	ClientCAFile    = "client-ca.pem"
	ClientCAKeyFile = "client-ca-key.pem"
)

// Kinds of certificate Issue makes.
const (
	// KindNode is a node certificate: server and client authentication,
	// the node identity (NodeSAN, NodeURI), signed by the node CA.
	KindNode = "node"
	// KindClient is an API client's certificate: client authentication
	// only, no node identity, signed by the client CA.
	KindClient = "client"
)

// Issue describes one certificate to sign with an existing CA (a DevPKI's,
// or any ECDSA CA laid out the same way): a node certificate for a node
// added to the cluster or replacing one, or a rotated one; or a client
// certificate.
type Issue struct {
	// Kind is KindNode or KindClient.
	Kind string
	// CADir holds the CA: ca.pem and ca-key.pem (node), client-ca.pem and
	// client-ca-key.pem (client).
	CADir string
	// Cluster is the cluster name a node identity carries (default
	// DefaultCluster); the nodes run with --cluster-name Cluster.
	Cluster string
	// Name is the node ID (KindNode) or the client's name; it names the
	// files, OutDir/Name.pem and OutDir/Name-key.pem.
	Name string
	// Hosts are extra SANs of a node certificate (DNS names or IPs); the
	// node ID, NodeSAN, localhost, 127.0.0.1 and ::1 are always on it.
	Hosts []string
	// Validity is how long the certificate is valid (default 1 year),
	// never past the CA's own expiry.
	Validity time.Duration
	// OutDir receives the certificate and key (default CADir).
	OutDir string
	// Now is the issue time (default time.Now); tests set it.
	Now func() time.Time
}

// Issued is what Issue wrote.
type Issued struct {
	// Cert and Key are the files written; CA is the certificate of the
	// CA that signed them (what peers verify it against).
	Cert, Key, CA string
	// NotAfter is when the certificate expires.
	NotAfter time.Time
	// Identity is a node certificate's node identity (NodeURI); empty for
	// a client.
	Identity string
}

// ErrExists refuses to overwrite a certificate or key file.
var ErrExists = errors.New("tls: refusing to overwrite an existing file")

// Do signs the certificate and writes it and its new key (mode 0600).
// It never overwrites a file: if either exists it fails with ErrExists
// and writes nothing. Before it writes anything it checks the new
// certificate as a peer would: it verifies against the CA, and a node
// certificate carries the node identity NodeIdentity expects.
func (is Issue) Do() (Issued, error) {
	if !validFileName(is.Name) {
		return Issued{}, fmt.Errorf("tls: name %q: want 1 to 64 letters, digits and . _ -, starting with a letter or digit", is.Name)
	}
	if is.Cluster == "" {
		is.Cluster = DefaultCluster
	}
	if is.Validity <= 0 {
		is.Validity = 365 * 24 * time.Hour
	}
	if is.Now == nil {
		is.Now = time.Now
	}
	if is.OutDir == "" {
		is.OutDir = is.CADir
	}
	var caFile, caKeyFile string
	var spec certSpec
	switch is.Kind {
	case KindNode:
		caFile, caKeyFile = filepath.Join(is.CADir, NodeCAFile), filepath.Join(is.CADir, NodeCAKeyFile)
		spec = certSpec{name: is.Name, hosts: append([]string{is.Name, NodeSAN(is.Cluster), "localhost", "127.0.0.1", "::1"}, is.Hosts...),
			uris: []*url.URL{NodeURI(is.Cluster, is.Name)}, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	case KindClient:
		if len(is.Hosts) > 0 {
			return Issued{}, errors.New("tls: a client certificate names no hosts")
		}
		caFile, caKeyFile = filepath.Join(is.CADir, ClientCAFile), filepath.Join(is.CADir, ClientCAKeyFile)
		spec = certSpec{name: is.Name, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	default:
		return Issued{}, fmt.Errorf("tls: kind %q: want %s or %s", is.Kind, KindNode, KindClient)
	}
	out := Issued{Cert: filepath.Join(is.OutDir, is.Name+".pem"), Key: filepath.Join(is.OutDir, is.Name+"-key.pem"), CA: caFile}
	for _, f := range []string{out.Cert, out.Key} {
		if _, err := os.Lstat(f); err == nil {
			return Issued{}, fmt.Errorf("%w: %s (write into another --out directory, then move the files into place)", ErrExists, f)
		} else if !os.IsNotExist(err) {
			return Issued{}, fmt.Errorf("tls: %w", err)
		}
	}
	ca, caKey, err := loadCA(caFile, caKeyFile)
	if err != nil {
		return Issued{}, err
	}
	now := is.Now()
	spec.notBefore, spec.notAfter = now.Add(-time.Hour), now.Add(is.Validity)
	if spec.notAfter.After(ca.NotAfter) {
		spec.notAfter = ca.NotAfter
	}
	if !spec.notAfter.After(now) {
		return Issued{}, fmt.Errorf("tls: the CA %s expired on %s", caFile, ca.NotAfter.Format(time.RFC3339))
	}
	if err := os.MkdirAll(is.OutDir, 0o700); err != nil {
		return Issued{}, fmt.Errorf("tls: %w", err)
	}
	// Sign into a private directory beside the targets, check, then link
	// each file into place: a link never replaces an existing file, so a
	// file that appeared meanwhile is not overwritten either.
	tmp, err := os.MkdirTemp(is.OutDir, ".issue-")
	if err != nil {
		return Issued{}, fmt.Errorf("tls: %w", err)
	}
	defer os.RemoveAll(tmp)
	tmpCert, tmpKey := filepath.Join(tmp, "cert.pem"), filepath.Join(tmp, "key.pem")
	if err := issueCert(ca, caKey, spec, tmpCert, tmpKey); err != nil {
		return Issued{}, err
	}
	leaf, err := CheckIssued(tmpCert, tmpKey, caFile, is.Kind, is.Cluster, now)
	if err != nil {
		return Issued{}, err
	}
	out.NotAfter = leaf.NotAfter
	if is.Kind == KindNode {
		out.Identity = NodeURI(is.Cluster, is.Name).String()
	}
	if err := os.Link(tmpCert, out.Cert); err != nil {
		return Issued{}, fmt.Errorf("%w: %w", ErrExists, err)
	}
	if err := os.Link(tmpKey, out.Key); err != nil {
		_ = os.Remove(out.Cert)
		return Issued{}, fmt.Errorf("%w: %w", ErrExists, err)
	}
	return out, nil
}

// CheckIssued checks a certificate and key as a peer would at time now:
// the key matches, the certificate verifies against caFile for its
// purpose, and a node certificate (kind KindNode) carries a node identity
// of cluster (NodeIdentity) while a client certificate carries none. It
// returns the certificate.
func CheckIssued(certFile, keyFile, caFile, kind, cluster string, now time.Time) (*x509.Certificate, error) {
	pair, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls: %s: %w", certFile, err)
	}
	pool, err := LoadCAPool(caFile)
	if err != nil {
		return nil, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if kind == KindNode {
		usage = x509.ExtKeyUsageServerAuth
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return nil, fmt.Errorf("tls: %s does not verify against %s: %w", certFile, caFile, err)
	}
	id, idErr := NodeIdentity(leaf, cluster)
	switch {
	case kind == KindNode && idErr != nil:
		return nil, fmt.Errorf("tls: %s: %w", certFile, idErr)
	case kind == KindNode && id != leaf.Subject.CommonName:
		return nil, fmt.Errorf("tls: %s names node %q but is issued to %q", certFile, id, leaf.Subject.CommonName)
	case kind != KindNode && idErr == nil:
		return nil, fmt.Errorf("tls: client certificate %s carries node identity %q", certFile, id)
	}
	return leaf, nil
}

// validFileName reports whether s can name a certificate (and its files).
func validFileName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if !alnum && (i == 0 || (b != '.' && b != '_' && b != '-')) {
			return false
		}
	}
	return true
}
