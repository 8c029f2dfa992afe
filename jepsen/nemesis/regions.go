package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/intentledger/intentd/jepsen/nodes"
	"github.com/intentledger/intentd/jepsen/wan"
)

// RegionNemeses are the nemeses that need a regions layout (Env.Layout)
// or link delay (Env.Shaper); "all" includes them only when the run has
// them.
var RegionNemeses = []string{"wan", "isolate-leader-region", "kill-leader-region"}

// farExtra is the round trip the wan nemesis's far-leader-region change
// adds to every link of the leader's region.
const farExtra = 150 * time.Millisecond

// wanChange changes the link-delay matrix for the hold; heal puts back the
// matrix it replaced. It draws one of: a region whose links (both ways)
// get 2-3 times slower; the leader's region moved farther (every one of
// its links +150ms round trip); a region whose outgoing links only get 4
// times slower (asymmetric: its messages arrive late, the answers do not);
// jitter raised to 50% on every link.
func wanChange(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	sh := env.Shaper
	if sh == nil {
		return "", nil, nil, errors.New("wan needs link delay (--rtt)")
	}
	r, err := env.rng()
	if err != nil {
		return "", nil, nil, err
	}
	layout := env.layout(sh.Matrix().Nodes())
	base := sh.Matrix()
	heal := func(context.Context) error { sh.Set(base); return nil }
	region := layout.Regions[r.Intn(len(layout.Regions))].Name
	in := layout.NodesIn(region)
	out := othersOf(base.Nodes(), in)
	var next wan.Matrix
	var detail string
	switch kind := r.Intn(4); kind {
	case 0:
		f := time.Duration(2 + r.Intn(2))
		next = base.Change(in, out, func(d time.Duration) time.Duration { return d * f }).
			Change(out, in, func(d time.Duration) time.Duration { return d * f })
		detail = fmt.Sprintf("links of region %s %d times slower", region, f)
	case 1:
		l, _, err := env.leader(ctx)
		if err != nil {
			return "", nil, nil, err
		}
		region = layout.RegionOf(l)
		in = layout.NodesIn(region)
		out = othersOf(base.Nodes(), in)
		add := func(d time.Duration) time.Duration { return d + farExtra/2 }
		next = base.Change(in, out, add).Change(out, in, add)
		detail = fmt.Sprintf("leader %s's region %s moved %v (round trip) farther", nodes.Name(l), region, farExtra)
	case 2:
		next = base.Change(in, out, func(d time.Duration) time.Duration { return 4 * d })
		detail = fmt.Sprintf("links out of region %s 4 times slower (the way back unchanged)", region)
	default:
		next = base.WithJitter(0.5)
		in = nil
		for i := 1; i <= base.Nodes(); i++ {
			in = append(in, i)
		}
		detail = "jitter 50% on every link"
	}
	sh.Set(next)
	return detail + " (" + next.String() + ")", names(in), heal, nil
}

// isolateLeaderRegion cuts the leader's whole region off from the other
// regions: a region lost to the network. The other regions hold a quorum
// (the layout must keep every region a minority), elect a leader among
// them and go on.
func isolateLeaderRegion(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	nw, err := env.network()
	if err != nil {
		return "", nil, nil, err
	}
	region, in, err := env.leaderRegion(ctx, nw.Nodes())
	if err != nil {
		return "", nil, nil, err
	}
	if err := nw.Partition([][]int{in, othersOf(nw.Nodes(), in)}); err != nil {
		return "", nil, healNet(nw), err
	}
	return fmt.Sprintf("leader's region %s (%s) cut off from the other regions", region, join(in)), names(in), healNet(nw), nil
}

// killLeaderRegion kills -9 every node of the leader's region (a region
// lost with its machines); heal starts them again on their data.
func killLeaderRegion(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	c, err := env.nodes()
	if err != nil {
		return "", nil, nil, err
	}
	region, in, err := env.leaderRegion(ctx, c.Nodes())
	if err != nil {
		return "", nil, nil, err
	}
	heal, err := kill(c, in)
	return fmt.Sprintf("kill -9 leader's region %s (%s)", region, join(in)), names(in), heal, err
}

// leaderRegion is the leader's region and its nodes; it refuses a layout
// in which a region holds a quorum (losing it would stop the cluster, and
// the fault would test nothing).
func (e *Env) leaderRegion(ctx context.Context, n int) (string, []int, error) {
	if e.Layout == nil {
		return "", nil, errors.New("needs a regions layout (--regions)")
	}
	if !e.Layout.MinorityRegions() {
		return "", nil, fmt.Errorf("layout %s: a region holds a quorum of the voters, so losing the leader's region may lose the cluster", e.Layout)
	}
	l, _, err := e.leader(ctx)
	if err != nil {
		return "", nil, err
	}
	region := e.Layout.RegionOf(l)
	return region, e.Layout.NodesIn(region), nil
}

// layout is the run's layout, or one region per node.
func (e *Env) layout(n int) wan.Layout {
	if e.Layout != nil {
		return *e.Layout
	}
	return wan.OnePerNode(n)
}

// othersOf lists the nodes 1..n not in ids.
func othersOf(n int, ids []int) []int {
	var out []int
	for i := 1; i <= n; i++ {
		if !slices.Contains(ids, i) {
			out = append(out, i)
		}
	}
	return out
}

// IsRegionNemesis reports whether name (or a part of a composition a+b)
// needs a layout or link delay.
func IsRegionNemesis(name string) bool {
	for _, p := range strings.Split(name, "+") {
		if slices.Contains(RegionNemeses, p) {
			return true
		}
	}
	return false
}
