// Package checker decides whether a fault run's history is correct.
//
// Check runs every checker over one run's history (client ops, the
// workload's world log of side effects, the nemesis faults), the replicas'
// FSM digests after healing and the panic lines found in node logs, and
// returns each violation with the ops that show it, plus the figures a
// report prints (ops by type and outcome, info rate per nemesis,
// unavailability after leader loss).
//
// The checkers, by name:
//
//   - history: the history itself is well formed (known op types and
//     outcomes; an ok op carries a ledger answer; a grant carries a fencing
//     token). Malformed ok ops are treated as unknown (info) by the others.
//   - at-most-once: never two owners granted one key in a generation; a
//     generation has one fencing token and tokens grow with generations;
//     fencing tokens (Raft indexes) are unique across keys and a grant
//     created after another grant's answer has a larger token; the world
//     log holds at most one effect per key, each by an owner granted that
//     key with that token.
//   - no-divergent-grant: no claim is granted (or told duplicate) for a
//     payload variant other than the one that created the key.
//   - no-lost-ack: the final read of a key (the last ok read, invoked after
//     the ack returned) shows every acknowledged complete and grant.
//   - linearizable: porcupine, per key, against Model.
//   - digests-equal: every replica's FSM digest after healing is the same
//     (none collected is a violation too).
//   - no-panic: no panic line in any node log.
//   - every-op-ok: each op type in Options.RequireOK had an ok outcome,
//     else the run proves nothing about it.
package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/intentledger/intentd/jepsen/history"
)

// Checker names, as they appear in Violation.Checker.
const (
	CheckHistory          = "history"
	CheckAtMostOnce       = "at-most-once"
	CheckNoDivergentGrant = "no-divergent-grant"
	CheckNoLostAck        = "no-lost-ack"
	CheckLinearizable     = "linearizable"
	CheckDigestsEqual     = "digests-equal"
	CheckNoPanic          = "no-panic"
	CheckEveryOpOK        = "every-op-ok"
	CheckFaultsHit        = "faults-hit"
	CheckTrustBoundary    = "trust-boundary"
)

// LeaderFaults are the nemeses that target the leader: each must end with
// another leader, or the fault did not hit.
var LeaderFaults = []string{"kill-leader", "isolate-leader", "pause-leader", "deafen-leader", "isolate-leader-region", "kill-leader-region"}

// SafetyCheckers are the checkers whose violations mean the ledger broke a
// guarantee (the others say the run proves too little).
var SafetyCheckers = []string{CheckAtMostOnce, CheckNoDivergentGrant, CheckNoLostAck, CheckLinearizable, CheckDigestsEqual,
	CheckTrustBoundary}

// CheckerNames lists every checker in the order Check runs them.
func CheckerNames() []string {
	return []string{CheckHistory, CheckAtMostOnce, CheckNoDivergentGrant, CheckNoLostAck,
		CheckLinearizable, CheckDigestsEqual, CheckNoPanic, CheckEveryOpOK, CheckFaultsHit, CheckTrustBoundary}
}

// Violation is one broken property, with the ops that show it.
type Violation struct {
	Checker string
	Key     string // empty when the violation is not about one key
	Detail  string
	OpIDs   []int
}

func (v Violation) String() string {
	var b strings.Builder
	b.WriteString(v.Checker)
	if v.Key != "" {
		fmt.Fprintf(&b, " key=%q", v.Key)
	}
	b.WriteString(": " + v.Detail)
	if len(v.OpIDs) > 0 {
		fmt.Fprintf(&b, " (ops %s)", joinInts(v.OpIDs))
	}
	return b.String()
}

// CheckerSummary is how one checker fared.
type CheckerSummary struct {
	Name       string
	Violations int
}

// OutcomeCounts counts ops by outcome. InfoRate is Info/Ops (0 without
// ops).
type OutcomeCounts struct {
	Ops, OK, Fail, Info int
	InfoRate            float64
}

func (c *OutcomeCounts) add(o history.Outcome) {
	c.Ops++
	switch o {
	case history.OutcomeOK:
		c.OK++
	case history.OutcomeFail:
		c.Fail++
	default:
		c.Info++
	}
	c.InfoRate = float64(c.Info) / float64(c.Ops)
}

// NemesisStats counts the ops invoked while one nemesis's faults were
// active.
type NemesisStats struct {
	Name   string
	Faults int
	OutcomeCounts
}

// Window is the unavailability after one leader-targeted fault: from the
// fault's start to the return of the earliest-returning ok write (claim
// or complete) invoked after it started.
type Window struct {
	Nemesis   string
	Detail    string
	Start     time.Duration
	Length    time.Duration // 0 when not Recovered
	Recovered bool          // an ok write followed the fault
	OpID      int           // that write; -1 when not Recovered
}

// Unavailability summarises the windows of every leader-targeted fault (a
// nemesis whose name contains "leader", or an ended fault whose
// LeaderBefore and LeaderAfter differ), except those cut short by the run's
// end. Percentiles are over the recovered windows.
type Unavailability struct {
	Faults    int
	Recovered int
	P50       time.Duration
	P99       time.Duration
	Max       time.Duration
	Windows   []Window
}

// LinStats describes the linearizability check.
type LinStats struct {
	Result  string // porcupine's Ok, Illegal or Unknown ("" when not run)
	Keys    int    // partitions checked
	Ops     int    // ops given to porcupine
	InfoOps int    // of which had an unknown answer
	// InfoDropped counts writes with an unknown answer left out because
	// the model shows they cannot have changed anything (they are not in
	// Ops).
	InfoDropped int
	Duration    time.Duration
	Timeout     time.Duration
}

// AckStats counts the acknowledged writes no-lost-ack checked, and those
// it could not check because no ok read of the key began after the ack.
type AckStats struct {
	Checked, Unchecked int
}

// Result is the verdict on one run and the figures reports print.
type Result struct {
	Valid      bool // no violations
	Violations []Violation
	Checkers   []CheckerSummary

	Ops, Effects, Faults int
	// Span is the latest timestamp in the history (ops, effects, faults).
	Span time.Duration
	// OpsByTypeOutcome counts ops: "claim" -> "ok" -> n.
	OpsByTypeOutcome map[string]map[string]int
	// StatusCounts counts answers by "type:status", e.g. "claim:granted",
	// "complete:no_leader", "read:" for an op without a status.
	StatusCounts map[string]int
	// ServerErrors counts the 5xx answers by "code problem", e.g.
	// "507 ledger_full" (a definite refusal: the claim did not happen),
	// "503 outcome_unknown" (unknown); a full disk shows here.
	ServerErrors map[string]int

	Linearizability LinStats
	Acks            AckStats
	// Nemeses has one entry per nemesis name, sorted by name; NoFault
	// counts the ops invoked while no fault was active.
	Nemeses        []NemesisStats
	NoFault        OutcomeCounts
	Unavailability Unavailability
	// Failover is, with Options.NodeOf, the unavailability after each
	// fault that lost the leader's region, measured to the first ok write
	// through a node outside that region (zero without NodeOf).
	Failover Unavailability
	// LeaderChanges counts faults whose LeaderBefore and LeaderAfter are
	// both known and differ.
	LeaderChanges int
	// Latency is, with Options.RegionOf, the claim latency per region
	// while no fault was active (LatencyByRegion).
	Latency []RegionLatency
}

// Options tune Check.
type Options struct {
	// Timeout bounds the porcupine run (0: no bound). A check that times
	// out is a violation: an unknown verdict proves nothing.
	Timeout time.Duration
	// RequireOK lists op types that must have at least one ok outcome.
	RequireOK []history.OpType
	// NodeOf, when set, names the node ("n<i>") an op was sent to (from
	// its Node), and turns on the Failover measure.
	NodeOf func(opNode string) string
	// RegionOf, when set, names the region of the node an op was sent to
	// (from its Node), and turns on the Latency measure.
	RegionOf func(opNode string) string
}

// Linearization is what the linearizable checker leaves for a report:
// porcupine's info and the model to draw it with porcupine.Visualize.
type Linearization struct {
	Model  porcupine.Model
	Info   porcupine.LinearizationInfo
	Result porcupine.CheckResult
	// End is the timestamp given to ops with an unknown answer as their
	// return: after everything else in the history (nanoseconds).
	End int64
}

// Check runs every checker. digests maps node to its FSM digest after
// healing (empty: not collected, itself a violation); panics are panic
// lines found in node logs.
func Check(ops []history.Op, effects []history.Effect, faults []history.Fault, digests map[string]string, panics []string, opt Options) (Result, Linearization) {
	res := Result{
		Ops: len(ops), Effects: len(effects), Faults: len(faults),
		Span:             span(ops, effects, faults),
		OpsByTypeOutcome: map[string]map[string]int{},
		StatusCounts:     map[string]int{},
		ServerErrors:     map[string]int{},
	}
	for _, op := range ops {
		outcome := op.Outcome
		if outcome == "" {
			outcome = history.OutcomeInfo
		}
		m := res.OpsByTypeOutcome[string(op.Type)]
		if m == nil {
			m = map[string]int{}
			res.OpsByTypeOutcome[string(op.Type)] = m
		}
		m[string(outcome)]++
		res.StatusCounts[string(op.Type)+":"+op.Status]++
		if op.HTTP >= 500 {
			res.ServerErrors[fmt.Sprintf("%d %s", op.HTTP, op.Status)]++
		}
	}

	h := checkHistory(ops)
	var vs []Violation
	vs = append(vs, h.violations...)
	vs = append(vs, checkAtMostOnce(h.ok, effects)...)
	vs = append(vs, checkNoDivergentGrant(h.ok)...)
	ackVs, acks := checkNoLostAck(h.ok)
	vs = append(vs, ackVs...)
	res.Acks = acks
	linVs, lin, stats := checkLinearizable(h, res.Span, opt.Timeout)
	vs = append(vs, linVs...)
	res.Linearizability = stats
	vs = append(vs, checkDigests(digests)...)
	vs = append(vs, checkPanics(panics)...)
	vs = append(vs, checkEveryOpOK(h.ok, opt.RequireOK)...)
	vs = append(vs, checkFaultsHit(faults)...)
	vs = append(vs, checkTrustBoundary(faults)...)

	res.Violations = vs
	res.Valid = len(vs) == 0
	counts := map[string]int{}
	for _, v := range vs {
		counts[v.Checker]++
	}
	for _, name := range CheckerNames() {
		res.Checkers = append(res.Checkers, CheckerSummary{Name: name, Violations: counts[name]})
	}

	res.Nemeses, res.NoFault = nemesisStats(ops, faults, res.Span)
	res.Unavailability = unavailability(ops, faults)
	if opt.NodeOf != nil {
		res.Failover = failover(ops, faults, opt.NodeOf)
	}
	if opt.RegionOf != nil {
		res.Latency = LatencyByRegion(ops, faults, opt.RegionOf)
	}
	for _, f := range faults {
		if f.LeaderBefore != "" && f.LeaderAfter != "" && f.LeaderBefore != f.LeaderAfter {
			res.LeaderChanges++
		}
	}
	return res, lin
}

// span is the latest timestamp anywhere in the history.
func span(ops []history.Op, effects []history.Effect, faults []history.Fault) time.Duration {
	var end time.Duration
	for _, op := range ops {
		end = max(end, op.Invoke, op.Return)
	}
	for _, e := range effects {
		end = max(end, e.At)
	}
	for _, f := range faults {
		end = max(end, f.Start, f.End)
	}
	return end
}

// ledgerStatuses are the answers the ledger gives to an op type; an ok op
// with any other status is malformed. known is false for an unknown type.
func ledgerStatuses(t history.OpType) (statuses []string, known bool) {
	switch t {
	case history.OpClaim:
		return []string{statusGranted, statusDuplicate, statusInFlight, statusInDoubt, statusDivergent,
			"pending_approval", "rejected"}, true
	case history.OpComplete:
		return []string{statusOK, statusFenced, statusNotFound, statusInvalidState, statusInDoubt}, true
	case history.OpRead:
		return []string{statusOK, statusNotFound}, true
	}
	return nil, false
}

// checkedHistory is the history split for the checkers.
type checkedHistory struct {
	violations []Violation
	ok         []history.Op // well-formed ops with an ok outcome
	unknown    []history.Op // ops whose outcome is unknown, including malformed ok ops
}

func checkHistory(ops []history.Op) checkedHistory {
	var h checkedHistory
	bad := func(op history.Op, format string, args ...any) {
		h.violations = append(h.violations, Violation{Checker: CheckHistory, Key: op.Key,
			Detail: fmt.Sprintf(format, args...), OpIDs: []int{op.ID}})
	}
	seen := map[int]bool{}
	for _, op := range ops {
		if seen[op.ID] {
			bad(op, "op id %d appears twice", op.ID)
			continue
		}
		seen[op.ID] = true
		statuses, known := ledgerStatuses(op.Type)
		if !known {
			bad(op, "unknown op type %q", op.Type)
			continue
		}
		switch op.Outcome {
		case history.OutcomeFail:
			continue
		case history.OutcomeInfo, "":
			h.unknown = append(h.unknown, op)
			continue
		case history.OutcomeOK:
		default:
			bad(op, "unknown outcome %q", op.Outcome)
			continue
		}
		var problem string
		switch {
		case op.Return < op.Invoke:
			problem = fmt.Sprintf("ok %s returned at %v, before it was invoked at %v", op.Type, op.Return, op.Invoke)
		case !contains(statuses, op.Status):
			problem = fmt.Sprintf("ok %s with status %q, which is not a ledger answer to a %s", op.Type, op.Status, op.Type)
		case op.Type == history.OpClaim && op.Status == statusGranted && op.IntentFence == 0:
			problem = "granted claim without a fencing token"
		case op.Type == history.OpRead && op.Status == statusOK && op.State == "":
			problem = "ok read without the intent's state"
		}
		if problem != "" {
			bad(op, "%s", problem)
			h.unknown = append(h.unknown, op)
			continue
		}
		h.ok = append(h.ok, op)
	}
	return h
}

func checkDigests(digests map[string]string) []Violation {
	if len(digests) == 0 {
		return []Violation{{Checker: CheckDigestsEqual, Detail: "replica FSM digests were not collected"}}
	}
	nodes := sortedKeys(digests)
	distinct := map[string]bool{}
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		distinct[digests[n]] = true
		parts = append(parts, n+"="+digests[n])
	}
	if len(distinct) == 1 {
		return nil
	}
	return []Violation{{Checker: CheckDigestsEqual,
		Detail: fmt.Sprintf("%d different FSM digests after healing: %s", len(distinct), strings.Join(parts, " "))}}
}

func checkPanics(panics []string) []Violation {
	var vs []Violation
	for _, line := range panics {
		if len(line) > 500 {
			line = line[:500] + "…"
		}
		vs = append(vs, Violation{Checker: CheckNoPanic, Detail: line})
	}
	return vs
}

func checkEveryOpOK(ok []history.Op, require []history.OpType) []Violation {
	n := map[history.OpType]int{}
	for _, op := range ok {
		n[op.Type]++
	}
	var vs []Violation
	for _, t := range require {
		if n[t] == 0 {
			vs = append(vs, Violation{Checker: CheckEveryOpOK,
				Detail: fmt.Sprintf("no %s had an ok outcome: the run proves nothing about %ss", t, t)})
		}
	}
	return vs
}

// checkTrustBoundary reports what the trust-boundary nemeses saw get
// through: a rogue gossip member recorded under a node's ID or made a
// voter, a forwarded request reaching it, a stranger answered on the Raft
// port.
func checkTrustBoundary(faults []history.Fault) []Violation {
	var vs []Violation
	for _, f := range faults {
		if f.Finding != "" {
			vs = append(vs, Violation{Checker: CheckTrustBoundary, Detail: fmt.Sprintf("%s at %v: %s", f.Nemesis, f.Start.Round(time.Millisecond), f.Finding)})
		}
	}
	return vs
}

// checkFaultsHit reports leader-targeted faults after which the same node
// still led: such a fault did not test failover. A fault still active, cut
// short by the run's end, or failed (a harness event) is not judged.
func checkFaultsHit(faults []history.Fault) []Violation {
	var vs []Violation
	for _, f := range faults {
		if !contains(LeaderFaults, f.Nemesis) || f.End == 0 || f.Cut || f.Failed != "" {
			continue
		}
		if f.LeaderBefore == "" || f.LeaderAfter == "" || f.LeaderBefore == f.LeaderAfter {
			vs = append(vs, Violation{Checker: CheckFaultsHit, Detail: fmt.Sprintf(
				"%s at %v (%s) did not change the leader (before %q, after %q): the fault did not test failover",
				f.Nemesis, f.Start.Round(time.Millisecond), f.Detail, f.LeaderBefore, f.LeaderAfter)})
		}
	}
	return vs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func joinInts(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

func ids(ops []history.Op) []int {
	out := make([]int, len(ops))
	for i, op := range ops {
		out[i] = op.ID
	}
	return out
}
