package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/node"
)

// runHealthcheck is "intentd healthcheck [flags]": it asks the node
// configured by the same flags and INTENTD_* environment (the HTTP address
// and TLS files) for /readyz on loopback and exits 0 when it is ready, 1
// otherwise. Container images built FROM scratch have no shell or curl,
// so this is their HEALTHCHECK. --live asks /healthz instead.
func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	live := false
	var rest []string
	for _, a := range args {
		if a == "--live" || a == "-live" {
			live = true
			continue
		}
		rest = append(rest, a)
	}
	cfg, err := parseConfig(rest, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, node.ErrGossipKeyRequired) {
		err = nil // the probe speaks HTTP only: the node checks its own credentials
	}
	if err != nil {
		fmt.Fprintln(stderr, "intentd healthcheck:", err)
		return 2
	}
	path := "/readyz"
	if live {
		path = "/healthz"
	}
	if err := probe(ctx, cfg, path); err != nil {
		fmt.Fprintln(stderr, "intentd healthcheck:", err)
		return 1
	}
	return 0
}

// probe GETs path on the node's HTTP listener through loopback.
func probe(ctx context.Context, cfg node.Config, path string) error {
	host, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http-addr %q: %w", cfg.HTTPAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.Security.TLS() {
		scheme = "https"
		conf, err := probeTLS(cfg.Security)
		if err != nil {
			return err
		}
		tr.TLSClientConfig = conf
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, port)+path, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return nil
}

// probeTLS verifies the node's certificate against --tls-ca but not its
// host name: the probe dials loopback, which the certificate need not
// name. With --tls-client-ca it presents the node's certificate.
func probeTLS(s node.SecurityConfig) (*tls.Config, error) {
	cert, err := tlsutil.LoadKeyPair(s.TLSCert, s.TLSKey)
	if err != nil {
		return nil, err
	}
	roots, err := tlsutil.LoadCAPool(s.TLSCA)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:         tlsutil.MinVersion,
		Certificates:       []tls.Certificate{cert},
		InsecureSkipVerify: true, // replaced by the chain check below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("no server certificate")
			}
			certs := make([]*x509.Certificate, len(raw))
			for i, r := range raw {
				c, err := x509.ParseCertificate(r)
				if err != nil {
					return err
				}
				certs[i] = c
			}
			inter := x509.NewCertPool()
			for _, c := range certs[1:] {
				inter.AddCert(c)
			}
			_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		},
	}, nil
}
