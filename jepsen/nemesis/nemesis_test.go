package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

// fake is a network and a cluster in memory: it records every call. The
// leader is the lowest running, unpaused node.
type fake struct {
	mu     sync.Mutex
	n      int
	calls  []string
	dead   map[int]bool
	paused map[int]bool
	failOn string // a call that fails, e.g. "kill n2"
}

func newFake(n int) *fake { return &fake{n: n, dead: map[int]bool{}, paused: map[int]bool{}} }

func (f *fake) call(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := fmt.Sprintf(format, args...)
	f.calls = append(f.calls, c)
	if c == f.failOn {
		return errors.New("injected failure: " + c)
	}
	return nil
}

func (f *fake) Nodes() int                              { return f.n }
func (f *fake) Partition(groups [][]int) error          { return f.call("partition %v", groups) }
func (f *fake) Deafen(i int) error                      { return f.call("deafen %d", i) }
func (f *fake) Block(pairs [][2]int) error              { return f.call("block %v", pairs) }
func (f *fake) Loss(i int, p float64) error             { return f.call("loss n%d %.2f", i, p) }
func (f *fake) ElectionTimeout() time.Duration          { return time.Millisecond }
func (f *fake) WaitReady(context.Context, ...int) error { return nil }

func (f *fake) Heal() error { return f.call("heal") }

func (f *fake) Leader(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 1; i <= f.n; i++ {
		if !f.dead[i] && !f.paused[i] {
			return i, nil
		}
	}
	return 0, errors.New("no leader")
}

func (f *fake) WaitLeader(ctx context.Context) (int, error) { return f.Leader(ctx) }

func (f *fake) Kill(i int) error {
	if err := f.call("kill n%d", i); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead[i] = true
	return nil
}

func (f *fake) Restart(_ context.Context, i int) error {
	if err := f.call("restart n%d", i); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead[i] = false
	return nil
}

func (f *fake) Stop(_ context.Context, i int) error {
	if err := f.call("stop n%d", i); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead[i] = true
	return nil
}

func (f *fake) SetClockOffset(_ context.Context, i int, offset time.Duration) error {
	return f.call("clock n%d %v", i, offset)
}

func (f *fake) Pause(i int) error {
	if err := f.call("pause n%d", i); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused[i] = true
	return nil
}

func (f *fake) Resume(i int) error {
	if err := f.call("resume n%d", i); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused[i] = false
	return nil
}

func (f *fake) Recover(context.Context) error {
	if err := f.call("recover"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.dead)
	clear(f.paused)
	return nil
}

func (f *fake) snapshot() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// counting wraps a nemesis: after the limit-th heal it calls stop.
type counting struct {
	Nemesis
	mu    *sync.Mutex
	count *int
	limit int
	stop  func()
}

func (c counting) Start(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	d, t, heal, err := c.Nemesis.Start(ctx, env)
	if heal == nil {
		return d, t, heal, err
	}
	return d, t, func(ctx context.Context) error {
		err := heal(ctx)
		c.mu.Lock()
		*c.count++
		if *c.count == c.limit {
			c.stop()
		}
		c.mu.Unlock()
		return err
	}, err
}

// fakeable lists the nemeses a fake cluster can run: the trust-boundary
// ones (rogue-member, raft-poke, gossip-forgery) join gossip and dial Raft
// for real, and
// the fault suite's short profile runs them against real nodes; the region
// ones need a layout and a delay layer (regions_test.go runs them); the
// storage ones need lazy filesystems under real nodes (the storage profile
// runs them).
func fakeable() []string {
	var out []string
	for _, n := range Names() {
		// kill-stop-restart came after the seed below was pinned
		// (TestKillStopRestart runs it on the fake).
		if n != "rogue-member" && n != "raft-poke" && n != "gossip-forgery" && n != "kill-stop-restart" && !IsRegionNemesis(n) && !IsStorageNemesis(n) {
			out = append(out, n)
		}
	}
	return out
}

func all(t *testing.T, names ...string) []Nemesis {
	t.Helper()
	var nems []Nemesis
	for _, n := range names {
		nem, err := ByName(n)
		if err != nil {
			t.Fatal(err)
		}
		nems = append(nems, nem)
	}
	return nems
}

// runFake runs the scheduler against a fake n-node cluster until steps
// faults have been healed and returns the recorded faults and the calls.
func runFake(t *testing.T, seed int64, n, steps int, names []string) ([]history.Fault, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	f := newFake(n)
	var mu sync.Mutex
	count := 0
	var nems []Nemesis
	for _, nem := range all(t, names...) {
		nems = append(nems, counting{Nemesis: nem, mu: &mu, count: &count, limit: steps, stop: cancel})
	}
	rec := history.NewRecorder(nil)
	env := &Env{Rec: rec, Rand: rand.New(rand.NewSource(seed)), net: f, cluster: f}
	if err := Run(ctx, env, nems, time.Millisecond, time.Millisecond); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if count != steps {
		t.Fatalf("%d faults healed, want %d (timed out?)", count, steps)
	}
	_, _, faults := rec.Snapshot()
	for i := range faults {
		if faults[i].End == 0 {
			t.Errorf("fault %d (%s) never ended", i, faults[i].Nemesis)
		}
		faults[i].Start, faults[i].End = 0, 0 // times are not part of the schedule
	}
	return faults, f.snapshot()
}

func TestScheduleIsAFunctionOfTheSeed(t *testing.T) {
	const steps = 60
	a, callsA := runFake(t, 42, 5, steps, fakeable())
	b, callsB := runFake(t, 42, 5, steps, fakeable())
	if len(a) != steps {
		t.Fatalf("%d faults recorded, want %d", len(a), steps)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different faults:\n%v\n%v", a, b)
	}
	if !reflect.DeepEqual(callsA, callsB) {
		t.Errorf("same seed, different actions:\n%v\n%v", callsA, callsB)
	}
	seen := map[string]bool{}
	for _, f := range a {
		seen[f.Nemesis] = true
		if f.LeaderBefore == "" || f.LeaderAfter == "" || len(f.Targets) == 0 || f.Detail == "" {
			t.Errorf("incomplete fault record: %+v", f)
		}
	}
	for _, n := range fakeable() {
		if !seen[n] {
			t.Errorf("nemesis %s never scheduled in %d steps", n, steps)
		}
	}
	c, _ := runFake(t, 43, 5, steps, fakeable())
	if reflect.DeepEqual(a, c) {
		t.Error("seeds 42 and 43 gave the same schedule")
	}
	// A seed names one schedule for good: replaying a reported seed must
	// replay its faults. Changing this list changes every published seed.
	want := []string{
		"snapshot-install: follower n4 cut off until it must install a snapshot",
		"kill-minority: kill -9 n3,n5",
		"restart-read: kill -9 n4 and restart it at once, reading through it",
		"ring: majorities ring n2,n1,n5,n4,n3: each node sees only its ring neighbours",
		"membership: n3 left the cluster (SIGTERM: gossip leave, removed as voter); rejoins on heal",
	}
	for i, w := range want {
		if got := a[i].Nemesis + ": " + a[i].Detail; got != w {
			t.Errorf("seed 42 fault %d: %q, want %q", i, got, w)
		}
	}
}

func TestPlanDrawsAFixedAmount(t *testing.T) {
	// However a nemesis uses its own generator, the main sequence is the
	// same: plan always draws from the main one the same way.
	r1, r2 := rand.New(rand.NewSource(7)), rand.New(rand.NewSource(7))
	for range 20 {
		s1, s2 := plan(r1, 3, time.Second), plan(r2, 3, time.Second)
		if s1 != s2 {
			t.Fatalf("plans differ: %+v %+v", s1, s2)
		}
		if s1.wait < 500*time.Millisecond || s1.wait >= 1500*time.Millisecond || s1.pick != 3 {
			t.Fatalf("plan out of range: %+v", s1)
		}
		s1.rng().Perm(5) // a nemesis's draws do not touch r1
	}
}

func TestRunHealsOnCancel(t *testing.T) {
	// No deadline: Run cannot know the run ends during the hour-long hold.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f := newFake(3)
	rec := history.NewRecorder(nil)
	env := &Env{Rec: rec, Rand: rand.New(rand.NewSource(1)), net: f, cluster: f}
	started := make(chan struct{})
	nem := named{name: "test", start: func(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
		d, tg, h, err := partitionHalves(ctx, env)
		close(started)
		return d, tg, h, err
	}}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, env, []Nemesis{nem}, time.Millisecond, time.Hour) }()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the fault never started")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	calls := f.snapshot()
	if len(calls) != 2 || !strings.HasPrefix(calls[0], "partition") || calls[1] != "heal" {
		t.Errorf("calls: %q, want a partition then a heal", calls)
	}
	_, _, faults := rec.Snapshot()
	if len(faults) != 1 || faults[0].End == 0 || !faults[0].Cut {
		t.Errorf("faults: %+v, want one ended and marked cut", faults)
	}
}

func TestRunStartsNoFaultItCannotHold(t *testing.T) {
	// The run ends in 200ms, long before a 1ms wait plus a 1h hold: Run
	// must wait for the end without starting anything.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	f := newFake(3)
	rec := history.NewRecorder(nil)
	env := &Env{Rec: rec, Rand: rand.New(rand.NewSource(1)), net: f, cluster: f}
	nem, err := ByName("partition-halves")
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(ctx, env, []Nemesis{nem}, time.Millisecond, time.Hour); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() == nil {
		t.Error("Run returned before the run ended")
	}
	if calls := f.snapshot(); len(calls) != 0 {
		t.Errorf("calls: %q, want none", calls)
	}
	if _, _, faults := rec.Snapshot(); len(faults) != 0 {
		t.Errorf("faults: %+v, want none", faults)
	}
}

func TestRunUndoesAPartialStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	f := newFake(5)
	// kill-minority with this seed kills two nodes; fail the second kill.
	env := &Env{Rand: rand.New(rand.NewSource(3)), net: f, cluster: f}
	r := rand.New(rand.NewSource(3))
	r.Perm(1) // Run shuffles a round first
	st := plan(r, 0, time.Millisecond)
	ids := minority(st.rng(), 5)
	f.failOn = fmt.Sprintf("kill n%d", ids[1])
	err := Run(ctx, env, all(t, "kill-minority"), time.Millisecond, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Run: %v, want the injected failure", err)
	}
	// The partial start is undone, then everything is healed.
	want := []string{fmt.Sprintf("kill n%d", ids[0]), f.failOn, fmt.Sprintf("restart n%d", ids[0]), "heal", "recover"}
	if got := f.snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// A step that fails is a harness event on the fault's record; the schedule
// ends there with everything healed, so the run can still be checked.
func TestRunRecordsAFailedHealAndHealsEverything(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	f := newFake(3)
	rec := history.NewRecorder(nil)
	env := &Env{Rand: rand.New(rand.NewSource(1)), net: f, cluster: f, Rec: rec}
	f.failOn = "resume n1" // pause-leader's heal: the fake's leader is n1
	err := Run(ctx, env, all(t, "pause-leader"), time.Millisecond, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "heal") || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("Run: %v, want the failed heal", err)
	}
	_, _, faults := rec.Snapshot()
	if len(faults) != 1 || !strings.Contains(faults[0].Failed, "injected failure") || faults[0].End == 0 {
		t.Fatalf("faults %+v, want one ended fault marked failed", faults)
	}
	calls := f.snapshot()
	if n := len(calls); n < 2 || calls[n-2] != "heal" || calls[n-1] != "recover" {
		t.Fatalf("calls %q: want the network healed and the nodes recovered last", calls)
	}
	if l, err := f.Leader(ctx); err != nil || l != 1 {
		t.Fatalf("after recovery the leader is %d (%v), want n1 back", l, err)
	}
}

func TestRingAndBridgeNeedFiveNodes(t *testing.T) {
	for _, name := range []string{"ring", "bridge"} {
		f := newFake(3)
		env := &Env{Rand: rand.New(rand.NewSource(1)), net: f, cluster: f}
		err := Run(t.Context(), env, all(t, name), time.Millisecond, time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "at least 5 nodes") {
			t.Errorf("%s on 3 nodes: %v", name, err)
		}
		// No fault was injected: the only calls are the heal-everything
		// that follows any failed step.
		if calls := f.snapshot(); !reflect.DeepEqual(calls, []string{"heal", "recover"}) {
			t.Errorf("%s on 3 nodes acted: %q", name, calls)
		}
	}
}

func TestRingPairs(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	for range 20 {
		order, pairs := ringPairs(r, 5)
		blocked := map[int][]int{}
		for _, p := range pairs {
			blocked[p[0]] = append(blocked[p[0]], p[1])
			blocked[p[1]] = append(blocked[p[1]], p[0])
		}
		views := map[string]bool{}
		for _, i := range order {
			if len(blocked[i]) != 2 {
				t.Fatalf("ring %v: n%d blocked from %v, want 2 nodes", order, i, blocked[i])
			}
			var view []int
			for j := 1; j <= 5; j++ {
				if !slices.Contains(blocked[i], j) {
					view = append(view, j)
				}
			}
			views[fmt.Sprint(view)] = true
		}
		if len(views) != 5 {
			t.Fatalf("ring %v: only %d distinct majorities", order, len(views))
		}
	}
}

func TestBridgePairs(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	b, left, right, pairs := bridgePairs(r, 5)
	if len(left) != 2 || len(right) != 2 || len(pairs) != 4 {
		t.Fatalf("bridge %d, halves %v %v, pairs %v", b, left, right, pairs)
	}
	for _, p := range pairs {
		if p[0] == b || p[1] == b {
			t.Errorf("bridge node %d is blocked: %v", b, p)
		}
	}
	maj, minor := halves(r, 5)
	if len(maj) != 3 || len(minor) != 2 {
		t.Errorf("halves of 5: %v %v", maj, minor)
	}
	if m := minority(r, 3); len(m) != 1 {
		t.Errorf("minority of 3: %v", m)
	}
}

func TestByName(t *testing.T) {
	for _, n := range Names() {
		nem, err := ByName(n)
		if err != nil || nem.Name() != n {
			t.Errorf("ByName(%q) = %v, %v", n, nem, err)
		}
	}
	_, err := ByName("flood")
	if err == nil || !strings.Contains(err.Error(), "partition-halves") || !strings.Contains(err.Error(), "bridge") {
		t.Errorf("ByName(flood) error should list the valid names: %v", err)
	}
	c, err := ByName("kill-leader+partition-halves")
	if err != nil || c.Name() != "kill-leader+partition-halves" {
		t.Fatalf("composition: %v %v", c, err)
	}
	f := newFake(3)
	env := &Env{Rand: rand.New(rand.NewSource(1)), net: f, cluster: f}
	detail, targets, heal, err := c.Start(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	if err := heal(t.Context()); err != nil {
		t.Fatal(err)
	}
	calls := f.snapshot()
	if len(calls) != 4 || calls[0] != "kill n1" || !strings.HasPrefix(calls[1], "partition") || calls[2] != "heal" || calls[3] != "restart n1" {
		t.Errorf("composed calls %q (detail %q, targets %v)", calls, detail, targets)
	}
}

func TestEveryNemesisRunsOncePerRound(t *testing.T) {
	n := len(fakeable())
	faults, _ := runFake(t, 9, 5, 2*n, fakeable())
	for round := 0; round < 2; round++ {
		seen := map[string]bool{}
		for _, f := range faults[round*n : (round+1)*n] {
			seen[f.Nemesis] = true
		}
		if len(seen) != n {
			t.Errorf("round %d ran %d distinct nemeses, want all %d: %v", round, len(seen), n, seen)
		}
	}
}
