// Package nemesis injects the fault suite's faults: named, composable
// nemeses (partitions, kills, pauses, packet loss) and a scheduler that
// runs them one at a time, every few seconds, from a seed.
//
// The schedule is a pure function of the seed: Run draws which nemesis
// runs next, how long to wait before it, and a seed for the nemesis's own
// choices (which nodes) from Env.Rand only, all before waiting, so neither
// timing nor how many random numbers a nemesis uses shifts the sequence.
// Only what the cluster itself decides (which node leads) can differ
// between two runs with the same seed.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
	"github.com/intentledger/intentd/jepsen/netns"
	"github.com/intentledger/intentd/jepsen/nodes"
	"github.com/intentledger/intentd/jepsen/wan"
)

// Bounds on the waits Run and the nemeses make.
const (
	// DefaultRecover bounds waiting, after a heal, for every running node
	// to be ready again when Env.Recover is zero.
	DefaultRecover = 60 * time.Second
	// HealTimeout bounds one heal (a restart waits for readiness), also
	// after the run's context has ended.
	HealTimeout = 2 * time.Minute
	// LeaderTimeout bounds waiting for an agreed leader before a
	// leader-targeted fault.
	LeaderTimeout = 20 * time.Second
	// leaderProbe bounds asking for the leader to annotate a fault.
	leaderProbe = 5 * time.Second
	// pauseElections is how many election timeouts a pause lasts at least,
	// so that the other nodes notice and elect a new leader.
	pauseElections = 4
	// lossRate is the fraction of packets the loss nemesis drops.
	lossRate = 0.3
)

// Env is what nemeses act on.
type Env struct {
	Net   *netns.Net
	Nodes *nodes.Cluster
	// Rec receives one history.Fault per injected fault (may be nil).
	Rec *history.Recorder
	// Rand is the only source of the schedule's choices.
	Rand *rand.Rand
	// Log receives progress lines (may be nil).
	Log func(string, ...any)
	// Recover bounds waiting, after each heal, for every running node to be
	// ready again (default DefaultRecover).
	Recover time.Duration
	// OnRestart, when set, is called as soon as restart-read has killed a
	// node and before it starts again: the workload aims reads at the node
	// while it restarts (workload W3).
	OnRestart func(ctx context.Context, i int)
	// Trust holds the credentials the trust-boundary nemeses (rogue-member,
	// raft-poke) need; nil: they refuse to start.
	Trust *Trust
	// Layout places the nodes in regions (nil: none); the leader-region
	// nemeses need it.
	Layout *wan.Layout
	// Shaper is the link-delay layer's (nil: no delay); the wan nemesis
	// changes its matrix.
	Shaper *wan.Shaper
	// PowerLoss says whether the power-loss nemeses drop every unsynced
	// change (clean), tear the last write (torn), or draw one of the two
	// for each loss (mixed, the default).
	PowerLoss PowerLossMode

	// Test seams: when set, used instead of Net and Nodes.
	net     network
	cluster cluster
}

// network is what nemeses need from a netns.Net.
type network interface {
	Nodes() int
	Partition(groups [][]int) error
	Block(pairs [][2]int) error
	Deafen(i int) error
	Loss(i int, p float64) error
	Heal() error
}

// cluster is what nemeses need from a nodes.Cluster.
type cluster interface {
	Nodes() int
	Leader(ctx context.Context) (int, error)
	WaitLeader(ctx context.Context) (int, error)
	WaitReady(ctx context.Context, ids ...int) error
	Kill(i int) error
	Stop(ctx context.Context, i int) error
	Restart(ctx context.Context, i int) error
	SetClockOffset(ctx context.Context, i int, offset time.Duration) error
	Pause(i int) error
	Resume(i int) error
	// Recover continues paused nodes, starts the ones not running and
	// resets clock offsets.
	Recover(ctx context.Context) error
	ElectionTimeout() time.Duration
}

func (e *Env) network() (network, error) {
	if e.net != nil {
		return e.net, nil
	}
	if e.Net == nil {
		return nil, errors.New("nemesis: Env.Net is nil")
	}
	return e.Net, nil
}

func (e *Env) nodes() (cluster, error) {
	if e.cluster != nil {
		return e.cluster, nil
	}
	if e.Nodes == nil {
		return nil, errors.New("nemesis: Env.Nodes is nil")
	}
	return e.Nodes, nil
}

// networkAndRand returns the network and the step's generator.
func (e *Env) networkAndRand() (network, *rand.Rand, error) {
	nw, err := e.network()
	if err != nil {
		return nil, nil, err
	}
	r, err := e.rng()
	return nw, r, err
}

// nodesAndRand returns the cluster and the step's generator.
func (e *Env) nodesAndRand() (cluster, *rand.Rand, error) {
	c, err := e.nodes()
	if err != nil {
		return nil, nil, err
	}
	r, err := e.rng()
	return c, r, err
}

func (e *Env) logf(format string, args ...any) {
	if e.Log != nil {
		e.Log(format, args...)
	}
}

func (e *Env) rng() (*rand.Rand, error) {
	if e.Rand == nil {
		return nil, errors.New("nemesis: Env.Rand is nil")
	}
	return e.Rand, nil
}

// Nemesis is one kind of fault.
type Nemesis interface {
	// Name is the nemesis's name as ByName knows it.
	Name() string
	// Start injects the fault and returns a description, the targeted
	// nodes ("n<i>") and a function that heals it. Choices are drawn from
	// env.Rand only. When err is not nil, heal, if not nil, undoes what was
	// injected before the failure.
	Start(ctx context.Context, env *Env) (detail string, targets []string, heal func(context.Context) error, err error)
}

// named is a Nemesis made of a name and a start function.
type named struct {
	name  string
	start func(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error)
}

func (n named) Name() string { return n.name }

func (n named) Start(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	return n.start(ctx, env)
}

var registry = []named{
	{"partition-halves", partitionHalves},
	{"isolate-leader", isolateLeader},
	{"deafen-leader", deafenLeader},
	{"kill-random", killRandom},
	{"kill-leader", killLeader},
	{"kill-minority", killMinority},
	{"pause-leader", pauseLeader},
	{"pause-random", pauseRandom},
	{"loss", loss},
	{"ring", ring},
	{"bridge", bridge},
	{"clock-skew", clockSkew},
	{"snapshot-install", snapshotInstall},
	{"membership", membership},
	{"restart-read", restartRead},
	{"kill-stop-restart", killStopRestart},
	{"rogue-member", rogueMember},
	{"raft-poke", raftPoke},
	{"gossip-forgery", gossipForgery},
	{"wan", wanChange},
	{"isolate-leader-region", isolateLeaderRegion},
	{"kill-leader-region", killLeaderRegion},
	{"power-loss-random", powerLossRandom},
	{"power-loss-leader", powerLossLeader},
	{"power-loss-minority", powerLossMinority},
	{"power-loss-all", powerLossAll},
	{"disk-full-leader", diskFullLeader},
	{"disk-full-follower", diskFullFollower},
	{"corrupt-log-tail", corruptLogTail},
	{"corrupt-log-middle", corruptLogMiddle},
	{"corrupt-log-entry", corruptLogEntry},
	{"corrupt-snapshot", corruptSnapshot},
	{"corrupt-state", corruptState},
}

// Names lists every nemesis ByName knows, in a fixed order.
func Names() []string {
	names := make([]string, len(registry))
	for i, n := range registry {
		names[i] = n.name
	}
	return names
}

// ByName returns the nemesis called name, or, for "a+b", the composition
// of a and b (Compose). The error lists the valid names.
func ByName(name string) (Nemesis, error) {
	if parts := strings.Split(name, "+"); len(parts) > 1 {
		nems := make([]Nemesis, len(parts))
		for i, p := range parts {
			n, err := ByName(p)
			if err != nil {
				return nil, err
			}
			nems[i] = n
		}
		return Compose(nems...), nil
	}
	for _, n := range registry {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("nemesis: unknown nemesis %q (valid: %s, or several joined with +)", name, strings.Join(Names(), ", "))
}

// Compose makes one nemesis of several: Start starts them in order
// (undoing the started ones if one fails), heal heals them in reverse
// order. Its name is the names joined with "+". Faults that act on the
// same layer do not stack: netns.Partition and Heal replace and clear every
// partition, so compose a network fault with a process fault, not two
// network faults.
func Compose(nems ...Nemesis) Nemesis {
	names := make([]string, len(nems))
	for i, n := range nems {
		names[i] = n.Name()
	}
	return named{name: strings.Join(names, "+"), start: func(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
		var details []string
		var targets []string
		var heals []func(context.Context) error
		healAll := func(ctx context.Context) error {
			var errs []error
			for i := len(heals) - 1; i >= 0; i-- {
				if heals[i] != nil {
					errs = append(errs, heals[i](ctx))
				}
			}
			return errors.Join(errs...)
		}
		for _, n := range nems {
			d, t, h, err := n.Start(ctx, env)
			heals = append(heals, h)
			if err != nil {
				return "", nil, healAll, fmt.Errorf("%s: %w", n.Name(), err)
			}
			details = append(details, n.Name()+": "+d)
			for _, x := range t {
				if !slices.Contains(targets, x) {
					targets = append(targets, x)
				}
			}
		}
		return strings.Join(details, "; "), targets, healAll, nil
	}}
}

// Run schedules faults until ctx ends: it waits a jittered interval
// (uniform in [interval/2, 3·interval/2)), picks one of nems, starts it,
// records a history.Fault (LeaderBefore from the cluster's agreed leader),
// holds it for hold, heals it, waits (bounded by Env.Recover) until every
// running node is ready again, and records the end with the leader after
// healing. All choices come from env.Rand (see the package comment). It
// always heals the active fault before returning, also when ctx is
// cancelled. It returns nil when ctx ends, or the first error that
// prevented injecting or healing a fault, or a cluster that did not
// recover after a heal.
func Run(ctx context.Context, env *Env, nems []Nemesis, interval, hold time.Duration) error {
	if len(nems) == 0 {
		return errors.New("nemesis: no nemeses to run")
	}
	if interval <= 0 || hold <= 0 {
		return fmt.Errorf("nemesis: interval %v and hold %v must be positive", interval, hold)
	}
	r, err := env.rng()
	if err != nil {
		return err
	}
	// Nemeses run in seeded rounds: every one once per round, in a
	// shuffled order, so a short run still exercises each kind.
	var round []int
	for {
		if len(round) == 0 {
			round = r.Perm(len(nems))
		}
		// Draw the whole step before waiting: the sequence depends on the
		// seed only.
		st := plan(r, round[0], interval)
		round = round[1:]
		if !fitsBeforeEnd(ctx, st.wait+hold) {
			// The run would end during the hold: a fault healed early
			// tests neither the failover nor the recovery, so none starts.
			<-ctx.Done()
			return nil
		}
		timer := time.NewTimer(st.wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		if err := runOne(ctx, env, nems[st.pick], st.rng(), hold); err != nil {
			// A harness failure ends the schedule but not the run: heal
			// what can be healed so the history so far can be checked.
			env.logf("%v; healing everything and ending the fault schedule", err)
			healCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HealTimeout)
			defer cancel()
			if herr := env.healAll(healCtx); herr != nil {
				return errors.Join(err, fmt.Errorf("healing everything after it: %w", herr))
			}
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// fitsBeforeEnd reports whether d passes before ctx's deadline (always,
// when ctx has none).
func fitsBeforeEnd(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// step is one scheduled fault.
type step struct {
	wait time.Duration
	pick int
	seed int64
}

func (s step) rng() *rand.Rand { return rand.New(rand.NewSource(s.seed)) }

// plan draws the next step from r, always the same three numbers, so a
// nemesis that draws more or fewer (from its own generator) never shifts
// the schedule.
func plan(r *rand.Rand, pick int, interval time.Duration) step {
	return step{
		wait: interval/2 + time.Duration(r.Int63n(int64(interval))),
		pick: pick,
		seed: r.Int63(),
	}
}

// runOne injects, holds, heals and records one fault. A step that fails
// (start, heal, recovery) is recorded on the fault as a harness event and
// returned.
func runOne(ctx context.Context, env *Env, nem Nemesis, r *rand.Rand, hold time.Duration) (err error) {
	name := nem.Name()
	before := env.leaderName(ctx)
	stepEnv := *env
	stepEnv.Rand = r
	detail, targets, heal, startErr := nem.Start(ctx, &stepEnv)
	healCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HealTimeout)
	defer cancel()
	record := func() int {
		if env.Rec == nil {
			return -1
		}
		return env.Rec.StartFault(history.Fault{Nemesis: name, Detail: detail, Targets: targets, LeaderBefore: before})
	}
	if startErr != nil {
		if heal != nil {
			if herr := heal(healCtx); herr != nil {
				startErr = errors.Join(startErr, fmt.Errorf("undoing it: %w", herr))
			}
		}
		if ctx.Err() != nil {
			env.logf("nemesis %s: not started, run ended: %v", name, startErr)
			return nil
		}
		err := fmt.Errorf("nemesis %s: start: %w", name, startErr)
		if idx := record(); idx >= 0 {
			env.Rec.FailFault(idx, err)
		}
		return err
	}
	idx := record()
	fail := func(err error) error {
		if idx >= 0 {
			env.Rec.FailFault(idx, err)
		}
		return err
	}
	env.logf("nemesis %s: %s (targets %s)", name, detail, strings.Join(targets, ","))
	timer := time.NewTimer(hold)
	cut := false
	select {
	case <-ctx.Done():
		cut = true
	case <-timer.C:
	}
	timer.Stop()
	var healErr error
	if heal != nil {
		healErr = heal(healCtx)
	}
	if f := (*Finding)(nil); errors.As(healErr, &f) {
		if idx >= 0 {
			env.Rec.FindFault(idx, f.What)
		}
		env.logf("nemesis %s: FINDING: %s", name, f.What)
		healErr = nil
	}
	// Wait for recovery even when the run has ended: the next step (the
	// final reads) needs the cluster back, and the fault's record needs the
	// leader after it.
	var recoverErr error
	if healErr == nil {
		recoverErr = env.waitRecovered(healCtx)
	}
	after := ""
	if healErr == nil && recoverErr == nil {
		after = env.leaderName(healCtx)
	}
	if idx >= 0 {
		env.Rec.EndFault(idx, after, cut)
	}
	switch {
	case healErr != nil:
		return fail(fmt.Errorf("nemesis %s: heal: %w", name, healErr))
	case recoverErr != nil:
		return fail(fmt.Errorf("nemesis %s: cluster did not recover after healing: %w", name, recoverErr))
	}
	env.logf("nemesis %s: healed (leader %s -> %s)", name, orNone(before), orNone(after))
	return nil
}

// healAll undoes every fault the harness can: it heals the network,
// continues paused nodes, starts stopped or killed ones and sets every
// clock right, then waits for the cluster to recover. Run calls it after a
// failed step, so the history that is left can still be checked.
func (e *Env) healAll(ctx context.Context) error {
	var errs []error
	if nw, err := e.network(); err == nil {
		if err := nw.Heal(); err != nil {
			errs = append(errs, fmt.Errorf("heal the network: %w", err))
		}
	}
	c, err := e.nodes()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if err := c.Recover(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := e.waitRecovered(ctx); err != nil {
		errs = append(errs, fmt.Errorf("cluster did not recover: %w", err))
	}
	return errors.Join(errs...)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// leaderName asks, briefly, for the agreed leader; "" if there is none.
func (e *Env) leaderName(ctx context.Context) string {
	c, err := e.nodes()
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, leaderProbe)
	defer cancel()
	l, err := c.WaitLeader(ctx)
	if err != nil {
		return ""
	}
	return nodes.Name(l)
}

// waitRecovered waits, bounded by Env.Recover, until every running node is
// ready.
func (e *Env) waitRecovered(ctx context.Context) error {
	c, err := e.nodes()
	if err != nil {
		return nil // nothing to wait for
	}
	d := e.Recover
	if d <= 0 {
		d = DefaultRecover
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return c.WaitReady(ctx)
}

// leader waits, bounded, for the agreed leader.
func (e *Env) leader(ctx context.Context) (int, cluster, error) {
	c, err := e.nodes()
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, LeaderTimeout)
	defer cancel()
	l, err := c.WaitLeader(ctx)
	if err != nil {
		return 0, nil, err
	}
	return l, c, nil
}

// names formats node numbers as IDs.
func names(ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = nodes.Name(id)
	}
	return out
}

// perm is a random order of the nodes 1..n.
func perm(r *rand.Rand, n int) []int {
	p := r.Perm(n)
	for i := range p {
		p[i]++
	}
	return p
}

func sorted(ids []int) []int {
	s := append([]int(nil), ids...)
	sort.Ints(s)
	return s
}

// halves splits the nodes at random into a majority and a minority.
func halves(r *rand.Rand, n int) (majority, minority []int) {
	p := perm(r, n)
	return sorted(p[:n/2+1]), sorted(p[n/2+1:])
}

// minority picks a random minority (at least one node).
func minority(r *rand.Rand, n int) []int {
	k := max((n-1)/2, 1)
	return sorted(perm(r, n)[:k])
}

// ringPairs is Jepsen's majorities ring: the nodes in a random ring, each
// seeing only the nodes within d places of it, with d the smallest that
// makes every view a majority; no two nodes see the same majority. It
// returns the ring order and the blocked pairs.
func ringPairs(r *rand.Rand, n int) ([]int, [][2]int) {
	order := perm(r, n)
	d := (n/2 + 1) / 2
	var pairs [][2]int
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			if dist := min(b-a, n-(b-a)); dist > d {
				pairs = append(pairs, [2]int{order[a], order[b]})
			}
		}
	}
	return order, pairs
}

// bridgePairs is Jepsen's bridge: two halves that cannot see each other
// and one node that sees both.
func bridgePairs(r *rand.Rand, n int) (bridge int, left, right []int, pairs [][2]int) {
	p := perm(r, n)
	bridge = p[0]
	left, right = sorted(p[1:1+(n-1)/2]), sorted(p[1+(n-1)/2:])
	for _, a := range left {
		for _, b := range right {
			pairs = append(pairs, [2]int{a, b})
		}
	}
	return bridge, left, right, pairs
}

func join(ids []int) string { return strings.Join(names(ids), ",") }

// healNet is the heal of every network fault.
func healNet(nw network) func(context.Context) error {
	return func(context.Context) error { return nw.Heal() }
}

func partitionHalves(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	nw, r, err := env.networkAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	maj, minor := halves(r, nw.Nodes())
	if err := nw.Partition([][]int{maj, minor}); err != nil {
		return "", nil, healNet(nw), err
	}
	return fmt.Sprintf("majority %s | minority %s", join(maj), join(minor)), names(minor), healNet(nw), nil
}

func isolateLeader(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	nw, err := env.network()
	if err != nil {
		return "", nil, nil, err
	}
	l, _, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	if err := nw.Partition([][]int{{l}, others(nw.Nodes(), l)}); err != nil {
		return "", nil, healNet(nw), err
	}
	return fmt.Sprintf("leader %s cut off from every other node", nodes.Name(l)), names([]int{l}), healNet(nw), nil
}

// others lists the nodes 1..n except one.
func others(n, except int) []int {
	var out []int
	for i := 1; i <= n; i++ {
		if i != except {
			out = append(out, i)
		}
	}
	return out
}

// deafenLeader lets the leader send but not hear: its entries reach the
// followers, their acknowledgements never come back, so it steps down
// with entries a new leader will commit. Writes in flight there have an
// unknown outcome, which is what the leadership-lost positive control
// misreports.
func deafenLeader(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	nw, err := env.network()
	if err != nil {
		return "", nil, nil, err
	}
	l, _, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	if err := nw.Deafen(l); err != nil {
		return "", nil, healNet(nw), err
	}
	return fmt.Sprintf("leader %s hears no other node (its packets still go out)", nodes.Name(l)), names([]int{l}), healNet(nw), nil
}

func loss(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	nw, r, err := env.networkAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	ids := minority(r, nw.Nodes())
	for _, i := range ids {
		if err := nw.Loss(i, lossRate); err != nil {
			return "", nil, healNet(nw), err
		}
	}
	return fmt.Sprintf("%.0f%% packet loss to and from %s", lossRate*100, join(ids)), names(ids), healNet(nw), nil
}

func ring(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	nw, r, err := env.networkAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	if nw.Nodes() < 5 {
		return "", nil, nil, fmt.Errorf("ring needs at least 5 nodes, have %d", nw.Nodes())
	}
	order, pairs := ringPairs(r, nw.Nodes())
	if err := nw.Block(pairs); err != nil {
		return "", nil, healNet(nw), err
	}
	return fmt.Sprintf("majorities ring %s: each node sees only its ring neighbours", join(order)), names(order), healNet(nw), nil
}

func bridge(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	nw, r, err := env.networkAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	if nw.Nodes() < 5 {
		return "", nil, nil, fmt.Errorf("bridge needs at least 5 nodes, have %d", nw.Nodes())
	}
	b, left, right, pairs := bridgePairs(r, nw.Nodes())
	if err := nw.Block(pairs); err != nil {
		return "", nil, healNet(nw), err
	}
	return fmt.Sprintf("%s | bridge %s | %s", join(left), nodes.Name(b), join(right)),
		names(append(append([]int(nil), left...), right...)), healNet(nw), nil
}

// kill SIGKILLs ids; heal restarts them on their data dirs and waits for
// each to be ready.
func kill(c cluster, ids []int) (func(context.Context) error, error) {
	var killed []int
	heal := func(ctx context.Context) error {
		var errs []error
		for _, i := range killed {
			errs = append(errs, c.Restart(ctx, i))
		}
		return errors.Join(errs...)
	}
	for _, i := range ids {
		if err := c.Kill(i); err != nil {
			return heal, err
		}
		killed = append(killed, i)
	}
	return heal, nil
}

func killRandom(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	c, r, err := env.nodesAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	i := 1 + r.Intn(c.Nodes())
	heal, err := kill(c, []int{i})
	return "kill -9 " + nodes.Name(i), names([]int{i}), heal, err
}

func killLeader(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	l, c, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	heal, err := kill(c, []int{l})
	return "kill -9 leader " + nodes.Name(l), names([]int{l}), heal, err
}

func killMinority(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	c, r, err := env.nodesAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	ids := minority(r, c.Nodes())
	heal, err := kill(c, ids)
	return "kill -9 " + join(ids), names(ids), heal, err
}

// pause SIGSTOPs node i; heal waits until it has been stopped for at least
// pauseElections election timeouts, then SIGCONTs it.
func pause(c cluster, i int) (func(context.Context) error, error) {
	if err := c.Pause(i); err != nil {
		return nil, err
	}
	until := time.Now().Add(pauseElections * c.ElectionTimeout())
	return func(ctx context.Context) error {
		if d := time.Until(until); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		return c.Resume(i)
	}, nil
}

func pauseLeader(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	l, c, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	heal, err := pause(c, l)
	return fmt.Sprintf("SIGSTOP leader %s for at least %v", nodes.Name(l), pauseElections*c.ElectionTimeout()), names([]int{l}), heal, err
}

func pauseRandom(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	c, r, err := env.nodesAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	i := 1 + r.Intn(c.Nodes())
	heal, err := pause(c, i)
	return fmt.Sprintf("SIGSTOP %s for at least %v", nodes.Name(i), pauseElections*c.ElectionTimeout()), names([]int{i}), heal, err
}

// skews are the clock offsets clock-skew chooses from.
var skews = []time.Duration{-time.Minute, -10 * time.Second, 10 * time.Second, time.Minute}

// clockSkew moves the clock of the leader or of a random node by up to a
// minute through the nodes' test hooks. Only the leader's clock stamps
// commands; the state machine never lets time run backwards, so a skew may
// make leases pass early but can never grant a key twice.
func clockSkew(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	c, r, err := env.nodesAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	i := 1 + r.Intn(c.Nodes())
	who := nodes.Name(i)
	if r.Intn(2) == 0 {
		l, _, err := env.leader(ctx)
		if err != nil {
			return "", nil, nil, err
		}
		i, who = l, "leader "+nodes.Name(l)
	}
	skew := skews[r.Intn(len(skews))]
	heal := func(ctx context.Context) error { return c.SetClockOffset(ctx, i, 0) }
	if err := c.SetClockOffset(ctx, i, skew); err != nil {
		return "", nil, heal, err
	}
	return fmt.Sprintf("clock of %s skewed by %v", who, skew), names([]int{i}), heal, nil
}

// snapshotInstall cuts a random follower off for the hold: with the small
// snapshot threshold and trailing logs the suite runs with, the leader
// compacts its log meanwhile and the follower must install a snapshot to
// catch up after healing.
func snapshotInstall(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	nw, err := env.network()
	if err != nil {
		return "", nil, nil, err
	}
	l, _, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	r, err := env.rng()
	if err != nil {
		return "", nil, nil, err
	}
	followers := others(nw.Nodes(), l)
	f := followers[r.Intn(len(followers))]
	if err := nw.Partition([][]int{{f}, others(nw.Nodes(), f)}); err != nil {
		return "", nil, healNet(nw), err
	}
	return fmt.Sprintf("follower %s cut off until it must install a snapshot", nodes.Name(f)), names([]int{f}), healNet(nw), nil
}

// membership makes a random follower leave gracefully (SIGTERM: it leaves
// gossip and the leader removes it from the voters) and, on heal, starts it
// again on its data so it rejoins through gossip and is added back.
func membership(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
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
	heal := func(ctx context.Context) error { return c.Restart(ctx, f) }
	if err := c.Stop(ctx, f); err != nil {
		return "", nil, heal, err
	}
	return fmt.Sprintf("%s left the cluster (SIGTERM: gossip leave, removed as voter); rejoins on heal", nodes.Name(f)), names([]int{f}), heal, nil
}

// restartRead kills a random node and starts it again at once, while the
// workload (through Env.OnRestart) reads through it: a restarted node must
// not answer a linearizable read from a replica that is behind (workload
// W3's restart loop). Healing is a no-op: the node is already back.
func restartRead(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	c, r, err := env.nodesAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	i := 1 + r.Intn(c.Nodes())
	if err := c.Kill(i); err != nil {
		return "", nil, nil, err
	}
	if env.OnRestart != nil {
		env.OnRestart(ctx, i)
	}
	restart := func(ctx context.Context) error { return c.Restart(ctx, i) }
	if err := restart(ctx); err != nil {
		return "", nil, restart, err
	}
	return fmt.Sprintf("kill -9 %s and restart it at once, reading through it", nodes.Name(i)), names([]int{i}),
		func(context.Context) error { return nil }, nil
}
