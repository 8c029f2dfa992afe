package tlsutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// DevPKI describes a development PKI to generate: a CA, one certificate per
// node (usable as server and client, for the HTTP API, Raft and
// forwarding) and one client certificate (for intentctl and SDK callers).
type DevPKI struct {
	// Dir receives ca.pem, ca-key.pem, NODE.pem, NODE-key.pem for each
	// node, client.pem and client-key.pem.
	Dir string
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
	CA, CAKey         string
	Node, NodeKey     map[string]string
	Client, ClientKey string
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
		Client: filepath.Join(p.Dir, "client.pem"), ClientKey: filepath.Join(p.Dir, "client-key.pem")}
	if _, err := os.Stat(f.CAKey); err == nil {
		return Files{}, fmt.Errorf("tls: %s exists; refusing to replace a CA (use another directory)", f.CAKey)
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("tls: %w", err)
	}
	now := p.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, fmt.Errorf("tls: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "intentd development CA", Organization: []string{"intentd"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(p.Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Files{}, fmt.Errorf("tls: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Files{}, fmt.Errorf("tls: CA certificate: %w", err)
	}
	if err := writePEM(f.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return Files{}, err
	}
	if err := writeKey(f.CAKey, caKey); err != nil {
		return Files{}, err
	}
	issue := func(name string, hosts []string, usages []x509.ExtKeyUsage, certFile, keyFile string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("tls: key for %s: %w", name, err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: name, Organization: []string{"intentd"}},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(p.Validity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usages,
		}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("tls: certificate for %s: %w", name, err)
		}
		if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
			return err
		}
		return writeKey(keyFile, key)
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, node := range p.Nodes {
		hosts := append([]string{node, "localhost", "127.0.0.1", "::1"}, p.Hosts...)
		f.Node[node], f.NodeKey[node] = filepath.Join(p.Dir, node+".pem"), filepath.Join(p.Dir, node+"-key.pem")
		if err := issue(node, hosts, both, f.Node[node], f.NodeKey[node]); err != nil {
			return Files{}, err
		}
	}
	if err := issue("client", nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, f.Client, f.ClientKey); err != nil {
		return Files{}, err
	}
	return f, nil
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
