package nemesis

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/gossipforge"
	"github.com/intentledger/intentd/internal/tlsutil"
	"github.com/intentledger/intentd/jepsen/nodes"
)

// Trust is what the trust-boundary nemeses need: the cluster's gossip key,
// to act as an insider that holds it (or a thief), and, when the nodes run
// with TLS, their PKI, to show that lesser credentials get nothing.
type Trust struct {
	GossipKey []byte
	// PKI is the nodes' development PKI; nil when they run without TLS.
	PKI *tlsutil.Files
	// HostIP is the controller's address on the nodes' network, where
	// rogue members listen.
	HostIP string
}

// Finding is a heal's report of something that got through the trust
// boundary: runOne records it on the fault (the trust-boundary checker
// reports it) and the heal counts as done.
type Finding struct{ What string }

func (f *Finding) Error() string { return "finding: " + f.What }

// rogueMember joins gossip with the cluster's key as members that lie: one
// announces the leader's node ID under a name of its own, one takes the
// leader's name, and (with TLS) one claims a new ID without a node
// certificate. None may be recorded under a node's ID, receive a request
// or become a voter; the checks run before the rogues leave.
func rogueMember(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	if env.Trust == nil || len(env.Trust.GossipKey) == 0 || env.Nodes == nil {
		return "", nil, nil, errors.New("rogue-member needs the cluster's gossip key (Env.Trust) and real nodes")
	}
	l, c, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	r, err := env.rng()
	if err != nil {
		return "", nil, nil, err
	}
	tag := strconv.Itoa(r.Intn(1_000_000))
	trapHTTP, hits, err := startTrap(env.Trust.HostIP)
	if err != nil {
		return "", nil, nil, err
	}
	trapRaft, err := net.Listen("tcp", net.JoinHostPort(env.Trust.HostIP, "0"))
	if err != nil {
		trapHTTP.Close()
		return "", nil, nil, err
	}
	var join []string
	for i := 1; i <= c.Nodes(); i++ {
		join = append(join, env.Nodes.GossipAddr(i))
	}
	leaderID := nodes.Name(l)
	type rogue struct{ name, id string }
	rogues := []rogue{{"rogue-" + tag, leaderID}, {leaderID, leaderID}}
	if env.Trust.PKI != nil {
		rogues = append(rogues, rogue{"r" + tag, "r" + tag})
	}
	var started []*memberlist.Memberlist
	stop := func() {
		for _, ml := range started {
			_ = ml.Shutdown()
		}
		trapHTTP.Close()
		_ = trapRaft.Close()
	}
	for _, rg := range rogues {
		ml, err := joinRogue(rg.name, rg.id, env.Trust, trapRaft.Addr().String(), trapHTTP.Listener.Addr().String(), join)
		if err != nil {
			stop()
			return "", nil, nil, fmt.Errorf("rogue %s: %w", rg.name, err)
		}
		started = append(started, ml)
	}
	heal := func(ctx context.Context) error {
		defer stop()
		var seen []string
		for i := 1; i <= c.Nodes(); i++ {
			if !env.Nodes.Running(i) || env.Nodes.Paused(i) {
				continue
			}
			st, err := env.Nodes.Status(ctx, i)
			if err != nil {
				continue // a node busy recovering: the others still tell
			}
			for _, m := range st.Members {
				// A member with the key and a new ID is a gossip member
				// (the key is the membership credential); it must not be a
				// voter without a node certificate. No node's ID may ever
				// carry a rogue's addresses.
				impostor := m.HTTPAddr == trapHTTP.Listener.Addr().String() && m.ID != "r"+tag ||
					m.RaftAddr == trapRaft.Addr().String() && m.ID != "r"+tag
				if impostor || m.ID == "r"+tag && m.Suffrage != "" {
					seen = append(seen, fmt.Sprintf("%s lists %s (raft %s, http %s, %s)", nodes.Name(i), m.ID, m.RaftAddr, m.HTTPAddr, orNone(m.Suffrage)))
				}
			}
		}
		if n := hits.Load(); n > 0 {
			seen = append(seen, fmt.Sprintf("the rogues' HTTP address received %d requests", n))
		}
		if len(seen) > 0 {
			return &Finding{What: "a rogue gossip member got through: " + strings.Join(seen, "; ")}
		}
		return nil
	}
	detail := fmt.Sprintf("%d rogue gossip members with the key: one announces leader %s's ID, one takes its name", len(rogues), leaderID)
	if env.Trust.PKI != nil {
		detail += ", one claims new ID r" + tag + " without a node certificate"
	}
	return detail, []string{leaderID}, heal, nil
}

// startTrap serves HTTP on the controller's address and counts requests.
func startTrap(ip string) (*httptestServer, *atomic.Int64, error) {
	var hits atomic.Int64
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusCreated)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &httptestServer{Listener: ln, srv: srv}, &hits, nil
}

type httptestServer struct {
	Listener net.Listener
	srv      *http.Server
}

func (s *httptestServer) Close() { _ = s.srv.Close() }

// rogueMeta announces a chosen gossip meta.
type rogueMeta struct{ meta []byte }

func (r rogueMeta) NodeMeta(int) []byte                      { return r.meta }
func (rogueMeta) NotifyMsg([]byte)                           {}
func (rogueMeta) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (rogueMeta) LocalState(bool) []byte                     { return nil }
func (rogueMeta) MergeRemoteState([]byte, bool)              {}

// joinRogue starts a memberlist member named name on the controller's
// address announcing intentd's gossip meta for node id (the same JSON a
// node announces) with the trap addresses, and joins it to the cluster.
func joinRogue(name, id string, t *Trust, raftAddr, httpAddr string, join []string) (*memberlist.Memberlist, error) {
	meta, err := json.Marshal(map[string]any{"id": id, "raft": raftAddr, "http": httpAddr, "bootstrapped": true,
		"encoding": fsm.EncodingVersion})
	if err != nil {
		return nil, err
	}
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr, mc.BindPort = t.HostIP, 0
	mc.SecretKey = t.GossipKey
	mc.Delegate = rogueMeta{meta: meta}
	mc.LogOutput = io.Discard
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, err
	}
	if _, err := ml.Join(join); err != nil {
		_ = ml.Shutdown()
		return nil, err
	}
	return ml, nil
}

// raftPoke speaks to the leader's Raft port as strangers would, each with
// an AppendEntries from a far future term carrying an entry: over
// plaintext, with a client certificate signed by the node CA, and with a
// node certificate from another CA. A cluster running TLS must answer none
// of them (an answer is a finding); without TLS the poke would be obeyed,
// so the nemesis needs TLS.
func raftPoke(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	if env.Trust == nil || env.Trust.PKI == nil || env.Nodes == nil {
		return "", nil, nil, errors.New("raft-poke needs nodes running with TLS (jepsen --tls): without it Raft trusts every peer by design")
	}
	l, _, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	dir, err := os.MkdirTemp("", "raft-poke")
	if err != nil {
		return "", nil, nil, err
	}
	defer os.RemoveAll(dir)
	client, err := pokeTLS(dir, env.Trust.PKI)
	if err != nil {
		return "", nil, nil, err
	}
	target := raft.ServerAddress(env.Nodes.RaftAddr(l))
	var answered []string
	for _, p := range []struct {
		name string
		tls  *tls.Config
	}{{"plaintext", nil}, {"client certificate from the node CA", client.fromNodeCA}, {"node certificate from another CA", client.otherCA}} {
		if err := poke(target, p.tls); err == nil {
			answered = append(answered, p.name)
		}
	}
	heal := func(context.Context) error {
		if len(answered) > 0 {
			return &Finding{What: "the leader's Raft port answered an AppendEntries from: " + strings.Join(answered, ", ")}
		}
		return nil
	}
	return fmt.Sprintf("AppendEntries of term 2^40 to leader %s's Raft port: plaintext, node-CA client certificate, other-CA node certificate",
		nodes.Name(l)), []string{nodes.Name(l)}, heal, nil
}

// pokeCreds are the lesser TLS credentials raftPoke tries.
type pokeCreds struct{ fromNodeCA, otherCA *tls.Config }

func pokeTLS(dir string, pki *tlsutil.Files) (pokeCreds, error) {
	var out pokeCreds
	cert, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if err := tlsutil.IssueClient(pki.CA, pki.CAKey, "raft-poke", cert, key, time.Hour); err != nil {
		return out, err
	}
	c, err := tlsutil.ClientConfig(pki.CA, cert, key)
	if err != nil {
		return out, err
	}
	c.InsecureSkipVerify = true // the poke does not care who answers, only whether
	out.fromNodeCA = c
	other, err := tlsutil.DevPKI{Dir: filepath.Join(dir, "other"), Nodes: []string{"n1"}}.Generate()
	if err != nil {
		return out, err
	}
	o, err := tlsutil.ClientConfig(other.CA, other.Node["n1"], other.NodeKey["n1"])
	if err != nil {
		return out, err
	}
	o.InsecureSkipVerify = true
	out.otherCA = o
	return out, nil
}

// poke sends one AppendEntries; nil means the target answered.
func poke(target raft.ServerAddress, conf *tls.Config) error {
	var trans *raft.NetworkTransport
	if conf == nil {
		t, err := raft.NewTCPTransportWithLogger("0.0.0.0:0", nil, 1, 2*time.Second, hclog.NewNullLogger())
		if err != nil {
			return err
		}
		trans = t
	} else {
		trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: &tlsDialer{conf: conf}, MaxPool: 1,
			Timeout: 2 * time.Second, Logger: hclog.NewNullLogger()})
	}
	defer trans.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("raft-poke"), Addr: []byte("raft-poke")},
		Term:      1 << 40, Leader: []byte("raft-poke"), PrevLogEntry: 0, PrevLogTerm: 0,
		Entries:           []*raft.Log{{Index: 1 << 40, Term: 1 << 40, Type: raft.LogCommand, Data: []byte("raft-poke")}},
		LeaderCommitIndex: 1 << 40,
	}
	var resp raft.AppendEntriesResponse
	return trans.AppendEntries("raft-poke-target", target, req, &resp)
}

// tlsDialer is a raft.StreamLayer that only dials, over TLS.
type tlsDialer struct{ conf *tls.Config }

func (d *tlsDialer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", string(address), d.conf)
}
func (d *tlsDialer) Accept() (net.Conn, error) { return nil, errors.New("tlsDialer does not accept") }
func (d *tlsDialer) Close() error              { return nil }
func (d *tlsDialer) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4zero} }

// forgeryPoll is how often gossip-forgery forges again and reads every
// node's /v1/cluster while it holds.
const forgeryPoll = 100 * time.Millisecond

// gossipForgery acts as a member holding only the gossip key: again and
// again while it holds, it forges for a live follower an alive message
// with a far higher incarnation whose meta says leaving, replica and the
// trap's HTTP address, then that follower's leave, and for the leader an
// alive message with the trap's HTTP address. Gossip's word alone must
// change nothing: heal reports a finding if any node's /v1/cluster (read
// throughout the hold) showed the follower removed or demoted, or a voter
// fewer, or listed the trap's address, or if the trap received a request
// (a follower forwarding a caller's request to it).
func gossipForgery(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	if env.Trust == nil || len(env.Trust.GossipKey) == 0 || env.Nodes == nil {
		return "", nil, nil, errors.New("gossip-forgery needs the cluster's gossip key (Env.Trust) and real nodes")
	}
	l, c, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	r, err := env.rng()
	if err != nil {
		return "", nil, nil, err
	}
	followers := others(c.Nodes(), l)
	f := followers[r.Intn(len(followers))]
	inc := uint32(1_000_000 + r.Intn(1_000_000))
	st, err := env.Nodes.Status(ctx, l)
	if err != nil {
		return "", nil, nil, err
	}
	baseline := map[string]bool{}
	for _, m := range st.Members {
		if m.Suffrage == "voter" {
			baseline[m.ID] = true
		}
	}
	trapHTTP, hits, err := startTrap(env.Trust.HostIP)
	if err != nil {
		return "", nil, nil, err
	}
	trapAddr := trapHTTP.Listener.Addr().String()
	meta := func(i int, leaving bool) ([]byte, error) {
		return json.Marshal(map[string]any{"id": nodes.Name(i), "raft": env.Nodes.RaftAddr(i), "http": trapAddr,
			"bootstrapped": true, "encoding": fsm.EncodingVersion, "leaving": leaving, "replica": leaving})
	}
	followerMeta, err := meta(f, true)
	if err != nil {
		trapHTTP.Close()
		return "", nil, nil, err
	}
	leaderMeta, err := meta(l, false)
	if err != nil {
		trapHTTP.Close()
		return "", nil, nil, err
	}
	var toFollower, toLeader []string
	for i := 1; i <= c.Nodes(); i++ {
		if i != f {
			toFollower = append(toFollower, env.Nodes.GossipAddr(i)) // about f, to everyone but f
		}
		if i != l {
			toLeader = append(toLeader, env.Nodes.GossipAddr(i))
		}
	}
	forger := gossipforge.Forger{Key: env.Trust.GossipKey}
	forge := func() {
		inc += 1000
		_ = forger.Alive(toFollower, nodes.Name(f), env.Nodes.GossipAddr(f), inc, followerMeta)
		_ = forger.Leave(toFollower, nodes.Name(f), inc)
		_ = forger.Alive(toLeader, nodes.Name(l), env.Nodes.GossipAddr(l), inc, leaderMeta)
	}
	var mu sync.Mutex
	var seen []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) < 8 && !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	check := func(ctx context.Context) {
		for i := 1; i <= c.Nodes(); i++ {
			if !env.Nodes.Running(i) || env.Nodes.Paused(i) {
				continue
			}
			st, err := env.Nodes.Status(ctx, i)
			if err != nil {
				continue // a node busy recovering: the others still tell
			}
			voters := 0
			for _, m := range st.Members {
				if m.Suffrage == "voter" {
					voters++
				}
				if m.HTTPAddr == trapAddr {
					note(fmt.Sprintf("%s lists %s at the forged HTTP address %s", nodes.Name(i), m.ID, trapAddr))
				}
				if m.ID == nodes.Name(f) && m.Suffrage != "voter" {
					note(fmt.Sprintf("%s lists the forged follower %s as %s", nodes.Name(i), m.ID, orNone(m.Suffrage)))
				}
			}
			if voters < len(baseline) && len(st.Members) > 0 {
				note(fmt.Sprintf("%s lists %d voters, %d before the forgery", nodes.Name(i), voters, len(baseline)))
			}
		}
	}
	pollCtx, stopPoll := context.WithCancel(context.WithoutCancel(ctx))
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		t := time.NewTicker(forgeryPoll)
		defer t.Stop()
		for {
			forge()
			check(pollCtx)
			select {
			case <-pollCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	heal := func(ctx context.Context) error {
		stopPoll()
		<-polled
		defer trapHTTP.Close()
		check(ctx)
		mu.Lock()
		defer mu.Unlock()
		if n := hits.Load(); n > 0 {
			seen = append(seen, fmt.Sprintf("the forged HTTP address received %d requests", n))
		}
		if len(seen) > 0 {
			return &Finding{What: "gossip's word alone changed the cluster: " + strings.Join(seen, "; ")}
		}
		return nil
	}
	return fmt.Sprintf("forged gossip with the key only: %s alive (incarnation %d+) leaving, replica, http %s, then its leave; leader %s alive with http %s",
			nodes.Name(f), inc, trapAddr, nodes.Name(l), trapAddr),
		[]string{nodes.Name(f), nodes.Name(l)}, heal, nil
}
