package checker

import (
	"sort"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

// RegionLatency is what the clients of one region saw of the claims they
// sent to that region's nodes while no fault was active: a measure, not a
// check.
type RegionLatency struct {
	Region string
	// Grants are the claims answered granted (a write through the leader);
	// Duplicates those answered duplicate, Local of which the node
	// answered from its own copy.
	Grants, Duplicates, Local int
	// GrantP50 and GrantP99 are the grants' latencies; DuplicateP50 and
	// DuplicateP99 those of the duplicates the leader answered,
	// LocalP50 and LocalP99 those answered locally.
	GrantP50, GrantP99         time.Duration
	DuplicateP50, DuplicateP99 time.Duration
	LocalP50, LocalP99         time.Duration
}

// LatencyByRegion measures, per region (regionOf names an op's node's
// region; "" leaves the op out), the latency of the ok claims invoked and
// returned while no fault was active, sorted by region name.
func LatencyByRegion(ops []history.Op, faults []history.Fault, regionOf func(opNode string) string) []RegionLatency {
	type samples struct{ grants, dups, local []time.Duration }
	by := map[string]*samples{}
	for _, op := range ops {
		if op.Type != history.OpClaim || op.Outcome != history.OutcomeOK || op.Return < op.Invoke || faulted(op, faults) {
			continue
		}
		region := regionOf(op.Node)
		if region == "" {
			continue
		}
		s := by[region]
		if s == nil {
			s = &samples{}
			by[region] = s
		}
		d := op.Return - op.Invoke
		switch {
		case op.Status == statusGranted:
			s.grants = append(s.grants, d)
		case op.Status == statusDuplicate && op.Local:
			s.local = append(s.local, d)
		case op.Status == statusDuplicate:
			s.dups = append(s.dups, d)
		}
	}
	out := make([]RegionLatency, 0, len(by))
	for region, s := range by {
		for _, l := range [][]time.Duration{s.grants, s.dups, s.local} {
			sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		}
		out = append(out, RegionLatency{Region: region,
			Grants: len(s.grants), Duplicates: len(s.dups) + len(s.local), Local: len(s.local),
			GrantP50: percentile(s.grants, 0.50), GrantP99: percentile(s.grants, 0.99),
			DuplicateP50: percentile(s.dups, 0.50), DuplicateP99: percentile(s.dups, 0.99),
			LocalP50: percentile(s.local, 0.50), LocalP99: percentile(s.local, 0.99)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Region < out[j].Region })
	return out
}

// faulted reports whether any fault was active during part of op.
func faulted(op history.Op, faults []history.Fault) bool {
	for _, f := range faults {
		end := f.End
		if end == 0 {
			end = op.Return + 1 // still active
		}
		if f.Start <= op.Return && op.Invoke <= end {
			return true
		}
	}
	return false
}
