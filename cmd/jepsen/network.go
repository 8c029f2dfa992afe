package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/intentledger/intentd/jepsen/nemesis"
	"github.com/intentledger/intentd/jepsen/nodes"
	"github.com/intentledger/intentd/jepsen/wan"
)

// wanOptions are the regions layout and the link-delay layer of a run.
type wanOptions struct {
	layout  *wan.Layout // nil: no regions
	regions bool        // the layout came from --regions (else one region per node)
	rtt     wan.RTT
	matrix  *wan.Matrix // nil: no delay layer
	// placement passes each node its region and role, as far as the
	// binary knows the flags; nodeNetwork passes --network.
	placement   bool
	nodeNetwork string
	// localDuplicates passes --local-duplicates: followers and replicas
	// answer duplicates from their own copy.
	localDuplicates bool
}

// parse reads --regions, --rtt and --jitter; a layout sets the number of
// nodes (an explicit --nodes must agree).
func (w *wanOptions) parse(regions, rtt, jitter string, n *int, nodesSet bool) error {
	if regions != "" {
		l, err := wan.ParseLayout(regions)
		if err != nil {
			return fmt.Errorf("--regions: %w", err)
		}
		if v := l.Voters(); v != 3 && v != 5 {
			return fmt.Errorf("--regions %s has %d voters: want 3 or 5", l, v)
		}
		if l.Regions[0].Voters == 0 {
			return fmt.Errorf("--regions %s: the first region needs a voter (node 1 is where the others join)", l)
		}
		if nodesSet && *n != l.Nodes() {
			return fmt.Errorf("--nodes %d, but --regions %s has %d nodes", *n, l, l.Nodes())
		}
		*n = l.Nodes()
		w.layout, w.regions = &l, true
	}
	if jitter != "" && rtt == "" {
		return errors.New("--jitter needs --rtt")
	}
	if w.placement && !w.regions {
		return errors.New("--placement needs --regions")
	}
	if rtt == "" {
		return nil
	}
	if w.layout == nil {
		l := wan.OnePerNode(*n)
		w.layout = &l
	}
	r, err := wan.ParseRTT(rtt, *w.layout)
	if err != nil {
		return fmt.Errorf("--rtt: %w", err)
	}
	j, err := wan.ParseJitter(jitter)
	if err != nil {
		return fmt.Errorf("--jitter: %w", err)
	}
	m := wan.NewMatrix(*w.layout, r, j)
	w.rtt, w.matrix = r, &m
	return nil
}

// describe is the network line of the report: layout, round trips,
// jitter, Raft timeout.
func (w wanOptions) describe(raftTimeout time.Duration) string {
	if w.layout == nil {
		return ""
	}
	var places []string
	for _, r := range w.layout.Regions {
		ids := w.layout.NodesIn(r.Name)
		var names []string
		for _, i := range ids {
			name := nodes.Name(i)
			if !w.layout.Voter(i) {
				name += " (replica)"
			}
			names = append(names, name)
		}
		places = append(places, r.Name+" "+strings.Join(names, ","))
	}
	s := "regions " + strings.Join(places, "; ")
	if !w.regions {
		s = "every node a region of its own"
	}
	if w.matrix == nil {
		return s + "; no link delay; raft timeout " + raftTimeout.String() + w.nodeFlagsNamed()
	}
	var rtts []string
	for p, d := range w.rtt {
		if d > 0 {
			rtts = append(rtts, fmt.Sprintf("%s-%s %v", p[0], p[1], d))
		}
	}
	sort.Strings(rtts)
	if len(rtts) == 0 {
		rtts = []string{"none"}
	}
	return fmt.Sprintf("%s; round trips %s; jitter %.0f%%; raft timeout %v%s", s, strings.Join(rtts, ", "),
		100*w.matrix.Jitter, raftTimeout, w.nodeFlagsNamed())
}

// nodeFlagsNamed names the node flags the harness was asked to pass.
func (w wanOptions) nodeFlagsNamed() string {
	var f []string
	if w.placement {
		f = append(f, "--placement")
	}
	if w.nodeNetwork != "" {
		f = append(f, "--network "+w.nodeNetwork)
	}
	if w.localDuplicates {
		f = append(f, "--local-duplicates")
	}
	if len(f) == 0 {
		return ""
	}
	return "; node flags " + strings.Join(f, ", ")
}

// relayPorts are the ports the delay layer relays on every node: the
// HTTP forwarding between nodes, Raft, and gossip (TCP and UDP).
func relayPorts() []wan.Port {
	return []wan.Port{
		{Name: "http", Listen: nodes.HTTPPeerPort, Backend: nodes.HTTPPort},
		{Name: "raft", Listen: nodes.RaftPort, Backend: nodes.RaftBackendPort},
		{Name: "gossip", Listen: nodes.GossipPort, Backend: nodes.GossipBackendPort, UDP: true},
	}
}

// checkNemeses refuses the region nemeses a run cannot hold: wan without
// a delay layer, the leader-region ones without a layout in which every
// region is a minority.
func (w wanOptions) checkNemeses(names []string) error {
	for _, name := range names {
		for _, p := range strings.Split(name, "+") {
			if err := w.canRun(p); err != nil {
				return fmt.Errorf("nemesis %s: %w", p, err)
			}
		}
	}
	return nil
}

func (w wanOptions) canRun(name string) error {
	switch {
	case name == "wan" && w.matrix == nil:
		return errors.New("needs link delay (--rtt)")
	case nemesis.IsRegionNemesis(name) && name != "wan" && w.layout == nil:
		return errors.New("needs --regions (or --rtt: a region per node)")
	case nemesis.IsRegionNemesis(name) && name != "wan" && !w.layout.MinorityRegions():
		return fmt.Errorf("layout %s: a region holds a quorum of the voters, so losing the leader's region may lose the cluster", w.layout)
	}
	return nil
}

var helpFlag = regexp.MustCompile(`(?m)^\s+--?([a-zA-Z0-9][a-zA-Z0-9-]*)`)

// binaryHelp is what the intentd binary's --help says: the flags it names,
// and the whole text.
func binaryHelp(ctx context.Context, bin string) (map[string]bool, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range helpFlag.FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		return nil, "", fmt.Errorf("%s --help names no flag: %w\n%s", bin, err, out)
	}
	return flags, string(out), nil
}

// profileElection reads the Raft election timeout of a --network profile
// from the binary's --help, which describes each profile as
// "NAME (...: Raft HEARTBEAT/ELECTION/LEASE, ...)".
func profileElection(help, profile string) (time.Duration, error) {
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(profile) + ` \([^)]*?Raft ([0-9.]+[mµn]?s)/([0-9.]+[mµn]?s)/`)
	m := re.FindStringSubmatch(help)
	if m == nil {
		return 0, fmt.Errorf("the binary's --help does not give the Raft timeouts of --network %s: give --raft-timeout", profile)
	}
	d, err := time.ParseDuration(m[2])
	if err != nil {
		return 0, fmt.Errorf("--network %s election timeout %q: %w", profile, m[2], err)
	}
	return d, nil
}

// nodeFlags decides each node's own flags from the layout (with
// placement: --region, and the replica role) and --node-network, passing
// only the flags the binary knows, to n nodes; notes say what was left out and what
// that means for the run. bootstrapExpect is 0 (every node) unless the
// replicas' role was passed (then the voters).
func (w wanOptions) nodeFlags(known map[string]bool, n int) (args func(i int) []string, bootstrapExpect int, notes []string) {
	per := map[int][]string{}
	if w.placement && w.layout != nil {
		if known["region"] {
			for i := 1; i <= w.layout.Nodes(); i++ {
				per[i] = append(per[i], "--region", w.layout.RegionOf(i))
			}
		} else {
			notes = append(notes, "--placement: the binary has no --region flag: the nodes ran without their regions (the regions only shaped the delay matrix)")
		}
		var replicas []int
		for i := 1; i <= w.layout.Nodes(); i++ {
			if !w.layout.Voter(i) {
				replicas = append(replicas, i)
			}
		}
		role := []string(nil)
		switch {
		case known["voter"]:
			role = []string{"--voter=false"}
		case known["role"]:
			role = []string{"--role", "replica"}
		}
		switch {
		case len(replicas) == 0:
		case role == nil:
			notes = append(notes, fmt.Sprintf("--placement: the binary has neither --voter nor --role: replicas %s ran as voters", joinNames(replicas)))
		default:
			// A replica never bootstraps (intentd refuses --bootstrap-expect
			// on one): its 0 comes after the harness's count and wins.
			for _, i := range replicas {
				per[i] = append(per[i], role...)
				per[i] = append(per[i], "--bootstrap-expect", "0")
			}
			bootstrapExpect = w.layout.Voters()
		}
	} else if w.regions && w.layout.Voters() != w.layout.Nodes() {
		notes = append(notes, "replicas in --regions without --placement: they ran as voters")
	}
	if w.nodeNetwork != "" {
		if known["network"] {
			for i := 1; i <= n; i++ {
				per[i] = append(per[i], "--network", w.nodeNetwork)
			}
		} else {
			notes = append(notes, fmt.Sprintf("--node-network %s: the binary has no --network flag: the nodes ran with their default timings", w.nodeNetwork))
		}
	}
	if w.localDuplicates {
		if known["local-duplicates"] {
			for i := 1; i <= n; i++ {
				per[i] = append(per[i], "--local-duplicates")
			}
		} else {
			notes = append(notes, "--local-duplicates: the binary has no such flag: every claim went to the leader")
		}
	}
	return func(i int) []string { return slices.Clone(per[i]) }, bootstrapExpect, notes
}

func joinNames(ids []int) string {
	var s []string
	for _, i := range ids {
		s = append(s, nodes.Name(i))
	}
	return strings.Join(s, ",")
}

// nodeOf maps the URL a workload op was sent to back to its node's name.
func nodeOf(urls map[string]string) func(string) string {
	return func(u string) string { return urls[u] }
}

// regionNemesesFor lists the region nemeses "all" includes for this run.
func (w wanOptions) regionNemesesFor() []string {
	var out []string
	for _, n := range nemesis.RegionNemeses {
		if w.canRun(n) == nil && (n == "wan" || w.regions) {
			out = append(out, n)
		}
	}
	return out
}

// nodeSetup is what resolveNodeFlags decided for the nodes.
type nodeSetup struct {
	args            func(i int) []string
	bootstrapExpect int  // 0: every node
	profile         bool // the nodes' --network profile sets their Raft timeouts
	notes           []string
}

// resolveNodeFlags asks the binary which flags it knows (only with
// --placement or --node-network), decides each node's own flags, and,
// when the nodes' --network profile sets their Raft timeouts, takes the
// profile's election timeout as o.raftTimeout; then checks --hold against
// it. The exit code goes with an error.
func resolveNodeFlags(ctx context.Context, o *options, bin string) (nodeSetup, int, error) {
	nf := nodeSetup{args: func(int) []string { return nil }}
	if !o.wan.placement && o.wan.nodeNetwork == "" && !o.wan.localDuplicates {
		if o.wan.regions && o.wan.layout.Voters() != o.wan.layout.Nodes() {
			nf.notes = append(nf.notes, "replicas in --regions without --placement: they ran as voters")
		}
		return nf, exitValid, nil
	}
	known, help, err := binaryHelp(ctx, bin)
	if err != nil {
		return nf, exitError, err
	}
	nf.args, nf.bootstrapExpect, nf.notes = o.wan.nodeFlags(known, o.nodes)
	if o.profileTimeouts() && known["network"] {
		if o.raftTimeout, err = profileElection(help, o.wan.nodeNetwork); err != nil {
			return nf, exitUsage, err
		}
		nf.profile = true
		nf.notes = append(nf.notes, fmt.Sprintf("the nodes ran with the Raft timeouts of --network %s; the harness's pauses and holds assume its election timeout, %v (from the binary's --help)",
			o.wan.nodeNetwork, o.raftTimeout))
	}
	if err := o.checkHold(); err != nil {
		return nf, exitUsage, err
	}
	return nf, exitValid, nil
}
