package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// DevPKI describes a development PKI to generate: a node CA and one
// certificate per node (usable as server and client, for the HTTP API,
// Raft and forwarding, carrying the node's identity: NodeSAN, NodeURI),
// and a separate client CA with one client certificate (for intentctl and
// SDK callers): a client certificate can never speak Raft.
type DevPKI struct {
	// Dir receives ca.pem, ca-key.pem (the node CA), NODE.pem,
	// NODE-key.pem for each node, client-ca.pem, client-ca-key.pem,
	// client.pem and client-key.pem.
	Dir string
	// Cluster is the cluster name the node identities carry (default
	// DefaultCluster); nodes run with the same --cluster-name.
	Cluster string
	// Nodes names the node certificates; each name is also a DNS SAN.
	Nodes []string
	// Hosts are extra SANs on every node certificate (DNS names or IPs);
	// localhost, 127.0.0.1 and ::1 are always included.
	Hosts []string
	// Validity is how long the certificates are valid (default 1 year).
	Validity time.Duration
	// Now is the issue time (default time.Now); tests set it.
	Now func() time.Time
}

// Files lists the paths Generate writes.
type Files struct {
	CA, CAKey             string // the node CA
	Node, NodeKey         map[string]string
	ClientCA, ClientCAKey string
	Client, ClientKey     string
}

// Generate writes the PKI. It refuses to overwrite an existing CA key, so
// a second run cannot silently replace a deployment's trust root.
func (p DevPKI) Generate() (Files, error) {
	if p.Dir == "" || len(p.Nodes) == 0 {
		return Files{}, errors.New("tls: dev PKI needs a directory and at least one node")
	}
	if p.Validity <= 0 {
		p.Validity = 365 * 24 * time.Hour
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	f := Files{CA: filepath.Join(p.Dir, "ca.pem"), CAKey: filepath.Join(p.Dir, "ca-key.pem"),
		Node: map[string]string{}, NodeKey: map[string]string{},
		ClientCA: filepath.Join(p.Dir, "client-ca.pem"), ClientCAKey: filepath.Join(p.Dir, "client-ca-key.pem"),
		Client: filepath.Join(p.Dir, "client.pem"), ClientKey: filepath.Join(p.Dir, "client-key.pem")}
	if p.Cluster == "" {
		p.Cluster = DefaultCluster
	}
	for _, k := range []string{f.CAKey, f.ClientCAKey} {
		if _, err := os.Stat(k); err == nil {
			return Files{}, fmt.Errorf("tls: %s exists; refusing to replace a CA (use another directory)", k)
		}
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("tls: %w", err)
	}
	now := p.Now()
	ca, caKey, err := p.newCA("intentd node CA ("+p.Cluster+")", f.CA, f.CAKey, now)
	if err != nil {
		return Files{}, err
	}
	clientCA, clientCAKey, err := p.newCA("intentd client CA ("+p.Cluster+")", f.ClientCA, f.ClientCAKey, now)
	if err != nil {
		return Files{}, err
	}
	issue := func(ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, hosts []string, uris []*url.URL, usages []x509.ExtKeyUsage, certFile, keyFile string) error {
		return issueCert(ca, caKey, certSpec{name: name, hosts: hosts, uris: uris, usages: usages,
			notBefore: now.Add(-time.Hour), notAfter: now.Add(p.Validity)}, certFile, keyFile)
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, node := range p.Nodes {
		hosts := append([]string{node, NodeSAN(p.Cluster), "localhost", "127.0.0.1", "::1"}, p.Hosts...)
		f.Node[node], f.NodeKey[node] = filepath.Join(p.Dir, node+".pem"), filepath.Join(p.Dir, node+"-key.pem")
		if err := issue(ca, caKey, node, hosts, []*url.URL{NodeURI(p.Cluster, node)}, both, f.Node[node], f.NodeKey[node]); err != nil {
			return Files{}, err
		}
	}
	if err := issue(clientCA, clientCAKey, "client", nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, f.Client, f.ClientKey); err != nil {
		return Files{}, err
	}
	return f, nil
}

// certSpec is what a certificate says.
type certSpec struct {
	name                string
	hosts               []string // DNS names or IPs
	uris                []*url.URL
	usages              []x509.ExtKeyUsage
	notBefore, notAfter time.Time
}

// issueCert signs a certificate for spec with the CA and writes it and its
// new key.
func issueCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, spec certSpec, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("tls: key for %s: %w", spec.name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.name, Organization: []string{"intentd"}},
		NotBefore:    spec.notBefore,
		NotAfter:     spec.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  spec.usages,
		URIs:         spec.uris,
	}
	for _, h := range spec.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("tls: certificate for %s: %w", spec.name, err)
	}
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writeKey(keyFile, key)
}

// IssueClient signs a client certificate (client authentication only, no
// node identity) named name with an existing CA, valid for validity, and
// writes it to certFile and keyFile: another caller's certificate from the
// client CA of a DevPKI.
func IssueClient(caFile, caKeyFile, name, certFile, keyFile string, validity time.Duration) error {
	ca, key, err := loadCA(caFile, caKeyFile)
	if err != nil {
		return err
	}
	now := time.Now()
	return issueCert(ca, key, certSpec{name: name, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		notBefore: now.Add(-time.Hour), notAfter: now.Add(validity)}, certFile, keyFile)
}

// loadCA reads a CA certificate and its ECDSA key (as DevPKI writes them).
func loadCA(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: CA %s: %w", certFile, err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("tls: CA %s: %w", certFile, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !ca.IsCA {
		return nil, nil, fmt.Errorf("tls: %s is not an ECDSA CA", certFile)
	}
	return ca, key, nil
}

// newCA makes a self-signed CA and writes it to certFile and keyFile.
func (p DevPKI) newCA(name, certFile, keyFile string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"intentd"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(p.Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: CA certificate: %w", err)
	}
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	if err := writeKey(keyFile, key); err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("tls: random serial: %v", err)) // crypto/rand does not fail
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("tls: encode key: %w", err)
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, b, mode); err != nil {
		return fmt.Errorf("tls: write %s: %w", path, err)
	}
	return nil
}
