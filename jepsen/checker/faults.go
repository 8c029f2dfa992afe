package checker

import (
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/intentledger/intentd/jepsen/history"
)

// faultEnd is when a fault stopped; one still active at the end of the
// history lasts until spanEnd.
func faultEnd(f history.Fault, spanEnd time.Duration) time.Duration {
	if f.End == 0 || f.End < f.Start {
		return spanEnd
	}
	return f.End
}

// nemesisStats counts, per nemesis name, the ops invoked while one of its
// faults was active, and the ops invoked while no fault was.
func nemesisStats(ops []history.Op, faults []history.Fault, spanEnd time.Duration) ([]NemesisStats, OutcomeCounts) {
	byName := map[string]*NemesisStats{}
	for _, f := range faults {
		ns := byName[f.Nemesis]
		if ns == nil {
			ns = &NemesisStats{Name: f.Nemesis}
			byName[f.Nemesis] = ns
		}
		ns.Faults++
	}
	var quiet OutcomeCounts
	for _, op := range ops {
		during := false
		for _, f := range faults {
			if op.Invoke >= f.Start && op.Invoke <= faultEnd(f, spanEnd) {
				byName[f.Nemesis].add(op.Outcome)
				during = true
			}
		}
		if !during {
			quiet.add(op.Outcome)
		}
	}
	out := make([]NemesisStats, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		out = append(out, *byName[name])
	}
	return out, quiet
}

// leaderTargeted reports whether a fault counts for unavailability: its
// nemesis aims at the leader, or the leader changed across it (known only
// once it ended).
func leaderTargeted(f history.Fault) bool {
	return strings.Contains(f.Nemesis, "leader") || (f.End != 0 && f.LeaderBefore != f.LeaderAfter)
}

// unavailability measures, for each leader-targeted fault, the time from
// its start to the return of the earliest-returning ok write invoked at or
// after its start.
func unavailability(ops []history.Op, faults []history.Fault) Unavailability {
	return windows(okWrites(ops, func(history.Op) bool { return true }), faults, leaderTargeted)
}

// RegionLoss reports whether a fault's nemesis loses the leader's whole
// region (its targets are that region's nodes).
func RegionLoss(f history.Fault) bool { return strings.HasSuffix(f.Nemesis, "leader-region") }

// failover measures, for each fault that lost the leader's region, the
// time from its start to the return of the earliest-returning ok write
// invoked at or after its start through a node outside the region (one
// not among the fault's targets): leader region lost → first ok write
// elsewhere.
func failover(ops []history.Op, faults []history.Fault, nodeOf func(string) string) Unavailability {
	var out Unavailability
	for _, f := range faults {
		if !RegionLoss(f) {
			continue
		}
		elsewhere := okWrites(ops, func(op history.Op) bool { return !slices.Contains(f.Targets, nodeOf(op.Node)) })
		u := windows(elsewhere, []history.Fault{f}, RegionLoss)
		out.Faults += u.Faults
		out.Windows = append(out.Windows, u.Windows...)
	}
	var lengths []time.Duration
	for _, w := range out.Windows {
		if w.Recovered {
			out.Recovered++
			lengths = append(lengths, w.Length)
		}
	}
	sort.Slice(lengths, func(i, j int) bool { return lengths[i] < lengths[j] })
	out.P50, out.P99 = percentile(lengths, 0.50), percentile(lengths, 0.99)
	if len(lengths) > 0 {
		out.Max = lengths[len(lengths)-1]
	}
	return out
}

// okWrites are the ok claims and completes that keep says to, in
// invocation order. A duplicate a node answered from its own copy (Local)
// is no write: it shows nothing about whether the cluster can commit.
func okWrites(ops []history.Op, keep func(history.Op) bool) []history.Op {
	var writes []history.Op
	for _, op := range ops {
		if op.Outcome == history.OutcomeOK && (op.Type == history.OpClaim || op.Type == history.OpComplete) &&
			!op.Local && op.Return >= op.Invoke && keep(op) {
			writes = append(writes, op)
		}
	}
	sort.SliceStable(writes, func(i, j int) bool { return writes[i].Invoke < writes[j].Invoke })
	return writes
}

// windows measures, for each fault counted, the time from its start to
// the return of the earliest-returning write (of writes, in invocation
// order) invoked at or after its start.
func windows(writes []history.Op, faults []history.Fault, counted func(history.Fault) bool) Unavailability {
	// firstReturn[i] is the earliest-returning write among writes[i:].
	firstReturn := make([]int, len(writes)+1)
	firstReturn[len(writes)] = -1
	for i := len(writes) - 1; i >= 0; i-- {
		firstReturn[i] = i
		if j := firstReturn[i+1]; j >= 0 && writes[j].Return < writes[i].Return {
			firstReturn[i] = j
		}
	}
	var u Unavailability
	var lengths []time.Duration
	for _, f := range faults {
		if !counted(f) || f.Cut || f.Failed != "" {
			continue // cut short by the run's end (no time to recover in), or a harness failure
		}
		u.Faults++
		w := Window{Nemesis: f.Nemesis, Detail: f.Detail, Start: f.Start, OpID: -1}
		i := sort.Search(len(writes), func(i int) bool { return writes[i].Invoke >= f.Start })
		if j := firstReturn[i]; j >= 0 {
			w.Recovered, w.OpID, w.Length = true, writes[j].ID, writes[j].Return-f.Start
			u.Recovered++
			lengths = append(lengths, w.Length)
		}
		u.Windows = append(u.Windows, w)
	}
	sort.Slice(lengths, func(i, j int) bool { return lengths[i] < lengths[j] })
	u.P50, u.P99 = percentile(lengths, 0.50), percentile(lengths, 0.99)
	if len(lengths) > 0 {
		u.Max = lengths[len(lengths)-1]
	}
	return u
}

// percentile is the nearest-rank q-quantile of sorted values (0 when
// there are none).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
