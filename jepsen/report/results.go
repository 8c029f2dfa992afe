package report

import (
	"time"

	"github.com/intentledger/intentd/jepsen/checker"
	"github.com/intentledger/intentd/jepsen/history"
)

// Results is the document written to results.json. Times are
// milliseconds (or seconds where the name says so) from the run start.
type Results struct {
	Valid bool `json:"valid"`
	// Harness is the harness's own trouble, "" when none (see Run.Harness).
	Harness          string                    `json:"harness_error,omitempty"`
	Run              RunInfo                   `json:"run"`
	Ops              int                       `json:"ops"`
	Effects          int                       `json:"effects"`
	OpsByTypeOutcome map[string]map[string]int `json:"ops_by_type_outcome"`
	StatusCounts     map[string]int            `json:"status_counts"`
	// ServerErrors counts the 5xx answers by "code problem".
	ServerErrors    map[string]int      `json:"server_errors"`
	Checkers        []CheckerInfo       `json:"checkers"`
	Violations      []ViolationInfo     `json:"violations"`
	Linearizability LinearizabilityInfo `json:"linearizability"`
	AcksChecked     int                 `json:"acks_checked"`
	AcksUnchecked   int                 `json:"acks_unchecked"`
	// InfoRatePerNemesis counts the ops invoked while each nemesis's
	// faults were active; NoFault those invoked while none was.
	InfoRatePerNemesis map[string]NemesisInfo `json:"info_rate_per_nemesis"`
	NoFault            NemesisInfo            `json:"no_fault"`
	Unavailability     UnavailabilityInfo     `json:"unavailability"`
	// Failover is, in a run with regions, the unavailability after each
	// loss of the leader's region, to the first ok write elsewhere.
	Failover      *UnavailabilityInfo `json:"failover,omitempty"`
	LeaderChanges int                 `json:"leader_changes"`
	// Latency is, in a run with regions, what each region's clients saw
	// of their claims while no fault was active.
	Latency []RegionLatencyInfo `json:"latency_by_region,omitempty"`
	Faults  []FaultInfo         `json:"faults"`
}

// RegionLatencyInfo is checker.RegionLatency in results.json
// (milliseconds).
type RegionLatencyInfo struct {
	Region         string  `json:"region"`
	Grants         int     `json:"grants"`
	GrantP50MS     float64 `json:"grant_p50_ms"`
	GrantP99MS     float64 `json:"grant_p99_ms"`
	Duplicates     int     `json:"duplicates"`
	DuplicateP50MS float64 `json:"duplicate_p50_ms"`
	DuplicateP99MS float64 `json:"duplicate_p99_ms"`
	Local          int     `json:"local_duplicates"`
	LocalP50MS     float64 `json:"local_p50_ms"`
	LocalP99MS     float64 `json:"local_p99_ms"`
}

// RunInfo is Run in results.json.
type RunInfo struct {
	Seed      int64    `json:"seed"`
	Command   string   `json:"command"`
	Nodes     int      `json:"nodes"`
	Nemeses   []string `json:"nemeses"`
	Workloads []string `json:"workloads"`
	DurationS float64  `json:"duration_s"`
	Started   string   `json:"started,omitempty"` // RFC 3339
	Network   string   `json:"network,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

// CheckerInfo is one checker's verdict.
type CheckerInfo struct {
	Name       string `json:"name"`
	Valid      bool   `json:"valid"`
	Violations int    `json:"violations"`
}

// ViolationInfo is checker.Violation in results.json.
type ViolationInfo struct {
	Checker string `json:"checker"`
	Key     string `json:"key,omitempty"`
	Detail  string `json:"detail"`
	OpIDs   []int  `json:"op_ids"`
}

// LinearizabilityInfo is checker.LinStats in results.json.
type LinearizabilityInfo struct {
	Result      string  `json:"result"`
	Keys        int     `json:"keys"`
	Ops         int     `json:"ops"`
	InfoOps     int     `json:"info_ops"`
	InfoDropped int     `json:"info_dropped"`
	DurationMS  float64 `json:"duration_ms"`
	TimeoutMS   float64 `json:"timeout_ms"`
}

// NemesisInfo counts ops by outcome during a nemesis's faults.
type NemesisInfo struct {
	Faults   int     `json:"faults,omitempty"`
	Ops      int     `json:"ops"`
	OK       int     `json:"ok"`
	Fail     int     `json:"fail"`
	Info     int     `json:"info"`
	InfoRate float64 `json:"info_rate"`
}

// UnavailabilityInfo is checker.Unavailability in results.json.
type UnavailabilityInfo struct {
	LeaderFaults int          `json:"leader_faults"`
	Recovered    int          `json:"recovered"`
	P50MS        float64      `json:"p50_ms"`
	P99MS        float64      `json:"p99_ms"`
	MaxMS        float64      `json:"max_ms"`
	Windows      []WindowInfo `json:"windows"`
}

// WindowInfo is one unavailability window.
type WindowInfo struct {
	Nemesis   string  `json:"nemesis"`
	Detail    string  `json:"detail,omitempty"`
	StartMS   float64 `json:"start_ms"`
	LengthMS  float64 `json:"length_ms"`
	Recovered bool    `json:"recovered"`
	OpID      int     `json:"op_id"`
}

// FaultInfo is one fault in results.json.
type FaultInfo struct {
	Nemesis      string   `json:"nemesis"`
	Detail       string   `json:"detail,omitempty"`
	Targets      []string `json:"targets,omitempty"`
	StartMS      float64  `json:"start_ms"`
	EndMS        float64  `json:"end_ms"` // 0 when it never ended
	LeaderBefore string   `json:"leader_before,omitempty"`
	LeaderAfter  string   `json:"leader_after,omitempty"`
	Cut          bool     `json:"cut,omitempty"`
	Failed       string   `json:"failed,omitempty"`
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func nemesisInfo(c checker.OutcomeCounts, faults int) NemesisInfo {
	return NemesisInfo{Faults: faults, Ops: c.Ops, OK: c.OK, Fail: c.Fail, Info: c.Info, InfoRate: c.InfoRate}
}

func resultsDocument(run Run, faults []history.Fault, res checker.Result) Results {
	doc := Results{
		Valid:   res.Valid,
		Harness: run.Harness,
		Run: RunInfo{Seed: run.Seed, Command: run.Command, Nodes: run.Nodes, Nemeses: nonNil(run.Nemeses),
			Workloads: nonNil(run.Workloads), DurationS: run.Duration.Seconds(), Network: run.Network, Notes: run.Notes},
		Ops: res.Ops, Effects: res.Effects,
		OpsByTypeOutcome: res.OpsByTypeOutcome, StatusCounts: res.StatusCounts,
		ServerErrors: res.ServerErrors,
		Checkers:     []CheckerInfo{},
		Violations:   []ViolationInfo{},
		Linearizability: LinearizabilityInfo{Result: res.Linearizability.Result, Keys: res.Linearizability.Keys,
			Ops: res.Linearizability.Ops, InfoOps: res.Linearizability.InfoOps,
			InfoDropped: res.Linearizability.InfoDropped, DurationMS: millis(res.Linearizability.Duration),
			TimeoutMS: millis(res.Linearizability.Timeout)},
		AcksChecked: res.Acks.Checked, AcksUnchecked: res.Acks.Unchecked,
		InfoRatePerNemesis: map[string]NemesisInfo{},
		NoFault:            nemesisInfo(res.NoFault, 0),
		Unavailability:     unavailabilityInfo(res.Unavailability),
		LeaderChanges:      res.LeaderChanges,
		Faults:             []FaultInfo{},
	}
	if !run.Started.IsZero() {
		doc.Run.Started = run.Started.UTC().Format(time.RFC3339)
	}
	if doc.OpsByTypeOutcome == nil {
		doc.OpsByTypeOutcome = map[string]map[string]int{}
	}
	if doc.StatusCounts == nil {
		doc.StatusCounts = map[string]int{}
	}
	if doc.ServerErrors == nil {
		doc.ServerErrors = map[string]int{}
	}
	for _, c := range res.Checkers {
		doc.Checkers = append(doc.Checkers, CheckerInfo{Name: c.Name, Valid: c.Violations == 0, Violations: c.Violations})
	}
	for _, v := range res.Violations {
		doc.Violations = append(doc.Violations, ViolationInfo{Checker: v.Checker, Key: v.Key, Detail: v.Detail,
			OpIDs: nonNil(v.OpIDs)})
	}
	for _, n := range res.Nemeses {
		doc.InfoRatePerNemesis[n.Name] = nemesisInfo(n.OutcomeCounts, n.Faults)
	}
	if res.Failover.Faults > 0 {
		f := unavailabilityInfo(res.Failover)
		doc.Failover = &f
	}
	for _, l := range res.Latency {
		doc.Latency = append(doc.Latency, RegionLatencyInfo{Region: l.Region, Grants: l.Grants,
			GrantP50MS: millis(l.GrantP50), GrantP99MS: millis(l.GrantP99), Duplicates: l.Duplicates,
			DuplicateP50MS: millis(l.DuplicateP50), DuplicateP99MS: millis(l.DuplicateP99), Local: l.Local,
			LocalP50MS: millis(l.LocalP50), LocalP99MS: millis(l.LocalP99)})
	}
	for _, f := range faults {
		doc.Faults = append(doc.Faults, FaultInfo{Nemesis: f.Nemesis, Detail: f.Detail, Targets: f.Targets,
			StartMS: millis(f.Start), EndMS: millis(f.End), LeaderBefore: f.LeaderBefore, LeaderAfter: f.LeaderAfter,
			Cut: f.Cut, Failed: f.Failed})
	}
	return doc
}

func unavailabilityInfo(u checker.Unavailability) UnavailabilityInfo {
	info := UnavailabilityInfo{LeaderFaults: u.Faults, Recovered: u.Recovered, P50MS: millis(u.P50),
		P99MS: millis(u.P99), MaxMS: millis(u.Max), Windows: []WindowInfo{}}
	for _, w := range u.Windows {
		info.Windows = append(info.Windows, WindowInfo{Nemesis: w.Nemesis, Detail: w.Detail,
			StartMS: millis(w.Start), LengthMS: millis(w.Length), Recovered: w.Recovered, OpID: w.OpID})
	}
	return info
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
