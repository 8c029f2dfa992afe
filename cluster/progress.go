package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Day-2 membership (issue 28): how far a node is behind its leader, the
// identity every node of one cluster shares, and new members catching up
// as nonvoters before they vote.
//
// A follower's own commit index is capped by its own log: a follower
// whose log is far behind knows only the commit index of what it holds,
// so comparing its applied index with its own commit index called a node
// 156k entries behind ready. Every node that follows asks its leader, over
// the membership channel (opInfo, every ReconcileInterval), for the
// leader's commit index, and readiness compares its applied index with
// that (Config.ReadyMaxLag).

// DefaultReadyMaxLag is Config.ReadyMaxLag's default: how many entries a
// node's applied index may be behind its leader's commit index and still
// count ready; the leader promotes a new member to a voter once its log is
// within as many entries of the leader's.
const DefaultReadyMaxLag = 1000

// Identity is what nodes of one cluster must share beyond the keys that
// let them talk, as opaque digests (never secrets) that nodes compare over
// the membership channel: the leader does not add a member whose Cluster
// or KEK differs from its own, and a node whose Cluster or KEK differs
// from its leader's is not ready. APIKeys may differ briefly while a
// rolling reload of the keys goes round, so a difference is only warned
// about (in the log and in Status.Warnings). An empty value is a value
// like any other: a node without a KEK differs from one with a KEK.
type Identity struct {
	// Cluster is the cluster's name (--cluster-name).
	Cluster string
	// KEK is the key-encryption key's public fingerprint ("": none).
	KEK string
	// APIKeys returns the digest of the API keys the node enforces now
	// (they reload at run time); nil is "".
	APIKeys func() string
}

// memberIdentity is Identity on the wire, in the opInfo answer.
type memberIdentity struct {
	Cluster string `json:"cluster"`
	KEK     string `json:"kek"`
	APIKeys string `json:"api_keys"`
}

// identity returns this node's identity as it answers opInfo.
func (n *Node) identity() memberIdentity {
	id := memberIdentity{Cluster: n.cfg.Identity.Cluster, KEK: n.cfg.Identity.KEK}
	if n.cfg.Identity.APIKeys != nil {
		id.APIKeys = n.cfg.Identity.APIKeys()
	}
	return id
}

// refusal says why a node with identity other may not be a member of the
// cluster whose identity is mine ("" when it may): its cluster name or its
// KEK differs. whose names the other side in the message ("the leader's",
// "this node's").
func (mine memberIdentity) refusal(other memberIdentity, whose string) string {
	switch {
	case mine.Cluster != other.Cluster:
		return fmt.Sprintf("cluster name differs from %s (%s here, %s there)", whose, orNone(mine.Cluster), orNone(other.Cluster))
	case mine.KEK != other.KEK:
		return fmt.Sprintf("kek differs from %s (kek_id %s here, %s there)", whose, orNone(mine.KEK), orNone(other.KEK))
	}
	return ""
}

// orNone shows an empty digest.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// short cuts a digest to 12 digits for messages (logs carry it whole).
func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return orNone(s)
}

// leaderWatch is what this node last learned from its leader over the
// membership channel.
type leaderWatch struct {
	mu sync.Mutex
	// leader and commit: the leader's ID and the highest commit index it
	// reported while it led.
	leader string
	commit uint64
	// refused says why this node's identity bars it from the leader's
	// cluster ("" when it does not); apiKeys warns that its API keys
	// differ from the leader's.
	refused, apiKeys string
}

// noteCommit records a commit index that leader reported while leading.
func (w *leaderWatch) noteCommit(leader string, commit uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.leader != leader {
		w.leader, w.commit = leader, 0
	}
	w.commit = max(w.commit, commit)
}

// leaderCommit returns the last commit index leader reported (0: none).
func (w *leaderWatch) leaderCommit(leader string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if leader == "" || w.leader != leader {
		return 0
	}
	return w.commit
}

// verdict returns the identity refusal and the API keys warning.
func (w *leaderWatch) verdict() (refused, apiKeys string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refused, w.apiKeys
}

// watchLeader runs on every node until it stops: every ReconcileInterval
// a follower asks its leader for its commit index and identity; a node
// that is in no configuration of its own yet (joining) finds the leader
// among the gossip members and compares identities with it, so a node the
// leader will not add says why.
func (n *Node) watchLeader() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		n.askLeaderProgress(n.ctx)
	}
}

// askLeaderProgress is one round of watchLeader.
func (n *Node) askLeaderProgress(ctx context.Context) {
	if n.stopping.Load() {
		return
	}
	if n.raft.State() == raft.Leader {
		n.noteLeaderIdentity("", nil) // the leader is the reference
		return
	}
	addr, lid := n.raft.LeaderWithID()
	var (
		ans memberAnswer
		who string
		err error
	)
	switch {
	case lid != "":
		who = string(lid)
		ans, err = n.memberCall(ctx, string(addr), who, memberRequest{Op: opInfo}, memberInfoTimeout)
		if err == nil && (!ans.OK || ans.ID != who) {
			err = fmt.Errorf("the node at %s answered as %q: %s", addr, ans.ID, ans.Error)
		}
	case !n.inOwnConfiguration():
		ans, who, err = n.findLeader(ctx)
	default:
		return
	}
	if err != nil {
		n.log.Debug("could not ask the leader for its progress", "leader", who, "err", err)
		return
	}
	if !ans.Leading {
		return
	}
	n.watch.noteCommit(who, ans.Commit)
	n.noteLeaderIdentity(who, ans.Identity)
}

// inOwnConfiguration reports whether this node is a server of its latest
// configuration.
func (n *Node) inOwnConfiguration() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return true
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.ID {
			return true
		}
	}
	return false
}

// errNoLeaderFound is a joining node that found no gossip member leading.
var errNoLeaderFound = errors.New("cluster: no gossip member answered as the leader")

// findLeader asks the alive gossip members that belong to a cluster, one
// by one, until one answers that it leads.
func (n *Node) findLeader(ctx context.Context) (memberAnswer, string, error) {
	for _, m := range n.gossip.snapshot() {
		if m.meta.ID == n.cfg.ID || m.state != memberlist.StateAlive || !m.meta.Bootstrapped || m.meta.Raft == "" {
			continue
		}
		ans, err := n.memberCall(ctx, m.meta.Raft, m.meta.ID, memberRequest{Op: opInfo}, memberInfoTimeout)
		if err == nil && ans.OK && ans.ID == m.meta.ID && ans.Leading {
			return ans, m.meta.ID, nil
		}
	}
	return memberAnswer{}, "", errNoLeaderFound
}

// noteLeaderIdentity compares this node's identity with leader's (nil:
// a node too old to tell, or this node leads: nothing to compare) and
// logs what changed: an error when this node's cluster name or KEK
// differs (it is then not ready), a warning when its API keys do.
func (n *Node) noteLeaderIdentity(leader string, theirs *memberIdentity) {
	refused, apiKeys := "", ""
	mine := n.identity()
	if theirs != nil {
		if why := mine.refusal(*theirs, "the leader's"); why != "" {
			refused = why + fmt.Sprintf("; leader %s will not add this node", leader)
		}
		if mine.APIKeys != theirs.APIKeys {
			apiKeys = fmt.Sprintf("API keys differ from leader %s's (digest %s here, %s there): expected only while a reload goes round",
				leader, short(mine.APIKeys), short(theirs.APIKeys))
		}
	}
	w := &n.watch
	w.mu.Lock()
	prevRefused, prevKeys := w.refused, w.apiKeys
	w.refused, w.apiKeys = refused, apiKeys
	w.mu.Unlock()
	switch {
	case refused != "" && refused != prevRefused:
		n.log.Error("this node's identity differs from the leader's: it is not ready and the leader does not add it",
			"leader", leader, "why", refused, "cluster", mine.Cluster, "leader_cluster", theirs.Cluster,
			"kek_id", mine.KEK, "leader_kek_id", theirs.KEK)
	case refused == "" && prevRefused != "":
		n.log.Info("this node's identity matches the leader's again", "leader", leader)
	}
	switch {
	case apiKeys != "" && apiKeys != prevKeys:
		n.log.Warn("this node's API keys differ from the leader's", "leader", leader, "digest", mine.APIKeys,
			"leader_digest", theirs.APIKeys)
	case apiKeys == "" && prevKeys != "":
		n.log.Info("this node's API keys match the leader's again", "leader", leader)
	}
}

// joinCheck is the leader's memory of the members whose identity it
// refused, so it logs a refusal once, and of the new members it added as
// nonvoters to promote once they catch up.
type joinCheck struct {
	mu       sync.Mutex
	refused  map[string]string    // by node ID: why, as last logged
	catching map[string]time.Time // by node ID: when added as a nonvoter
	// evenVoters is the even voter count last warned about (0: none).
	evenVoters int
}

// refuse records why id was refused and reports whether that is news.
func (j *joinCheck) refuse(id, why string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.refused == nil {
		j.refused = map[string]string{}
	}
	news := j.refused[id] != why
	j.refused[id] = why
	return news
}

func (j *joinCheck) accept(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.refused, id)
}

func (j *joinCheck) startCatchUp(id string, at time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.catching == nil {
		j.catching = map[string]time.Time{}
	}
	j.catching[id] = at
}

// catchingUp returns the members waiting for promotion.
func (j *joinCheck) catchingUp() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]string, 0, len(j.catching))
	for id := range j.catching {
		out = append(out, id)
	}
	return out
}

func (j *joinCheck) done(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.catching, id)
}

// checkIdentity asks gossip member m, at its Raft address, for its
// identity and returns an error when the leader may not add it: it does
// not answer as m, or its cluster name or KEK differs from the leader's
// (logged at warn with both digests, once per reason). API keys that
// differ are logged and allowed. A member too old to tell its identity is
// allowed.
func (n *Node) checkIdentity(ctx context.Context, m member) (memberAnswer, error) {
	ans, err := n.memberCall(ctx, m.meta.Raft, m.meta.ID, memberRequest{Op: opInfo}, memberInfoTimeout)
	if err == nil && (!ans.OK || ans.ID != m.meta.ID) {
		err = fmt.Errorf("the node at %s answered as %q: %s", m.meta.Raft, ans.ID, ans.Error)
	}
	if err != nil {
		return ans, fmt.Errorf("cluster: asking %s for its identity: %w", m.meta.ID, err)
	}
	if ans.Identity == nil {
		return ans, nil
	}
	mine, theirs := n.identity(), *ans.Identity
	if why := mine.refusal(theirs, "this node's"); why != "" {
		if n.joins.refuse(m.meta.ID, why) {
			n.log.Warn("not adding a gossip member: its identity differs from the leader's", "id", m.meta.ID, "raft", m.meta.Raft,
				"why", why, "cluster", mine.Cluster, "member_cluster", theirs.Cluster, "kek_id", mine.KEK, "member_kek_id", theirs.KEK)
		}
		return ans, fmt.Errorf("cluster: %s: %s", m.meta.ID, why)
	}
	n.joins.accept(m.meta.ID)
	if mine.APIKeys != theirs.APIKeys {
		n.log.Warn("adding a gossip member whose API keys differ from the leader's (expected only while a reload goes round)",
			"id", m.meta.ID, "digest", mine.APIKeys, "member_digest", theirs.APIKeys)
	}
	return ans, nil
}

// behind returns how far a log whose last index is last is behind this
// leader's log, and whether that is within ReadyMaxLag.
func (n *Node) behind(last uint64) (uint64, bool) {
	lead := n.raft.LastIndex()
	if last >= lead {
		return 0, true
	}
	return lead - last, lead-last <= n.cfg.ReadyMaxLag
}

// promoteCaughtUp promotes, on the leader, the members it added as
// nonvoters (catching up) whose log is now within ReadyMaxLag of its own,
// and whose identity still matches. A member that left the configuration
// or announces itself a replica now is dropped from the list.
func (n *Node) promoteCaughtUp(ctx context.Context, servers map[string]raft.Server) {
	for _, id := range n.joins.catchingUp() {
		s, ok := servers[id]
		m, inGossip := n.gossip.lookup(id)
		switch {
		case !ok || s.Suffrage == raft.Voter || inGossip && m.meta.Replica:
			n.joins.done(id)
			continue
		case !inGossip || m.state != memberlist.StateAlive:
			continue
		}
		ans, err := n.checkIdentity(ctx, member{meta: memberMeta{ID: id, Raft: string(s.Address)}})
		if err != nil {
			n.log.Debug("not promoting a catching-up member yet", "id", id, "err", err)
			continue
		}
		lag, ok := n.behind(ans.Last)
		if !ok {
			n.log.Debug("a new member is catching up as a nonvoter", "id", id, "behind", lag, "bound", n.cfg.ReadyMaxLag)
			continue
		}
		n.log.Info("promoting a new member that caught up to a voter", "id", id, "behind", lag, "bound", n.cfg.ReadyMaxLag)
		if err := n.promote(ctx, id, s.Address); err != nil {
			n.log.Warn("promoting a caught-up member failed", "id", id, "err", err)
			continue
		}
		n.joins.done(id)
	}
}

// promote makes nonvoter id a voter, one membership change at a time.
func (n *Node) promote(ctx context.Context, id string, addr raft.ServerAddress) error {
	n.memberMu.Lock()
	defer n.memberMu.Unlock()
	return waitFuture(ctx, n.raft.AddVoter(raft.ServerID(id), addr, 0, n.cfg.ApplyTimeout))
}

// voterWarning returns the warning about an even voter count ("" for an
// odd one): 2k voters need k+1 for a majority and tolerate k-1 failures,
// as 2k-1 voters do.
func voterWarning(voters int) string {
	if voters < 2 || voters%2 == 1 {
		return ""
	}
	return fmt.Sprintf("%d voters: a majority is %d; an odd count tolerates as many failures with one node less", voters, voters/2+1)
}

// warnEvenVoters logs, on the leader, an even voter count once per count.
func (n *Node) warnEvenVoters(voters int) {
	w := voterWarning(voters)
	j := &n.joins
	j.mu.Lock()
	news := w != "" && j.evenVoters != voters
	if w == "" {
		j.evenVoters = 0
	} else {
		j.evenVoters = voters
	}
	j.mu.Unlock()
	if news {
		n.log.Warn("the cluster has an even number of voters", "voters", voters, "warning", w)
	}
}

// appendDrops is a test hook: the leader fails, without sending them, the
// AppendEntries that carry entries to the listed peers (heartbeats and
// empty probes still go), so a test can hold a follower's log behind while
// the others commit. Not pipelined AppendEntries (the wan profile's).
type appendDrops struct {
	mu  sync.Mutex
	ids map[string]bool
}

// errAppendDropped is an AppendEntries the test hook dropped.
var errAppendDropped = errors.New("cluster: test hook dropped the AppendEntries")

func (d *appendDrops) set(id string, drop bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ids == nil {
		d.ids = map[string]bool{}
	}
	d.ids[id] = drop
}

func (d *appendDrops) drops(id string, args *raft.AppendEntriesRequest) bool {
	if d == nil || len(args.Entries) == 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ids[id]
}

// behindLeader reports whether this node's log is more than ReadyMaxLag
// entries behind the commit index its leader last reported.
func (n *Node) behindLeader() bool {
	_, lid := n.raft.LeaderWithID()
	commit := n.watch.leaderCommit(string(lid))
	return commit > n.raft.LastIndex()+n.cfg.ReadyMaxLag
}
