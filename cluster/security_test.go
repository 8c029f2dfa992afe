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

// devPKI writes a CA with certificates for nodes n1..n4 and returns a
// mutual-TLS config per node.
func devPKI(t *testing.T) map[string]*tls.Config {
	t.Helper()
	nodes := []string{"n1", "n2", "n3", "n4"}
	files, err := tlsutil.DevPKI{Dir: filepath.Join(t.TempDir(), "pki"), Nodes: nodes}.Generate()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tls.Config{}
	for _, n := range nodes {
		c, err := tlsutil.PeerConfig(files.Node[n], files.NodeKey[n], files.CA)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	return out
}

var gossipKeyA = []byte("0123456789abcdef0123456789abcdef")

// tlsCluster is a 3-node cluster whose Raft runs over mutual TLS and whose
// gossip is encrypted.
func tlsCluster(t *testing.T, peers map[string]*tls.Config) *testCluster {
	return newTestCluster(t, func(c *Config) {
		c.RaftTLS = peers[c.ID]
		c.GossipKey = gossipKeyA
	})
}

func TestTLSClusterFormsReplicatesAndRefusesPlaintextPeers(t *testing.T) {
	peers := devPKI(t)
	tc := tlsCluster(t, peers)
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)
	if r := tc.propose(ctx, claim("tls-k1", "o1")); r.Status != fsm.StatusGranted {
		t.Fatalf("claim over a TLS cluster: %+v", r)
	}
	waitFor(t, 30*time.Second, "every replica to apply the claim", func() bool {
		for _, n := range tc.nodes {
			var in *fsm.Intent
			_ = n.Read(ctx, ledger.Stale, func(l *fsm.Ledger) { in = l.Get("default", "tls-k1") })
			if in == nil {
				return false
			}
		}
		return true
	})

	// Speak to the leader's Raft port the way each kind of peer would, with
	// a harmless stale-term AppendEntries: an authenticated peer gets an
	// answer (Success false), the others get no answer at all.
	target := raft.ServerAddress(leader.RaftAddr())
	term := leader.raft.CurrentTerm()
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("intruder")},
		Term: 0, Leader: []byte("intruder")}
	other := devPKI(t) // another CA
	cases := []struct {
		name    string
		tls     *tls.Config // nil: raft's plaintext TCP transport
		refused bool
	}{
		{"plaintext raft peer", nil, true},
		{"peer with a certificate from another CA", other["n4"], true},
		{"peer with a certificate from the cluster CA (control)", peers["n4"], false},
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
				sl, err := newStreamLayer("127.0.0.1:0", "", tt.tls)
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
	peers := devPKI(t)
	half := peers["n1"].Clone()
	half.ClientAuth = tls.NoClientCert
	cases := []struct {
		name, bind, advertise string
		tls                   *tls.Config
		ok                    bool
	}{
		{"unspecified bind without advertise", "0.0.0.0:0", "", nil, false},
		{"unspecified advertise", "127.0.0.1:0", "0.0.0.0:8200", nil, false},
		{"advertise without port", "127.0.0.1:0", "n1", nil, false},
		{"unspecified bind with a DNS advertise", "0.0.0.0:0", "n1:8200", nil, true},
		{"TLS without client verification", "127.0.0.1:0", "", half, false},
		{"mutual TLS", "127.0.0.1:0", "", peers["n1"], true},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			sl, err := newStreamLayer(tt.bind, tt.advertise, tt.tls)
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
