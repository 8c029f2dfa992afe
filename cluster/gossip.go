package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/faults"
)

// memberMeta is what each node tells the others through gossip.
type memberMeta struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	HTTP string `json:"http"`
	// Bootstrapped is true once the node has Raft state or knows a leader;
	// a node waiting for bootstrap-expect never bootstraps a second cluster
	// beside one that exists.
	Bootstrapped bool `json:"bootstrapped"`
	// Leaving is announced just before a decommission (the node then asks
	// the leader to remove it over its Raft port), so the leader does not
	// add it back from gossip meanwhile. It is gossip's word: it never
	// removes a server (anyone with the gossip key can forge it).
	Leaving bool `json:"leaving,omitempty"`
	// Region is where the node runs (Config.Region).
	Region string `json:"region,omitempty"`
	// Replica says the node is to be a nonvoter (Config.Replica); the
	// leader makes the Raft configuration follow it.
	Replica bool `json:"replica,omitempty"`
	// Encoding is the log entry encoding version the node decodes
	// (fsm.EncodingVersion). Nothing acts on it yet: it is announced so
	// that a version that writes a new encoding can wait until every
	// server reads it, which needs every server to have said so first.
	Encoding byte `json:"encoding,omitempty"`
}

// member is a gossip member as this node last heard of it.
type member struct {
	meta  memberMeta
	state memberlist.NodeStateType
	addr  string
}

// gossip is memberlist's delegate, event sink and admission check.
type gossip struct {
	log          *slog.Logger
	self         memberMeta
	bootstrapped atomic.Bool
	leaving      atomic.Bool
	conflicts    atomic.Uint64 // members refused for a name already held
	// trustIDs is the seeded bug faults.TrustGossipIDs.
	trustIDs bool
	mu       sync.Mutex
	members  map[string]member // by node ID
	changed  chan struct{}     // signalled (non-blocking) on any event
}

func (g *gossip) NodeMeta(limit int) []byte {
	m := g.self
	m.Bootstrapped = g.bootstrapped.Load()
	m.Leaving = g.leaving.Load()
	b, _ := json.Marshal(m)
	if len(b) > limit {
		return nil
	}
	return b
}
func (g *gossip) NotifyMsg([]byte)                           {}
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (g *gossip) LocalState(join bool) []byte                { return nil }
func (g *gossip) MergeRemoteState(buf []byte, join bool)     {}

// ErrBadMember is a gossip member refused admission: its meta does not
// parse, or it announces a node ID other than its memberlist name.
var ErrBadMember = errors.New("cluster: gossip member refused")

// NotifyAlive implements memberlist.AliveDelegate: a member is admitted
// only if its meta parses and names the node it is. memberlist itself
// refuses a second member under a name it knows alive (NotifyConflict), so
// with the ID bound to the name no member can take over another's ID, and
// the forwarding and voter decisions keyed by ID stay with the node that
// owns it.
func (g *gossip) NotifyAlive(n *memberlist.Node) error {
	if g.trustIDs {
		return nil
	}
	meta, err := g.parseMeta(n)
	if err != nil {
		return err
	}
	if meta.Raft == "" || meta.HTTP == "" {
		return fmt.Errorf("%w: member %q announces no Raft or HTTP address", ErrBadMember, n.Name)
	}
	return nil
}

// NotifyConflict implements memberlist.ConflictDelegate: a second member
// claimed a name (so a node ID) that a live member holds; memberlist
// ignores it.
func (g *gossip) NotifyConflict(existing, other *memberlist.Node) {
	g.conflicts.Add(1)
	g.log.Warn("a second gossip member claims a node ID that a live member holds; refused",
		"id", existing.Name, "holder", existing.Address(), "claimant", other.Address())
}

// parseMeta decodes a member's meta and checks it names the member.
func (g *gossip) parseMeta(n *memberlist.Node) (memberMeta, error) {
	var meta memberMeta
	if err := json.Unmarshal(n.Meta, &meta); err != nil {
		return meta, fmt.Errorf("%w: member %q: meta: %v", ErrBadMember, n.Name, err)
	}
	if meta.ID != n.Name && !g.trustIDs {
		return meta, fmt.Errorf("%w: member %q announces node ID %q", ErrBadMember, n.Name, meta.ID)
	}
	return meta, nil
}

// NotifyJoin implements memberlist.EventDelegate.
func (g *gossip) NotifyJoin(n *memberlist.Node) { g.record(n, memberlist.StateAlive) }

// NotifyUpdate implements memberlist.EventDelegate.
func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.record(n, memberlist.StateAlive) }

// NotifyLeave implements memberlist.EventDelegate. memberlist calls it for
// both a graceful leave and a failure, with a stale Node.State; the
// member's last announced meta tells them apart, for Status only: no
// membership change follows from either (anyone with the gossip key can
// forge both).
func (g *gossip) NotifyLeave(n *memberlist.Node) {
	if meta, err := g.parseMeta(n); err == nil && meta.Leaving {
		g.record(n, memberlist.StateLeft)
		return
	}
	g.record(n, memberlist.StateDead)
}

func (g *gossip) record(n *memberlist.Node, state memberlist.NodeStateType) {
	meta, err := g.parseMeta(n)
	if err != nil || meta.ID == "" {
		return // not an intentd node, or one NotifyAlive refused
	}
	m := member{meta: meta, state: state, addr: n.Address()}
	g.mu.Lock()
	prev, known := g.members[meta.ID]
	g.members[meta.ID] = m
	g.mu.Unlock()
	if known && prev == m {
		return
	}
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// recordSelf records this node as alive with its current meta. (memberlist's
// LocalNode races with UpdateNode, so the node never reads it after start.)
func (g *gossip) recordSelf(addr string) {
	var meta memberMeta
	_ = json.Unmarshal(g.NodeMeta(1<<10), &meta)
	m := member{meta: meta, state: memberlist.StateAlive, addr: addr}
	g.mu.Lock()
	g.members[meta.ID] = m
	g.mu.Unlock()
}

// snapshot returns the members sorted by ID.
func (g *gossip) snapshot() []member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].meta.ID < out[j].meta.ID })
	return out
}

func (g *gossip) lookup(id string) (member, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[id]
	return m, ok
}

func (n *Node) startGossip(hasState bool) error {
	host, port, err := splitHostPort(n.cfg.GossipAddr, "127.0.0.1", 7946)
	if err != nil {
		return fmt.Errorf("cluster: gossip address: %w", err)
	}
	n.gossip = &gossip{
		log:      n.log,
		trustIDs: n.cfg.Faults.Has(faults.TrustGossipIDs),
		self: memberMeta{ID: n.cfg.ID, Raft: n.RaftAddr(), HTTP: n.cfg.HTTPAddr, Region: n.cfg.Region, Replica: n.cfg.Replica,
			Encoding: fsm.EncodingVersion},
		members: make(map[string]member),
		changed: make(chan struct{}, 1),
	}
	n.gossip.bootstrapped.Store(hasState)
	mc := networkProfiles[n.cfg.Network].memberlist()
	mc.Name = n.cfg.ID
	mc.BindAddr, mc.BindPort = host, port
	if n.cfg.GossipAdvertise != "" {
		ah, ap, err := splitHostPort(n.cfg.GossipAdvertise, host, port)
		if err != nil {
			return fmt.Errorf("cluster: gossip advertise address: %w", err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	}
	// A node that comes back on another address (a new container IP) may
	// reclaim its name once its old incarnation is known dead.
	mc.DeadNodeReclaimTime = 10 * time.Second
	if len(n.cfg.GossipKey) > 0 {
		mc.SecretKey = n.cfg.GossipKey // GossipVerifyIncoming/Outgoing stay on
	}
	mc.Delegate = n.gossip
	mc.Events = n.gossip
	mc.Alive = n.gossip
	mc.Conflict = n.gossip
	mc.Logger = newStdLogger(n.log, "memberlist")
	n.cfg.Gossip.apply(mc)
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("cluster: start gossip: %w", err)
	}
	n.ml = ml
	ln := ml.LocalNode()
	n.gossipAddr = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	return nil
}

func splitHostPort(addr, defHost string, defPort int) (string, int, error) {
	if addr == "" {
		return defHost, defPort, nil
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if h == "" {
		h = defHost
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return h, port, nil
}

// leaveGossip announces the departure in the node's meta, pushes that meta
// to every member, asks the leader to remove this node (requestRemoval),
// then leaves gossip. Each step gets at most leaveBudget and
// what is left of ctx: a paused member answers nothing, a lossy one late,
// and neither may hold the shutdown. (memberlist waits forever on a
// timeout that is not positive, so none is passed.)
func (n *Node) leaveGossip(ctx context.Context) error {
	budget := func() (time.Duration, error) {
		d := leaveBudget
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, time.Until(dl))
		}
		if d <= 0 || ctx.Err() != nil {
			return 0, fmt.Errorf("no time left to leave gossip: %w", context.DeadlineExceeded)
		}
		return d, nil
	}
	n.gossip.leaving.Store(true)
	d, err := budget()
	if err != nil {
		return err
	}
	if err := n.ml.UpdateNode(d); err != nil {
		n.log.Warn("gossip meta update before leave", "err", err)
	}
	// Gossip may deliver the leave before the meta that says it is one,
	// and a member that hears of it first records a failure (a voter kept)
	// instead of a departure. A push-pull with every member, which Join
	// does over TCP, hands each the leaving meta before the leave is sent:
	// to all of them at once, so one that does not answer costs one
	// memberlist TCP timeout, not one per member.
	if d, err = budget(); err != nil {
		return err
	}
	n.pushToMembers(d)
	// The leaving meta reached the members (the leader adds no member that
	// announces it): now ask the leader to remove this node, over its Raft
	// port. Gossip's own leave only tells the members; it changes nothing
	// in the Raft configuration.
	if err := n.requestRemoval(ctx); err != nil {
		n.log.Warn("the leader did not remove this node; it stays a server of the configuration", "err", err)
	} else {
		n.log.Info("removed from the configuration at this node's request")
	}
	if d, err = budget(); err != nil {
		return err
	}
	return n.ml.Leave(d)
}

// pushToMembers runs a push-pull with every other member concurrently and
// waits for them for at most d; one still running then ends by itself at
// memberlist's TCP timeout.
func (n *Node) pushToMembers(d time.Duration) {
	var wg sync.WaitGroup
	// The members as the event delegate recorded them: memberlist's own
	// Members hands out nodes it goes on changing under its lock.
	members := n.gossip.snapshot()
	failed := make(chan string, len(members))
	for _, m := range members {
		if m.meta.ID == n.cfg.ID || m.state != memberlist.StateAlive || m.addr == "" {
			continue
		}
		wg.Add(1)
		go func(name, addr string) {
			defer wg.Done()
			if _, err := n.ml.Join([]string{addr}); err != nil {
				failed <- name
			}
		}(m.meta.ID, m.addr)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		n.log.Warn("gossip push of the leaving meta: some members did not answer in time", "waited", d)
		return
	}
	close(failed)
	var names []string
	for name := range failed {
		names = append(names, name)
	}
	if len(names) > 0 {
		sort.Strings(names)
		n.log.Warn("gossip push of the leaving meta failed for some members", "members", names)
	}
}

// markBootstrapped tells gossip this node belongs to a cluster.
func (n *Node) markBootstrapped() {
	if n.gossip.bootstrapped.Swap(true) {
		return
	}
	if err := n.ml.UpdateNode(time.Second); err != nil {
		n.log.Debug("gossip meta update", "err", err)
	}
}

// joinAndBootstrap joins the configured gossip peers (retrying until one
// answers) and, for a new cluster, waits for BootstrapExpect members and
// bootstraps Raft with all of them. Every node computes the same
// configuration from the same members, so bootstrapping on all of them is
// safe.
func (n *Node) joinAndBootstrap(hasState bool) {
	defer n.wg.Done()
	backoff := 100 * time.Millisecond
	for len(n.cfg.Join) > 0 {
		joined, err := n.ml.Join(n.cfg.Join)
		if joined > 0 {
			n.log.Info("joined gossip", "contacted", joined)
			break
		}
		n.log.Warn("gossip join failed; retrying", "peers", n.cfg.Join, "err", err, "in", backoff)
		if !n.sleep(backoff) {
			return
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	if hasState || n.cfg.BootstrapExpect <= 0 {
		return
	}
	if n.cfg.Replica {
		// A replica never takes part in a bootstrap: the voters bootstrap
		// and their leader adds it as a nonvoter.
		n.log.Info("replica: waiting for the voters' leader to add it as a nonvoter")
		return
	}
	for {
		n.gossip.recordSelf(n.gossipAddr)
		members := n.gossip.snapshot()
		alive := members[:0:0]
		existing := false
		for _, m := range members {
			if m.state != memberlist.StateAlive {
				continue
			}
			if m.meta.Bootstrapped && m.meta.ID != n.cfg.ID {
				existing = true
			}
			if !m.meta.Replica { // replicas are never in the bootstrap configuration
				alive = append(alive, m)
			}
		}
		if existing {
			n.log.Info("found an existing cluster in gossip; waiting to be added as a voter")
			return
		}
		if len(alive) >= n.cfg.BootstrapExpect {
			var conf raft.Configuration
			for _, m := range alive {
				conf.Servers = append(conf.Servers, raft.Server{
					Suffrage: raft.Voter, ID: raft.ServerID(m.meta.ID), Address: raft.ServerAddress(m.meta.Raft)})
			}
			n.log.Info("bootstrapping cluster", "servers", len(conf.Servers))
			if err := n.raft.BootstrapCluster(conf).Error(); err != nil && err != raft.ErrCantBootstrap {
				n.log.Error("bootstrap failed", "err", err)
			}
			n.markBootstrapped()
			return
		}
		select {
		case <-n.ctx.Done():
			return
		case <-n.gossip.changed:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// sleep waits d or until the node stops; false when stopping.
func (n *Node) sleep(d time.Duration) bool {
	select {
	case <-n.ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
