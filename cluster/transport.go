package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// raftPoolSize and raftTimeout are the NetworkTransport's connection pool
// per peer and I/O deadline.
const (
	raftPoolSize = 3
	raftTimeout  = 10 * time.Second
)

// streamLayer is raft's StreamLayer over TCP, optionally wrapped in mutual
// TLS. With TLS every inbound connection must present a certificate signed
// by the cluster CA (the server config requires and verifies client
// certificates) and every outbound connection verifies the peer's
// certificate against the CA and the host name it dialled: a plaintext
// peer, or one with a certificate from another CA, cannot exchange a single
// Raft RPC with the cluster.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	tls       *tls.Config // nil: plaintext

	mu      sync.Mutex
	inbound map[*inboundConn]struct{} // accepted and not yet closed
}

// inboundConn is an accepted connection the stream layer can cut.
type inboundConn struct {
	net.Conn
	s    *streamLayer
	once sync.Once
}

// Close closes the connection and forgets it.
func (c *inboundConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.inbound, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

// closeInbound cuts every accepted connection. raft reads an
// InstallSnapshot's data on its main goroutine with no deadline (so does
// its refusal of a stale one, which drains the stream), so a sender that
// stalls mid-stream (paused, partitioned, or hostile) holds that goroutine,
// and Raft's Shutdown waits for it, until the connection ends. Shutdown
// cuts them: once Raft is stopping no inbound RPC has anywhere to go.
func (s *streamLayer) closeInbound() {
	s.mu.Lock()
	conns := make([]*inboundConn, 0, len(s.inbound))
	for c := range s.inbound {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// hostAddr is an advertised address kept as host:port, so a peer may dial
// a DNS name (a container's service name) rather than the IP it had when
// this node started.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }

// newStreamLayer listens on bind and advertises advertise (default: the
// bound address, which must then be a specific IP).
func newStreamLayer(bind, advertise string, tlsConf *tls.Config) (*streamLayer, error) {
	var adv net.Addr
	if advertise != "" {
		host, port, err := net.SplitHostPort(advertise)
		if err != nil {
			return nil, fmt.Errorf("raft advertise address %q: %w", advertise, err)
		}
		if host == "" || port == "" || port == "0" {
			return nil, fmt.Errorf("raft advertise address %q needs a host and a port", advertise)
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			return nil, fmt.Errorf("raft advertise address %q is not advertisable", advertise)
		}
		adv = hostAddr(advertise)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen on %q: %w", bind, err)
	}
	if adv == nil {
		tcp, ok := ln.Addr().(*net.TCPAddr)
		if !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
			_ = ln.Close()
			return nil, fmt.Errorf("raft bind address %q is not advertisable: set the Raft advertise address", bind)
		}
		adv = tcp
	}
	var conf *tls.Config
	if tlsConf != nil {
		conf = tlsConf.Clone()
		if conf.ClientAuth != tls.RequireAndVerifyClientCert || conf.ClientCAs == nil || conf.RootCAs == nil || len(conf.Certificates) == 0 && conf.GetCertificate == nil {
			_ = ln.Close()
			return nil, errors.New("raft TLS needs a certificate, RootCAs, ClientCAs and RequireAndVerifyClientCert (mutual TLS)")
		}
	}
	return &streamLayer{ln: ln, advertise: adv, tls: conf, inbound: map[*inboundConn]struct{}{}}, nil
}

// Accept implements net.Listener. The TLS handshake runs on the first read
// in raft's connection goroutine, so a slow or hostile peer never stalls
// the accept loop.
func (s *streamLayer) Accept() (net.Conn, error) {
	raw, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	c := &inboundConn{Conn: raw, s: s}
	s.mu.Lock()
	s.inbound[c] = struct{}{}
	s.mu.Unlock()
	if s.tls != nil {
		return tls.Server(c, s.tls), nil
	}
	return c, nil
}

// Close implements net.Listener.
func (s *streamLayer) Close() error { return s.ln.Close() }

// Addr implements net.Listener: the advertised address, which raft puts
// in the configuration for peers to dial.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial implements raft.StreamLayer. Over TLS it completes the handshake
// within timeout, verifying the peer against the CA and the dialled host.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if s.tls == nil {
		return d.Dial("tcp", string(address))
	}
	conf := s.tls.Clone()
	if conf.ServerName == "" {
		host, _, err := net.SplitHostPort(string(address))
		if err != nil {
			return nil, fmt.Errorf("raft peer address %q: %w", address, err)
		}
		conf.ServerName = host
	}
	conn, err := tls.DialWithDialer(d, "tcp", string(address), conf)
	if err != nil {
		return nil, fmt.Errorf("raft TLS dial %s: %w", address, err)
	}
	return conn, nil
}

// newTransport builds the Raft network transport over the stream layer.
func (n *Node) newTransport() (*raft.NetworkTransport, error) {
	sl, err := newStreamLayer(n.cfg.RaftAddr, n.cfg.RaftAdvertise, n.cfg.RaftTLS)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft transport: %w", err)
	}
	n.stream = sl
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  sl,
		MaxPool: raftPoolSize,
		Timeout: raftTimeout,
		Logger:  newHCLog(n.log, "raft-net"),
	}), nil
}
