package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/clusterview"
	"github.com/intentledger/intentd/internal/faults"
)

// Membership is proven, not gossiped (see DESIGN.md, "Gossip feeds the
// leader, Raft decides"). Gossip only ever adds a member (and, with TLS,
// only once its Raft address proved its node identity). Every other change
// of a server of the configuration (its removal, its demotion or promotion,
// a new Raft address) is made by the leader at the node's own request, sent
// over the node's Raft port as a forwarded command is, where with TLS the
// node's certificate proves who asks: the leader refuses a request about
// any other node. The HTTP address a node forwards callers' requests to,
// and advertises in Status, is the one the node at that Raft address tells
// over the same channel, never the one gossip carries.
//
// A membership connection opens with memberMagic and memberVersion, then
// carries one request and one answer, each a uvarint length and a JSON
// body (memberRequest, memberAnswer).
const (
	// memberMagic is the first byte of a membership connection (Raft's
	// own connections start with an RPC type, 0 to 4; forwarding with
	// forwardMagic).
	memberMagic byte = 0xF2
	// memberVersion is the protocol's version.
	memberVersion byte = 1
	// maxMemberFrame bounds a request or an answer.
	maxMemberFrame = 64 << 10
	// memberInfoTimeout bounds asking a node for its addresses.
	memberInfoTimeout = 2 * time.Second
	// memberChangeTimeout bounds a membership change request, the
	// leader's commit of the new configuration included.
	memberChangeTimeout = 10 * time.Second
	// reproveAfter is how long a proven HTTP address is kept before gossip
	// announcing another one for the node makes this node ask it again.
	reproveAfter = 5 * time.Second
	// proveBackoff is how long after a failed proof a node is asked again.
	proveBackoff = time.Second
)

// The membership requests.
const (
	// opInfo asks a node for its ID and its HTTP and Raft addresses.
	opInfo = "info"
	// opLeave asks the leader to remove the asking node.
	opLeave = "leave"
	// opSync asks the leader to make the asking node's server entry match
	// its Raft address and role (voter or replica).
	opSync = "sync"
)

// The codes of a refused request.
const (
	codeNotLeader = "not_leader"
	codeForbidden = "forbidden"
	codeUnsafe    = "unsafe"
	codeFailed    = "failed"
)

// ErrNotYourself is a membership change one node asked for about another:
// a node may change only its own membership.
var ErrNotYourself = errors.New("cluster: a node may ask only for its own membership change")

// ErrNoLiveMajority is a removal or demotion the leader refused because the
// voters left would not include a majority it currently hears from: the new
// configuration could not commit, and the cluster would have no leader
// until the unreachable voters returned (clusterview's, the same value).
var ErrNoLiveMajority = clusterview.ErrNoLiveMajority

// memberRequest is a node's membership request.
type memberRequest struct {
	Op string `json:"op"`
	// ID is the node the request is about: the asking node itself.
	ID string `json:"id,omitempty"`
	// Raft and Replica are the node's Raft address and role (opSync).
	Raft    string `json:"raft,omitempty"`
	Replica bool   `json:"replica,omitempty"`
	// Last is the node's last log index (opSync): the leader promotes a
	// nonvoter only once its log is within ReadyMaxLag of its own. nil:
	// a node too old to send it.
	Last *uint64 `json:"last,omitempty"`
}

// memberAnswer is the answer: OK, or a code and why.
type memberAnswer struct {
	OK     bool   `json:"ok"`
	Code   string `json:"code,omitempty"`
	Error  string `json:"error,omitempty"`
	Leader string `json:"leader,omitempty"` // with codeNotLeader: the leader's ID, if known
	// ID, HTTP and Raft answer opInfo.
	ID   string `json:"id,omitempty"`
	HTTP string `json:"http,omitempty"`
	Raft string `json:"raft,omitempty"`
	// Leading, Commit and Last answer opInfo too: whether the node leads,
	// its commit index and its last log index (progress.go).
	Leading bool   `json:"leading,omitempty"`
	Commit  uint64 `json:"commit,omitempty"`
	Last    uint64 `json:"last,omitempty"`
	// Identity is the node's cluster name and KEK and API keys digests
	// (nil from a node too old to tell).
	Identity *memberIdentity `json:"identity,omitempty"`
}

// err turns a refusal into an error.
func (a memberAnswer) err() error {
	switch {
	case a.OK:
		return nil
	case a.Code == codeForbidden:
		return fmt.Errorf("%w: %s", ErrNotYourself, a.Error)
	case a.Code == codeUnsafe:
		return fmt.Errorf("%w: %s", ErrNoLiveMajority, a.Error)
	}
	return fmt.Errorf("cluster: membership request refused (%s): %s", a.Code, a.Error)
}

// acceptMember takes a connection whose first byte was memberMagic (the
// stream layer read it) and serves it in the background.
func (n *Node) acceptMember(conn net.Conn) {
	s := &n.fwdServer
	s.mu.Lock()
	if s.closed || !n.raftStarted.Load() {
		s.mu.Unlock()
		_ = conn.Close()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer conn.Close()
		n.serveMember(conn)
	}()
}

// serveMember answers one membership request.
func (n *Node) serveMember(conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(memberChangeTimeout))
	br := bufio.NewReader(conn)
	version, err := br.ReadByte()
	if err != nil || version != memberVersion {
		return
	}
	body, err := readMemberFrame(br)
	if err != nil {
		return
	}
	var req memberRequest
	var a memberAnswer
	if err := json.Unmarshal(body, &req); err != nil {
		a = memberAnswer{Code: codeFailed, Error: "the request does not decode: " + err.Error()}
	} else {
		peer, proven := provenPeer(conn)
		ctx, cancel := context.WithTimeout(n.ctx, memberChangeTimeout-time.Second)
		a = n.answerMember(ctx, req, peer, proven)
		cancel()
	}
	_ = writeMemberFrame(conn, a)
}

// answerMember handles req from a peer that proved node identity peer
// (proven; without TLS nothing is proven and the channel has the trust of
// Raft itself: whoever reaches a plaintext Raft port can append entries).
func (n *Node) answerMember(ctx context.Context, req memberRequest, peer string, proven bool) memberAnswer {
	switch req.Op {
	case opInfo:
		id := n.identity()
		return memberAnswer{OK: true, ID: n.cfg.ID, HTTP: n.cfg.HTTPAddr, Raft: n.RaftAddr(), Leading: n.raft.State() == raft.Leader,
			Commit: n.raft.CommitIndex(), Last: n.raft.LastIndex(), Identity: &id}
	case opLeave, opSync:
	default:
		return memberAnswer{Code: codeFailed, Error: fmt.Sprintf("unknown request %q", req.Op)}
	}
	if proven && peer != req.ID {
		n.log.Warn("refused a membership change asked for by another node", "op", req.Op, "about", req.ID, "asked_by", peer)
		return memberAnswer{Code: codeForbidden, Error: fmt.Sprintf("node %q may not ask for a change of node %q", peer, req.ID)}
	}
	if n.stopping.Load() || n.raft.State() != raft.Leader {
		_, lid := n.raft.LeaderWithID()
		return memberAnswer{Code: codeNotLeader, Error: "this node is not the leader", Leader: string(lid)}
	}
	if err := n.changeMembership(ctx, req); err != nil {
		code := codeFailed
		switch {
		case errors.Is(err, ErrNoLiveMajority):
			code = codeUnsafe
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
			code = codeNotLeader
		}
		return memberAnswer{Code: code, Error: err.Error()}
	}
	return memberAnswer{OK: true}
}

// changeMembership makes, on the leader, the change req asks for: remove
// the node (opLeave) or make its server entry match its Raft address and
// role (opSync). A removal or demotion of a voter must leave a live
// majority (keepsLiveMajority). Changes are made one at a time.
func (n *Node) changeMembership(ctx context.Context, req memberRequest) error {
	n.memberMu.Lock()
	defer n.memberMu.Unlock()
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("cluster: reading the configuration: %w", err)
	}
	conf := f.Configuration()
	var s raft.Server
	found := false
	for _, srv := range conf.Servers {
		if string(srv.ID) == req.ID {
			s, found = srv, true
		}
	}
	id := raft.ServerID(req.ID)
	wait := func(fut raft.Future) error { return waitFuture(ctx, fut) }
	switch req.Op {
	case opLeave:
		if !found {
			return nil // already out
		}
		if s.Suffrage == raft.Voter {
			if err := n.keepsLiveMajority(conf, req.ID, time.Now()); err != nil {
				n.log.Warn("refused to remove a voter that asked to leave", "id", req.ID, "err", err)
				return err
			}
		}
		n.log.Info("removing a server at its own request", "id", req.ID)
		if err := wait(n.raft.RemoveServer(id, 0, n.cfg.ApplyTimeout)); err != nil {
			return fmt.Errorf("cluster: removing %s: %w", req.ID, err)
		}
		return nil
	case opSync:
		if !found {
			return fmt.Errorf("cluster: %s is not a server of the configuration (the leader adds members from gossip)", req.ID)
		}
		addr := s.Address
		if req.Raft != "" && string(s.Address) != req.Raft {
			if err := n.stream.verifyServer(req.Raft, req.ID); err != nil {
				return fmt.Errorf("cluster: the new Raft address of %s does not prove its identity: %w", req.ID, err)
			}
			addr = raft.ServerAddress(req.Raft)
			n.log.Info("moving a server to the Raft address it asked for", "id", req.ID, "from", s.Address, "to", addr)
			fut := n.raft.AddNonvoter(id, addr, 0, n.cfg.ApplyTimeout) // keeps a voter a voter, with the new address
			if s.Suffrage == raft.Voter {
				fut = n.raft.AddVoter(id, addr, 0, n.cfg.ApplyTimeout)
			}
			if err := wait(fut); err != nil {
				return fmt.Errorf("cluster: moving %s to %s: %w", req.ID, addr, err)
			}
		}
		switch {
		case req.Replica && s.Suffrage == raft.Voter:
			if req.ID == n.cfg.ID {
				return errors.New("cluster: the leader hands leadership over before it is demoted")
			}
			if err := n.keepsLiveMajority(conf, req.ID, time.Now()); err != nil {
				n.log.Warn("refused to demote a voter that asked to be a replica", "id", req.ID, "err", err)
				return err
			}
			n.log.Info("demoting a voter to a replica at its own request", "id", req.ID)
			if err := wait(n.raft.DemoteVoter(id, 0, n.cfg.ApplyTimeout)); err != nil {
				return fmt.Errorf("cluster: demoting %s: %w", req.ID, err)
			}
		case !req.Replica && s.Suffrage != raft.Voter:
			if req.Last != nil {
				if lag, ok := n.behind(*req.Last); !ok {
					return fmt.Errorf("cluster: %s is %d entries behind the leader's log, more than %d: it stays a nonvoter until it catches up",
						req.ID, lag, n.cfg.ReadyMaxLag)
				}
			}
			n.log.Info("promoting a replica to a voter at its own request", "id", req.ID)
			if err := wait(n.raft.AddVoter(id, addr, 0, n.cfg.ApplyTimeout)); err != nil {
				return fmt.Errorf("cluster: promoting %s: %w", req.ID, err)
			}
		}
		return nil
	}
	return fmt.Errorf("cluster: unknown membership request %q", req.Op)
}

// keepsLiveMajority checks that the voters of conf other than id include a
// majority that this leader heard from within a heartbeat timeout, with no
// failed AppendEntries since (itself included): otherwise a configuration without id could not commit, and
// until the silent voters return the cluster would have no leader (a node
// that left while another was down once wedged a healthy majority this
// way).
func (n *Node) keepsLiveMajority(conf raft.Configuration, id string, now time.Time) error {
	window := n.cfg.Raft.HeartbeatTimeout
	remaining, live := 0, 0
	var silent []string
	for _, s := range conf.Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == id {
			continue
		}
		remaining++
		if string(s.ID) == n.cfg.ID || n.contact.live(string(s.ID), now, window) {
			live++
		} else {
			silent = append(silent, string(s.ID))
		}
	}
	if remaining == 0 {
		return fmt.Errorf("%w: %s is the last voter", ErrNoLiveMajority, id)
	}
	if live < remaining/2+1 {
		return fmt.Errorf("%w: without %s, %d of %d voters answer (silent for over %s: %v)", ErrNoLiveMajority, id, live, remaining,
			window, silent)
	}
	return nil
}

// memberCall sends req to node id at its Raft address addr and returns the
// answer; with TLS the node dialled must prove it is id.
func (n *Node) memberCall(ctx context.Context, addr, id string, req memberRequest, timeout time.Duration) (memberAnswer, error) {
	var a memberAnswer
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	dial := time.Until(deadline)
	if dial <= 0 {
		return a, fmt.Errorf("cluster: asking %s: %w", id, context.DeadlineExceeded)
	}
	conn, err := n.stream.dialNode(addr, id, min(dial, forwardDialTimeout))
	if err != nil {
		return a, fmt.Errorf("cluster: asking %s at %s: %w", id, addr, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write([]byte{memberMagic, memberVersion}); err != nil {
		return a, fmt.Errorf("cluster: asking %s at %s: %w", id, addr, err)
	}
	if err := writeMemberFrame(conn, req); err != nil {
		return a, fmt.Errorf("cluster: asking %s at %s: %w", id, addr, err)
	}
	body, err := readMemberFrame(bufio.NewReader(conn))
	if err != nil {
		return a, fmt.Errorf("cluster: %s at %s did not answer: %w", id, addr, err)
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return a, fmt.Errorf("cluster: %s at %s answered something else: %w", id, addr, err)
	}
	return a, nil
}

func writeMemberFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(binary.AppendUvarint(nil, uint64(len(body))), body...))
	return err
}

func readMemberFrame(br *bufio.Reader) ([]byte, error) {
	size, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, err
	}
	if size > maxMemberFrame {
		return nil, fmt.Errorf("frame of %d bytes is over the limit of %d", size, maxMemberFrame)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(br, body); err != nil {
		return nil, err
	}
	return body, nil
}

// askLeader sends req to the leader: the one raft knows, else whichever
// server of this node's configuration accepts it (a node whose Raft
// address changed hears from no leader until the change is made). It
// returns the first definite answer: OK, or a refusal other than "not the
// leader".
func (n *Node) askLeader(ctx context.Context, req memberRequest, timeout time.Duration) error {
	type target struct{ addr, id string }
	var targets []target
	if addr, id := n.raft.LeaderWithID(); id != "" && string(id) != n.cfg.ID {
		targets = append(targets, target{string(addr), string(id)})
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if string(s.ID) != n.cfg.ID && (len(targets) == 0 || string(s.ID) != targets[0].id) {
				targets = append(targets, target{string(s.Address), string(s.ID)})
			}
		}
	}
	var errs []error
	for _, t := range targets {
		a, err := n.memberCall(ctx, t.addr, t.id, req, timeout)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if a.OK {
			return nil
		}
		if a.Code != codeNotLeader {
			return a.err()
		}
		errs = append(errs, fmt.Errorf("%s: %w", t.id, a.err()))
	}
	if len(errs) == 0 {
		return errors.New("cluster: no other server to ask")
	}
	return fmt.Errorf("cluster: no leader took the request: %w", errors.Join(errs...))
}

// requestRemoval asks the leader to remove this node (a decommission:
// Shutdown with LeaveOnShutdown), retrying while no leader takes it, for
// at most 2×leaveBudget and ctx. A leader that still leads (its handover
// failed) removes itself, under the same rule.
func (n *Node) requestRemoval(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*leaveBudget)
	defer cancel()
	req := memberRequest{Op: opLeave, ID: n.cfg.ID}
	// A leader elected a moment ago (this node may just have handed
	// leadership over) has heard from no follower yet and refuses the
	// removal for want of a live majority: that refusal is final only
	// once it has had two heartbeat timeouts to hear from them.
	var silentSince time.Time
	for {
		var err error
		if n.raft.State() == raft.Leader {
			err = n.changeMembership(ctx, req)
		} else {
			err = n.askLeader(ctx, req, memberChangeTimeout)
		}
		if errors.Is(err, ErrNoLiveMajority) {
			if silentSince.IsZero() {
				silentSince = time.Now()
			}
			if time.Since(silentSince) > 2*n.cfg.Raft.HeartbeatTimeout {
				return err
			}
		} else if err == nil || errors.Is(err, ErrNotYourself) {
			return err
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return fmt.Errorf("cluster: asking the leader to remove this node: %w", err)
		}
	}
}

// provenAddrs is what each server of the configuration told this node
// about itself over its Raft address (opInfo): the HTTP address to forward
// to and to advertise.
type provenAddrs struct {
	mu sync.Mutex
	m  map[string]*provenAddr // by node ID
}

type provenAddr struct {
	raft, http string    // raft: the address it was asked at
	at         time.Time // when it answered (zero: never)
	failedAt   time.Time // when asking it last failed
	running    chan struct{}
}

// provenHTTP returns the HTTP address node id told this node over Raft
// address raftAddr ("" when it has not), waiting up to wait for a proof it
// starts if there is none. The node's own is its configuration's. (With
// the seeded bugs faults.TrustGossipLeave and TrustGossipIDs it is
// gossip's, as before.)
func (n *Node) provenHTTP(id, raftAddr string, wait time.Duration) string {
	if id == n.cfg.ID {
		return n.cfg.HTTPAddr
	}
	if n.trustsGossipAddrs() {
		if m, ok := n.gossip.lookup(id); ok {
			return m.meta.HTTP
		}
		return ""
	}
	http, running := n.prove(id, raftAddr, false)
	if http != "" || running == nil || wait <= 0 {
		return http
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-running:
	case <-t.C:
	case <-n.ctx.Done():
	}
	http, _ = n.prove(id, raftAddr, false)
	return http
}

// prove returns the proven HTTP address of node id at raftAddr, and starts
// asking the node when there is none (or, with again, when gossip
// announces another one and the proof is older than reproveAfter) and no
// failure is recent; running is closed when the proof under way ends (nil:
// none).
func (n *Node) prove(id, raftAddr string, again bool) (http string, running <-chan struct{}) {
	now := time.Now()
	a := &n.addrs
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*provenAddr{}
	}
	p := a.m[id]
	if p != nil && p.raft == raftAddr && !p.at.IsZero() {
		http = p.http
	}
	if p != nil && p.running != nil {
		return http, p.running
	}
	stale := p == nil || p.raft != raftAddr || p.at.IsZero() || again && now.Sub(p.at) > reproveAfter
	if !stale || p != nil && now.Sub(p.failedAt) < proveBackoff || n.ctx.Err() != nil {
		return http, nil
	}
	if p == nil || p.raft != raftAddr {
		p = &provenAddr{raft: raftAddr}
		a.m[id] = p
	}
	done := make(chan struct{})
	p.running = done
	go func() {
		defer close(done)
		ans, err := n.memberCall(n.ctx, raftAddr, id, memberRequest{Op: opInfo}, memberInfoTimeout)
		if err == nil && (!ans.OK || ans.ID != id) {
			err = fmt.Errorf("the node at %s answered as %q: %s", raftAddr, ans.ID, ans.Error)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		p.running = nil
		if err != nil {
			p.failedAt = time.Now()
			n.log.Debug("could not learn a server's HTTP address from it", "id", id, "raft", raftAddr, "err", err)
			return
		}
		if p.http != ans.HTTP && p.http != "" {
			n.log.Info("a server's HTTP address changed (it said so itself)", "id", id, "from", p.http, "to", ans.HTTP)
		}
		p.http, p.at = ans.HTTP, time.Now()
		if ans.Leading {
			n.watch.noteCommit(id, ans.Commit)
		}
	}()
	return http, done
}

// keepMembership runs on every node until it stops: it learns the HTTP
// address of every server of its configuration from the server itself,
// and asks the leader to make its own server entry match its Raft address
// and role (a node restarted as a replica asks for its demotion, one
// restarted as a voter for its promotion, one on a new address to be
// moved).
func (n *Node) keepMembership() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	var next time.Time
	backoff := n.cfg.ReconcileInterval
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		f := n.raft.GetConfiguration()
		if f.Error() != nil {
			continue
		}
		var self *raft.Server
		conf := f.Configuration()
		for i, s := range conf.Servers {
			if string(s.ID) == n.cfg.ID {
				self = &conf.Servers[i]
				continue
			}
			again := false
			if m, ok := n.gossip.lookup(string(s.ID)); ok && m.meta.HTTP != "" {
				again = m.meta.HTTP != n.provenHTTP(string(s.ID), string(s.Address), 0)
			}
			n.prove(string(s.ID), string(s.Address), again)
		}
		if self == nil || n.stopping.Load() || n.gossip.leaving.Load() || n.raft.State() == raft.Leader || time.Now().Before(next) {
			continue
		}
		wantVoter := !n.cfg.Replica
		if string(self.Address) == n.RaftAddr() && (self.Suffrage == raft.Voter) == wantVoter {
			backoff = n.cfg.ReconcileInterval
			continue
		}
		if string(self.Address) == n.RaftAddr() && wantVoter && n.behindLeader() {
			continue // the leader promotes it once it caught up (progress.go)
		}
		last := n.raft.LastIndex()
		req := memberRequest{Op: opSync, ID: n.cfg.ID, Raft: n.RaftAddr(), Replica: n.cfg.Replica, Last: &last}
		ctx, cancel := context.WithTimeout(n.ctx, memberChangeTimeout)
		err := n.askLeader(ctx, req, memberChangeTimeout)
		cancel()
		if err != nil {
			n.log.Info("asked the leader to match this node's address and role; not yet", "raft", req.Raft, "replica", req.Replica,
				"err", err, "retry_in", backoff)
			next = time.Now().Add(backoff)
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		n.log.Info("the leader matched this node's address and role", "raft", req.Raft, "replica", req.Replica)
	}
}

// trustsGossipAddrs reports whether a seeded bug makes this node take HTTP
// addresses from gossip, as the cluster did before they were proven:
// faults.TrustGossipLeave, and faults.TrustGossipIDs (whose rogue member,
// recorded under the leader's ID, is found through the forwards it gets).
func (n *Node) trustsGossipAddrs() bool {
	return n.cfg.Faults.Has(faults.TrustGossipLeave) || n.cfg.Faults.Has(faults.TrustGossipIDs)
}
