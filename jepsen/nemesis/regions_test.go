package nemesis

import (
	"context"
	"math/rand"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
	"github.com/intentledger/intentd/jepsen/wan"
)

func regionEnv(t *testing.T, layout string, seed int64) (*Env, *fake) {
	t.Helper()
	l, err := wan.ParseLayout(layout)
	if err != nil {
		t.Fatal(err)
	}
	rtt, err := wan.ParseRTT("80ms", l)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(l.Nodes())
	return &Env{Rand: rand.New(rand.NewSource(seed)), net: f, cluster: f, Layout: &l,
		Shaper: wan.NewShaper(wan.NewMatrix(l, rtt, 0.1), 1)}, f
}

// The leader's region (the fake's leader is n1, in eu) is cut off or
// killed as a whole, and healed.
func TestLeaderRegionNemeses(t *testing.T) {
	env, f := regionEnv(t, "eu:2,us:2,ap:1", 1)
	d, targets, heal, err := isolateLeaderRegion(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(targets, []string{"n1", "n2"}) || !strings.Contains(d, "region eu") {
		t.Errorf("isolate: %q, targets %v", d, targets)
	}
	if err := heal(t.Context()); err != nil {
		t.Fatal(err)
	}
	d, targets, heal, err = killLeaderRegion(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	if err := heal(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"partition [[1 2] [3 4 5]]", "heal", "kill n1", "kill n2", "restart n1", "restart n2"}
	if got := f.snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q, want %q (kill: %q, targets %v)", got, want, d, targets)
	}

	// A region holding a quorum, or no layout at all: refused, nothing done.
	env, f = regionEnv(t, "eu:3,us:2", 1)
	if _, _, _, err := isolateLeaderRegion(t.Context(), env); err == nil || !strings.Contains(err.Error(), "quorum") {
		t.Errorf("eu:3,us:2: %v, want a refusal", err)
	}
	env.Layout = nil
	if _, _, _, err := killLeaderRegion(t.Context(), env); err == nil || !strings.Contains(err.Error(), "--regions") {
		t.Errorf("no layout: %v, want a refusal", err)
	}
	if calls := f.snapshot(); len(calls) != 0 {
		t.Errorf("refused nemeses acted: %q", calls)
	}
}

// The wan nemesis changes the matrix for the hold and puts the one it
// replaced back; over a few seeds it draws each kind of change.
func TestWANChangesTheMatrixAndHeals(t *testing.T) {
	kinds := map[string]bool{}
	for seed := int64(1); seed <= 40; seed++ {
		env, _ := regionEnv(t, "eu:2,us:2,ap:1", seed)
		base := env.Shaper.Matrix()
		d, targets, heal, err := wanChange(t.Context(), env)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(env.Shaper.Matrix(), base) || len(targets) == 0 {
			t.Errorf("seed %d: %q changed nothing (targets %v)", seed, d, targets)
		}
		for _, k := range []string{"times slower (the way back", "times slower (", "farther", "jitter 50%"} {
			if strings.Contains(d, k) {
				kinds[k] = true
			}
		}
		if err := heal(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(env.Shaper.Matrix(), base) {
			t.Errorf("seed %d: heal left %s, want %s", seed, env.Shaper.Matrix(), base)
		}
	}
	if len(kinds) != 4 {
		t.Errorf("40 seeds drew only %v", kinds)
	}
	env, _ := regionEnv(t, "eu:1,us:1,ap:1", 1)
	env.Shaper = nil
	if _, _, _, err := wanChange(t.Context(), env); err == nil || !strings.Contains(err.Error(), "--rtt") {
		t.Errorf("no delay layer: %v, want a refusal", err)
	}
}

// The scheduler runs the region nemeses like any other, each recorded.
func TestRegionNemesesUnderTheScheduler(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	env, _ := regionEnv(t, "eu:1,us:1,ap:1", 5)
	env.Rec = history.NewRecorder(nil)
	var mu sync.Mutex
	count := 0
	var nems []Nemesis
	for _, n := range all(t, RegionNemeses...) {
		nems = append(nems, counting{Nemesis: n, mu: &mu, count: &count, limit: 6, stop: cancel})
	}
	if err := Run(ctx, env, nems, time.Millisecond, time.Millisecond); err != nil {
		t.Fatalf("Run: %v", err)
	}
	_, _, faults := env.Rec.Snapshot()
	seen := map[string]bool{}
	for _, f := range faults {
		seen[f.Nemesis] = true
		if f.Failed != "" {
			t.Errorf("%s failed: %s", f.Nemesis, f.Failed)
		}
	}
	if len(seen) != len(RegionNemeses) {
		t.Errorf("ran %v, want each of %v", seen, RegionNemeses)
	}
	if !IsRegionNemesis("kill-leader+wan") || IsRegionNemesis("kill-leader") {
		t.Error("IsRegionNemesis")
	}
}
