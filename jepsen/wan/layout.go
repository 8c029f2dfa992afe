// Package wan is the fault suite's wide-area network: a userspace
// link-delay layer (this kernel has no netem), a layout of nodes in
// regions, and a per-link matrix of one-way delays with jitter that can
// change while traffic flows.
//
// The delay is applied by relays. Every node listens for its peers on
// internal ports and advertises the public ones, where a relay listens in
// the node's own network namespace: a connection or datagram from node i
// to node j crosses the bridge undelayed (so the suite's iptables faults
// cut it as before) and is then held in j's relay for the one-way delay of
// the link i→j; the answers on that connection are held for j→i. Raft,
// gossip (memberlist's TCP streams and UDP packets) and the HTTP
// forwarding between nodes all go through relays; the harness's own
// clients reach the nodes' HTTP listeners directly, undelayed.
package wan

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Layout places nodes in regions, each a voter or a non-voting replica.
// Nodes are numbered from 1 in the order of the layout: region by region,
// each region's voters first, then its replicas.
type Layout struct {
	Regions []Region
}

// Region is one region's share of the nodes.
type Region struct {
	Name     string
	Voters   int
	Replicas int
}

var regionName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,15}$`)

// ParseLayout parses a --regions value: comma-separated NAME:VOTERS or
// NAME:VOTERS+REPLICAS, e.g. "eu:2,us:2,ap:1" (five voters in three
// regions) or "eu:2+1,us:2,ap:1" (and a replica in eu). Names are 1-16
// lower-case letters, digits or dashes, starting with a letter.
func ParseLayout(s string) (Layout, error) {
	var l Layout
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, count, ok := strings.Cut(part, ":")
		if !ok || !regionName.MatchString(name) {
			return l, fmt.Errorf("wan: region %q: want NAME:VOTERS or NAME:VOTERS+REPLICAS with a lower-case name", part)
		}
		if slices.ContainsFunc(l.Regions, func(r Region) bool { return r.Name == name }) {
			return l, fmt.Errorf("wan: region %q named twice", name)
		}
		v, r, hasReplicas := strings.Cut(count, "+")
		voters, err := strconv.Atoi(v)
		if err != nil || voters < 0 {
			return l, fmt.Errorf("wan: region %q: voters %q is not a count", name, v)
		}
		replicas := 0
		if hasReplicas {
			if replicas, err = strconv.Atoi(r); err != nil || replicas < 0 {
				return l, fmt.Errorf("wan: region %q: replicas %q is not a count", name, r)
			}
		}
		if voters+replicas == 0 {
			return l, fmt.Errorf("wan: region %q has no node", name)
		}
		l.Regions = append(l.Regions, Region{Name: name, Voters: voters, Replicas: replicas})
	}
	if len(l.Regions) == 0 {
		return l, errors.New("wan: empty layout")
	}
	if l.Voters() == 0 {
		return l, errors.New("wan: the layout has no voter")
	}
	return l, nil
}

// OnePerNode is the layout of n voters each in a region of its own, named
// after the node ("n1", "n2", ...): what a run with delay but no --regions
// uses, so every pair of nodes is one inter-region link.
func OnePerNode(n int) Layout {
	var l Layout
	for i := 1; i <= n; i++ {
		l.Regions = append(l.Regions, Region{Name: "n" + strconv.Itoa(i), Voters: 1})
	}
	return l
}

// String is the layout in ParseLayout's form.
func (l Layout) String() string {
	parts := make([]string, len(l.Regions))
	for i, r := range l.Regions {
		parts[i] = r.Name + ":" + strconv.Itoa(r.Voters)
		if r.Replicas > 0 {
			parts[i] += "+" + strconv.Itoa(r.Replicas)
		}
	}
	return strings.Join(parts, ",")
}

// Nodes is the number of nodes, voters and replicas.
func (l Layout) Nodes() int {
	n := 0
	for _, r := range l.Regions {
		n += r.Voters + r.Replicas
	}
	return n
}

// Voters is the number of voters.
func (l Layout) Voters() int {
	n := 0
	for _, r := range l.Regions {
		n += r.Voters
	}
	return n
}

// place returns node i's region index and whether it is a voter; ok is
// false when i is not a node of the layout.
func (l Layout) place(i int) (region int, voter, ok bool) {
	next := 1
	for k, r := range l.Regions {
		if i >= next && i < next+r.Voters+r.Replicas {
			return k, i < next+r.Voters, true
		}
		next += r.Voters + r.Replicas
	}
	return 0, false, false
}

// RegionOf is node i's region, "" when i is not a node of the layout.
func (l Layout) RegionOf(i int) string {
	k, _, ok := l.place(i)
	if !ok {
		return ""
	}
	return l.Regions[k].Name
}

// Voter reports whether node i is a voter (false for a replica and for a
// node outside the layout).
func (l Layout) Voter(i int) bool {
	_, v, ok := l.place(i)
	return ok && v
}

// NodesIn lists the nodes of a region, in order.
func (l Layout) NodesIn(region string) []int {
	var out []int
	for i := 1; i <= l.Nodes(); i++ {
		if l.RegionOf(i) == region {
			out = append(out, i)
		}
	}
	return out
}

// VotersIn is the number of voters in a region.
func (l Layout) VotersIn(region string) int {
	for _, r := range l.Regions {
		if r.Name == region {
			return r.Voters
		}
	}
	return 0
}

// MinorityRegions reports whether every region holds fewer than a quorum
// of the voters, so that losing any one region leaves a quorum.
func (l Layout) MinorityRegions() bool {
	q := l.Voters()/2 + 1
	for _, r := range l.Regions {
		if r.Voters >= q {
			return false
		}
	}
	return len(l.Regions) > 1
}

// RTT is the round-trip time between pairs of regions; a pair not listed
// has none (0), which is also the default within a region.
type RTT map[[2]string]time.Duration

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Between is the round trip between regions a and b (in either order).
func (r RTT) Between(a, b string) time.Duration { return r[pair(a, b)] }

// ParseRTT parses an --rtt value for layout l: comma-separated A-B=DURATION
// (e.g. "eu-us=80ms,eu-ap=150ms,us-ap=150ms"), a bare DURATION for every
// pair of distinct regions not listed, and A-A=DURATION for the round
// trip inside region A (default 0). Every pair of distinct regions must
// get a round trip, from its own entry or a bare one.
func ParseRTT(s string, l Layout) (RTT, error) {
	out := RTT{}
	var all *time.Duration
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		link, value, hasLink := strings.Cut(part, "=")
		if !hasLink {
			value = part
		}
		d, err := time.ParseDuration(strings.TrimSpace(value))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("wan: --rtt %q: want a non-negative duration such as 80ms", part)
		}
		if !hasLink {
			all = &d
			continue
		}
		a, b, ok := strings.Cut(strings.TrimSpace(link), "-")
		if !ok || len(l.NodesIn(a)) == 0 || len(l.NodesIn(b)) == 0 {
			return nil, fmt.Errorf("wan: --rtt %q: want A-B=DURATION with two regions of the layout (%s)", part, l)
		}
		out[pair(a, b)] = d
	}
	var missing []string
	for i, a := range l.Regions {
		for _, b := range l.Regions[i+1:] {
			if _, ok := out[pair(a.Name, b.Name)]; ok {
				continue
			}
			if all != nil {
				out[pair(a.Name, b.Name)] = *all
				continue
			}
			missing = append(missing, a.Name+"-"+b.Name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("wan: --rtt gives no round trip for %s (list them, or give one bare duration for every pair)", strings.Join(missing, ", "))
	}
	return out, nil
}

// ParseJitter parses a --jitter value: a percentage ("10%") or a fraction
// ("0.1") of each link's delay, in [0, 1).
func ParseJitter(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	pct := strings.HasSuffix(s, "%")
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err == nil && pct {
		f /= 100
	}
	if err != nil || f < 0 || f >= 1 || math.IsNaN(f) {
		return 0, fmt.Errorf("wan: --jitter %q: want a percentage below 100%% (10%%) or a fraction below 1 (0.1)", s)
	}
	return f, nil
}

// Matrix is the one-way delay of every directed link between nodes 1..n,
// and the jitter applied to each delay. Node 0 stands for everything
// outside the cluster (the harness's clients and probes): its links have
// no delay. A Matrix is a value; its methods return changed copies.
type Matrix struct {
	oneWay [][]time.Duration // [from][to], 0..n
	// Jitter is the fraction of a link's delay by which each delay varies,
	// uniformly, both ways: a link of 40ms with Jitter 0.1 delays by
	// 36-44ms.
	Jitter float64
}

// NewMatrix is the matrix of layout l: half of each round trip each way.
func NewMatrix(l Layout, rtt RTT, jitter float64) Matrix {
	n := l.Nodes()
	m := Matrix{oneWay: make([][]time.Duration, n+1), Jitter: jitter}
	for i := range m.oneWay {
		m.oneWay[i] = make([]time.Duration, n+1)
	}
	for i := 1; i <= n; i++ {
		for j := 1; j <= n; j++ {
			if i != j {
				m.oneWay[i][j] = rtt.Between(l.RegionOf(i), l.RegionOf(j)) / 2
			}
		}
	}
	return m
}

// Nodes is the number of nodes the matrix covers.
func (m Matrix) Nodes() int { return max(len(m.oneWay)-1, 0) }

// OneWay is the delay, before jitter, of the link from → to; 0 for a node
// outside the matrix (0 is the outside).
func (m Matrix) OneWay(from, to int) time.Duration {
	if from < 0 || to < 0 || from >= len(m.oneWay) || to >= len(m.oneWay) {
		return 0
	}
	return m.oneWay[from][to]
}

// Max is the longest one-way delay of any link, before jitter.
func (m Matrix) Max() time.Duration {
	var d time.Duration
	for _, row := range m.oneWay {
		d = max(d, slices.Max(row))
	}
	return d
}

func (m Matrix) clone() Matrix {
	c := Matrix{oneWay: make([][]time.Duration, len(m.oneWay)), Jitter: m.Jitter}
	for i, row := range m.oneWay {
		c.oneWay[i] = slices.Clone(row)
	}
	return c
}

// Change returns a copy in which every link from a node of from to a node
// of to (distinct nodes) has its delay d replaced by f(d).
func (m Matrix) Change(from, to []int, f func(time.Duration) time.Duration) Matrix {
	c := m.clone()
	for _, i := range from {
		for _, j := range to {
			if i != j && i > 0 && j > 0 && i < len(c.oneWay) && j < len(c.oneWay) {
				c.oneWay[i][j] = max(f(c.oneWay[i][j]), 0)
			}
		}
	}
	return c
}

// WithJitter returns a copy with another jitter.
func (m Matrix) WithJitter(j float64) Matrix {
	c := m.clone()
	c.Jitter = j
	return c
}

// String lists the round trips of the links, "n1-n2 80ms" for a symmetric
// pair and "n1>n2 40ms" for each direction of an asymmetric one, and the
// jitter.
func (m Matrix) String() string {
	var parts []string
	for i := 1; i < len(m.oneWay); i++ {
		for j := i + 1; j < len(m.oneWay); j++ {
			a, b := m.oneWay[i][j], m.oneWay[j][i]
			if a == b {
				parts = append(parts, fmt.Sprintf("n%d-n%d %v", i, j, 2*a))
			} else {
				parts = append(parts, fmt.Sprintf("n%d>n%d %v", i, j, a), fmt.Sprintf("n%d>n%d %v", j, i, b))
			}
		}
	}
	return fmt.Sprintf("rtt %s, jitter %.0f%%", strings.Join(parts, ", "), 100*m.Jitter)
}
