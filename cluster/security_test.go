package cluster

import (
	"crypto/tls"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/ledger"
)

// testPKI is a development PKI for nodes n1..n4: a mutual-TLS config per
// node and the node identity check, as cmd/intentd builds them.
type testPKI struct {
	files    tlsutil.Files
	peers    map[string]*tls.Config
	identity func(*tls.ConnectionState) (string, error)
}

func devPKI(t *testing.T) testPKI {
	t.Helper()
	nodes := []string{"n1", "n2", "n3", "n4"}
	files, err := tlsutil.DevPKI{Dir: filepath.Join(t.TempDir(), "pki"), Nodes: nodes}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	p := testPKI{files: files, peers: map[string]*tls.Config{}}
	for _, n := range nodes {
		c, err := tlsutil.PeerConfig(files.Node[n], files.NodeKey[n], files.CA, tlsutil.DefaultCluster, n)
		if err != nil {
			t.Fatal(err)
		}
		p.peers[n] = c
	}
	pool := p.peers["n1"].RootCAs
	p.identity = func(cs *tls.ConnectionState) (string, error) {
		return tlsutil.PeerIdentity(cs, pool, tlsutil.DefaultCluster)
	}
	return p
}

// clientTLS is a TLS config that presents a client certificate (no node
// identity) signed by the node CA itself, as an operator who reused the
// node CA for API clients would hand out: it must not speak Raft.
func (p testPKI) clientTLS(t *testing.T) *tls.Config {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "c.pem"), filepath.Join(dir, "c-key.pem")
	if err := tlsutil.IssueClient(p.files.CA, p.files.CAKey, "api-client", cert, key, time.Hour); err != nil {
		t.Fatal(err)
	}
	pair, err := tlsutil.LoadKeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c := p.peers["n1"].Clone()
	c.Certificates = []tls.Certificate{pair}
	c.VerifyConnection = nil // the client does not care who answers
	return c
}

var gossipKeyA = []byte("0123456789abcdef0123456789abcdef")

// tlsCluster is a 3-node cluster whose Raft runs over mutual TLS and whose
// gossip is encrypted.
func tlsCluster(t *testing.T, pki testPKI) *testCluster {
	return newTestCluster(t, func(c *Config) {
		c.RaftTLS = pki.peers[c.ID]
		c.PeerIdentity = pki.identity
		c.GossipKey = gossipKeyA
	})
}

func TestTLSClusterFormsReplicatesAndRefusesPlaintextPeers(t *testing.T) {
	pki := devPKI(t)
	tc := tlsCluster(t, pki)
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)
	if r := tc.propose(ctx, claim("tls-k1", "o1")); r.Status != fsm.StatusGranted {
		t.Fatalf("claim over a TLS cluster: %+v", r)
	}
	waitFor(t, 30*time.Second, "every replica to apply the claim", func() bool {
		for _, n := range tc.nodes {
			var in *fsm.Intent
			_ = n.Read(ctx, ledger.Stale, func(l *fsm.Machine) { in = l.Get("default", "tls-k1") })
			if in == nil {
				return false
			}
		}
		return true
	})

	// Speak to the leader's Raft port the way each kind of peer would, with
	// a harmless stale-term AppendEntries: a server of the configuration
	// gets an answer (Success false), every other peer no answer at all.
	target := raft.ServerAddress(leader.RaftAddr())
	term := leader.raft.CurrentTerm()
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("intruder")},
		Term: 0, Leader: []byte("intruder")}
	other := devPKI(t) // another CA
	member := "n2"
	if leader.ID() == member {
		member = "n3"
	}
	cases := []struct {
		name    string
		tls     *tls.Config // nil: raft's plaintext TCP transport
		refused bool
	}{
		{"plaintext raft peer", nil, true},
		{"peer with a certificate from another CA", other.peers["n4"], true},
		{"client certificate signed by the node CA", pki.clientTLS(t), true},
		{"node certificate of a node outside the configuration", pki.peers["n4"], true},
		{"node certificate of a server of the configuration (control)", pki.peers[member], false},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var trans *raft.NetworkTransport
			if tt.tls == nil {
				var err error
				trans, err = raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 1, 2*time.Second, hclog.NewNullLogger())
				if err != nil {
					t.Fatal(err)
				}
			} else {
				sl, err := newStreamLayer("127.0.0.1:0", "", tt.tls, pki.identity)
				if err != nil {
					t.Fatal(err)
				}
				trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: sl, MaxPool: 1,
					Timeout: 2 * time.Second, Logger: hclog.NewNullLogger()})
			}
			defer trans.Close()
			var resp raft.AppendEntriesResponse
			err := trans.AppendEntries(raft.ServerID("x"), target, req, &resp)
			if tt.refused && err == nil {
				t.Fatalf("the TLS cluster answered an AppendEntries from a %s: %+v", tt.name, resp)
			}
			if !tt.refused && err != nil {
				t.Fatalf("control: a peer with the cluster CA was refused: %v", err)
			}
			if !tt.refused && resp.Success {
				t.Fatalf("control: a stale-term AppendEntries succeeded: %+v", resp)
			}
		})
	}
	if got := leader.raft.CurrentTerm(); got != term || !leader.IsLeader() {
		t.Fatalf("the probes disturbed the leader: term %d -> %d, leader %v", term, got, leader.IsLeader())
	}
}

func TestGossipKeyKeepsOutsidersOutAndLetsMembersIn(t *testing.T) {
	tc := newTestCluster(t, func(c *Config) { c.GossipKey = gossipKeyA })
	first := tc.start("n1", 1)
	tc.leader()
	cases := []struct {
		name   string
		key    []byte
		joined bool
	}{
		{"no key", nil, false},
		{"wrong key", []byte("fedcba9876543210fedcba9876543210"), false},
		{"right key (control)", gossipKeyA, true},
	}
	for i, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			mc := memberlist.DefaultLocalConfig()
			mc.Name = "probe-" + string(rune('a'+i))
			mc.BindAddr, mc.BindPort = "127.0.0.1", 0
			mc.SecretKey = tt.key
			mc.LogOutput = io.Discard
			ml, err := memberlist.Create(mc)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = ml.Shutdown() }()
			n, err := ml.Join([]string{first.GossipAddr()})
			if tt.joined {
				if err != nil || n != 1 {
					t.Fatalf("control: join with the right key: %d, %v", n, err)
				}
				waitFor(t, 10*time.Second, "the member to be seen", func() bool { return ml.NumMembers() == 2 })
				return
			}
			if err == nil || n != 0 {
				t.Fatalf("join with %s contacted %d members (err %v)", tt.name, n, err)
			}
			if ml.NumMembers() != 1 {
				t.Fatalf("join with %s: sees %d members", tt.name, ml.NumMembers())
			}
		})
	}
	for _, m := range first.gossip.snapshot() {
		if strings.HasPrefix(m.meta.ID, "probe") {
			t.Fatalf("a probe reached the cluster's member list: %+v", m)
		}
	}
}

func TestStreamLayerRefusesUnadvertisableAndHalfConfiguredTLS(t *testing.T) {
	pki := devPKI(t)
	half := pki.peers["n1"].Clone()
	half.ClientAuth = tls.NoClientCert
	cases := []struct {
		name, bind, advertise string
		tls                   *tls.Config
		noIdentity            bool
		ok                    bool
	}{
		{"unspecified bind without advertise", "0.0.0.0:0", "", nil, false, false},
		{"unspecified advertise", "127.0.0.1:0", "0.0.0.0:8200", nil, false, false},
		{"advertise without port", "127.0.0.1:0", "n1", nil, false, false},
		{"unspecified bind with a DNS advertise", "0.0.0.0:0", "n1:8200", nil, false, true},
		{"TLS without client verification", "127.0.0.1:0", "", half, false, false},
		{"mutual TLS without the node identity check", "127.0.0.1:0", "", pki.peers["n1"], true, false},
		{"mutual TLS", "127.0.0.1:0", "", pki.peers["n1"], false, true},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			identity := pki.identity
			if tt.noIdentity {
				identity = nil
			}
			sl, err := newStreamLayer(tt.bind, tt.advertise, tt.tls, identity)
			if (err == nil) != tt.ok {
				t.Fatalf("newStreamLayer(%q, %q) = %v, want ok=%v", tt.bind, tt.advertise, err, tt.ok)
			}
			if sl != nil {
				if tt.advertise != "" && sl.Addr().String() != tt.advertise {
					t.Fatalf("advertises %s, want %s", sl.Addr(), tt.advertise)
				}
				_ = sl.Close()
			}
		})
	}
}
