package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
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
	// verifyTimeout bounds the node identity check of a prospective voter
	// (the leader's reconcile waits for it).
	verifyTimeout = 2 * time.Second
)

// streamLayer is raft's StreamLayer over TCP, optionally wrapped in mutual
// TLS. With TLS every inbound connection must present a node certificate
// (the server config requires and verifies client certificates, and
// identity names the node it proves) of a node allowed to speak Raft to
// this one (allow), and every outbound connection verifies that the peer
// is a node of the cluster (Dial): a plaintext peer, one with a
// certificate from another CA, or a client certificate cannot exchange a
// single Raft RPC with the cluster.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	tls       *tls.Config // nil: plaintext
	// identity names the node a verified TLS peer is (with tls); allow
	// says whether that node may speak Raft to this one now.
	identity func(*tls.ConnectionState) (string, error)
	allow    func(id string) bool

	mu      sync.Mutex
	inbound map[*inboundConn]struct{} // accepted and not yet closed

	// forward takes a connection that opened with forwardMagic (a
	// follower forwarding commands, forward.go) away from raft, and member
	// one that opened with memberMagic (a node's membership request,
	// membership.go); nil leaves such connections to raft.
	forward func(net.Conn)
	member  func(net.Conn)
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
func newStreamLayer(bind, advertise string, tlsConf *tls.Config, identity func(*tls.ConnectionState) (string, error)) (*streamLayer, error) {
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
		if identity == nil {
			_ = ln.Close()
			return nil, errors.New("raft TLS needs the peer identity check (Config.PeerIdentity)")
		}
	}
	return &streamLayer{ln: ln, advertise: adv, tls: conf, identity: identity, inbound: map[*inboundConn]struct{}{}}, nil
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
	var conn net.Conn = c
	if s.tls != nil {
		conn = &peerConn{Conn: tls.Server(c, s.tls), s: s}
	}
	return &sniffConn{Conn: conn, s: s}, nil
}

// sniffConn is an accepted connection as raft gets it: its first read
// looks at the first byte, and a connection that opens with forwardMagic
// goes to the forwarding server instead (raft reads EOF, and its Close
// leaves the connection open). Over TLS the first read completes the
// handshake and the peer check first (peerConn), so only a node allowed
// to speak Raft to this one can forward to it. Raft reads each
// connection from one goroutine, so the fields need no lock.
type sniffConn struct {
	net.Conn
	s        *streamLayer
	sniffed  bool
	hijacked bool
	held     []byte // the first byte, not yet read by raft
	err      error
}

func (c *sniffConn) Read(b []byte) (int, error) {
	if !c.sniffed {
		c.sniffed = true
		first := make([]byte, 1)
		switch _, err := io.ReadFull(c.Conn, first); {
		case err != nil:
			c.err = err
		case first[0] == forwardMagic && c.s.forward != nil:
			c.hijacked, c.err = true, io.EOF
			c.s.forward(c.Conn)
		case first[0] == memberMagic && c.s.member != nil:
			c.hijacked, c.err = true, io.EOF
			c.s.member(c.Conn)
		default:
			c.held = first
		}
	}
	if c.err != nil {
		return 0, c.err
	}
	if len(c.held) > 0 && len(b) > 0 {
		b[0], c.held = c.held[0], nil
		return 1, nil
	}
	return c.Conn.Read(b)
}

// Close closes the connection unless the forwarding server took it.
func (c *sniffConn) Close() error {
	if c.hijacked {
		return nil
	}
	return c.Conn.Close()
}

// peerConn is an inbound TLS connection that speaks Raft only once its
// peer proved to be a node allowed to (handshake, then the node identity
// against the configuration). The check runs on the first read, in raft's
// connection goroutine, bounded by raftTimeout.
type peerConn struct {
	net.Conn // *tls.Conn
	s        *streamLayer
	once     sync.Once
	err      error
	// id is the node identity the peer proved (set by verify, before
	// any byte is read).
	id string
}

func (c *peerConn) Read(b []byte) (int, error) {
	c.once.Do(func() { c.err = c.verify() })
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(b)
}

func (c *peerConn) verify() error {
	tc := c.Conn.(*tls.Conn)
	ctx, cancel := context.WithTimeout(context.Background(), raftTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = tc.Close()
		return fmt.Errorf("raft TLS handshake with %s: %w", tc.RemoteAddr(), err)
	}
	cs := tc.ConnectionState()
	id, err := c.s.identity(&cs)
	if err == nil && c.s.allow != nil && !c.s.allow(id) {
		err = fmt.Errorf("%w: node %q is not a server of this node's configuration", ErrPeerRefused, id)
	}
	if err != nil {
		_ = tc.Close()
		return fmt.Errorf("raft peer %s refused: %w", tc.RemoteAddr(), err)
	}
	c.id = id
	return nil
}

// provenPeer returns the node identity the peer of an accepted connection
// proved with its node certificate; ok is false on a plaintext connection,
// whose peer proved nothing.
func provenPeer(conn net.Conn) (id string, ok bool) {
	if pc, is := conn.(*peerConn); is && pc.err == nil && pc.id != "" {
		return pc.id, true
	}
	return "", false
}

// ErrPeerRefused is a Raft peer that proved a node identity this node does
// not accept.
var ErrPeerRefused = errors.New("cluster: raft peer refused")

// Close implements net.Listener.
func (s *streamLayer) Close() error { return s.ln.Close() }

// Addr implements net.Listener: the advertised address, which raft puts
// in the configuration for peers to dial.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial implements raft.StreamLayer. Over TLS it completes the handshake
// within timeout, verifying that the peer is a node of the cluster (the
// TLS configuration's VerifyConnection, the node CA and the server name it
// sets) or, without one, the dialled host.
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

// verifyServer dials a prospective server's Raft address and checks, with
// TLS, that it proves the node identity id: a gossip member is added as a
// voter only if the node at that address is the node it claims to be.
// Without TLS there is nothing to check.
func (s *streamLayer) verifyServer(address, id string) error {
	if s.tls == nil {
		return nil
	}
	conn, err := s.dialNode(address, id, verifyTimeout)
	if err != nil {
		return err
	}
	return conn.Close()
}

// dialNode dials the node id at its Raft address; with TLS the peer must
// prove that it is that node (its certificate's node identity).
func (s *streamLayer) dialNode(address, id string, timeout time.Duration) (net.Conn, error) {
	conn, err := s.Dial(raft.ServerAddress(address), timeout)
	if err != nil || s.tls == nil {
		return conn, err
	}
	cs := conn.(*tls.Conn).ConnectionState()
	got, err := s.identity(&cs)
	if err == nil && got != id {
		err = fmt.Errorf("%w: the server at %s is node %q, not %q", ErrPeerRefused, address, got, id)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// serialTransport is the Raft transport with raft's heartbeat fast path
// turned off, so every RPC, heartbeats included, is handled on Raft's main
// goroutine.
//
// hashicorp/raft (v1.7.3, hashicorp/raft#695, open) answers a heartbeat on
// the transport's goroutine through appendEntries, whose own comment says
// it must run on the main goroutine. A heartbeat from a newer leader then
// raises the term while a deposed leader's main goroutine dispatches a
// client's entries, and those entries are written with the new leader's
// term. They match the new leader's terms at the same indexes, so the
// follower keeps them ("clearing log suffix" never runs) and applies them
// when the commit index passes: the replicas' state machines diverge. The
// fault suite found it: a leader paused with SIGSTOP while claims queued
// applied its own claims at eight indexes where every other node applied
// the new leader's (digests-equal, long profile seed 2). The cost is that a
// heartbeat waits behind whatever the main goroutine is doing (a log
// append and its fsync), which the election timeout easily covers.
//
// It also notes, per peer, when an AppendEntries (a heartbeat included)
// last got an answer (contact): the leader's own observation of which
// followers are alive, which membership changes consult (membership.go).
type serialTransport struct {
	*raft.NetworkTransport
	contact *contacts // nil: not noted
	// drops is a test hook (progress.go); nil: none.
	drops *appendDrops
}

// SetHeartbeatHandler keeps raft's fast path unset: heartbeats reach the
// consumer channel like every other RPC.
func (serialTransport) SetHeartbeatHandler(func(raft.RPC)) {}

// AppendEntries sends the RPC and notes an answer as contact with id.
func (t serialTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest,
	resp *raft.AppendEntriesResponse) error {
	if t.drops.drops(string(id), args) {
		return errAppendDropped
	}
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if t.contact != nil {
		t.contact.note(string(id), time.Now(), err == nil)
	}
	return err
}

// contacts is when each peer last answered this node's AppendEntries, and
// when an AppendEntries to it last failed.
type contacts struct {
	mu     sync.Mutex
	last   map[string]time.Time
	failed map[string]time.Time
}

// note records an answer (ok) or a failure of an AppendEntries to id.
func (c *contacts) note(id string, at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last, c.failed = map[string]time.Time{}, map[string]time.Time{}
	}
	if ok {
		c.last[id] = at
	} else {
		c.failed[id] = at
	}
}

// since returns when id last answered (zero: never).
func (c *contacts) since(id string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[id]
}

// live reports whether id answered within window before now and no
// AppendEntries to it failed since: a peer that crashed a moment ago
// (refused connection, timed-out RPC) is not counted live for the rest of
// the window on the strength of its last answer.
func (c *contacts) live(id string, now time.Time, window time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.last[id]
	return !last.IsZero() && now.Sub(last) <= window && !c.failed[id].After(last)
}

// newTransport builds the Raft network transport over the stream layer.
func (n *Node) newTransport() (*raft.NetworkTransport, error) {
	sl, err := newStreamLayer(n.cfg.RaftAddr, n.cfg.RaftAdvertise, n.cfg.RaftTLS, n.cfg.PeerIdentity)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft transport: %w", err)
	}
	sl.allow = n.mayRaft
	sl.forward = n.acceptForward
	sl.member = n.acceptMember
	n.stream = sl
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  sl,
		MaxPool: raftPoolSize,
		// Pipelined replication on the wan profile only, and then through
		// drainedPipeline (pipeline.go): raft v1.7's own pipeline wedges
		// when a follower answers Success=false (hashicorp/raft#612); the
		// fault suite caught it as a node that would not stop.
		MaxRPCsInFlight: networkProfiles[n.cfg.Network].inFlight,
		Timeout:         raftTimeout,
		Logger:          newHCLog(n.log, "raft-net"),
	}), nil
}

// mayRaft says whether node id may speak Raft to this node: a server of
// this node's latest configuration (committed or being added) may; when
// this node is in no configuration of its own (new, or removed and about
// to be added back) any node of the cluster may, since it has no vote to
// protect and the leader that adds it may be one it never knew.
func (n *Node) mayRaft(id string) bool {
	if n.raft == nil {
		return true // starting: raft has not read its configuration yet
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	member := false
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
		if string(s.ID) == n.cfg.ID {
			member = true
		}
	}
	return !member
}
