package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// SoakRun is one run of a soak (scripts/jepsen-soak.sh): its name, the
// group whose row it counts in, the seeded bug of a positive control (""
// for a safety run), its exit code and wall time, and its results.json
// (nil when the run left none).
type SoakRun struct {
	Name    string
	Group   string
	Control string
	Exit    int
	Seconds float64
	Results *Results
}

// SoakRow aggregates the safety runs of one group (or all of them).
type SoakRow struct {
	Group string
	Runs  int
	// Failed counts runs whose exit code was not 0 (a violation, or the
	// harness's trouble) or that left no results.
	Failed        int
	Ops           int // operations the checkers judged
	Violations    int
	Info          int // operations with an unknown outcome
	LeaderChanges int
	// Windows are the recovered unavailability windows after leader
	// faults, and Failover those after a lost leader region (to the first
	// ok write elsewhere), in milliseconds.
	Windows  []float64
	Failover []float64
	Seconds  float64
}

// InfoRate is Info/Ops.
func (r SoakRow) InfoRate() float64 {
	if r.Ops == 0 {
		return 0
	}
	return float64(r.Info) / float64(r.Ops)
}

func (r *SoakRow) add(run SoakRun) {
	r.Runs++
	r.Seconds += run.Seconds
	if run.Exit != 0 || run.Results == nil {
		r.Failed++
	}
	res := run.Results
	if res == nil {
		return
	}
	r.Ops += res.Ops
	r.Violations += len(res.Violations)
	for _, byOutcome := range res.OpsByTypeOutcome {
		r.Info += byOutcome["info"]
	}
	r.LeaderChanges += res.LeaderChanges
	for _, w := range res.Unavailability.Windows {
		if w.Recovered {
			r.Windows = append(r.Windows, w.LengthMS)
		}
	}
	if res.Failover != nil {
		for _, w := range res.Failover.Windows {
			if w.Recovered {
				r.Failover = append(r.Failover, w.LengthMS)
			}
		}
	}
}

// SoakControl is how one positive control fared.
type SoakControl struct {
	Name, Bug, Group string
	Caught           bool // exit code 0: a safety checker found the seeded bug
	Ops              int
	Found            map[string]int // violations by checker
	Network          string
}

// Soak aggregates a soak's runs: one row per group of safety runs (in the
// order groups first appear), the row of all of them, and the controls.
func Soak(runs []SoakRun) (rows []SoakRow, total SoakRow, controls []SoakControl) {
	total.Group = "all runs"
	index := map[string]int{}
	for _, run := range runs {
		if run.Control != "" {
			c := SoakControl{Name: run.Name, Bug: run.Control, Group: run.Group, Caught: run.Exit == 0, Found: map[string]int{}}
			if run.Results != nil {
				c.Ops, c.Network = run.Results.Ops, run.Results.Run.Network
				for _, v := range run.Results.Violations {
					c.Found[v.Checker]++
				}
			}
			controls = append(controls, c)
			continue
		}
		k, ok := index[run.Group]
		if !ok {
			k = len(rows)
			index[run.Group] = k
			rows = append(rows, SoakRow{Group: run.Group})
		}
		rows[k].add(run)
		total.add(run)
	}
	return rows, total, controls
}

// SoakMeta is what the table's caption says about the soak.
type SoakMeta struct {
	Date        time.Time
	Matrix      string  // the matrix's knobs, as the script was run
	WallSeconds float64 // wall time of the whole soak (waits for a shared lock included)
}

// SoakMarkdown is the aggregate table of a soak, in Markdown: a row per
// group and one for all runs (runs, ops checked, violations, info rate,
// unavailability p50 / p99 / max, leader changes, failover after a lost
// leader region), the controls, and a closing line with the totals and
// the machine time.
func SoakMarkdown(runs []SoakRun, meta SoakMeta) string {
	rows, total, controls := Soak(runs)
	var b strings.Builder
	fmt.Fprintf(&b, "Soak of %s on this 2-core VM: `%s`.\n\n", meta.Date.Format("2006-01-02"), meta.Matrix)
	b.WriteString("| runs | nodes, network, nemeses | ops checked | violations | failed runs | info rate | unavailability p50 / p99 / max | leader changes | region lost: failover p50 / p99 / max |\n")
	b.WriteString("| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |\n")
	line := func(r SoakRow, bold bool) {
		g := r.Group
		if bold {
			g = "**" + g + "**"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %d | %.1f%% | %s | %d | %s |\n", r.Runs, g, thousands(r.Ops), r.Violations,
			r.Failed, 100*r.InfoRate(), spread(r.Windows), r.LeaderChanges, spread(r.Failover))
	}
	for _, r := range rows {
		line(r, false)
	}
	line(total, true)
	if len(controls) > 0 {
		b.WriteString("\n| positive control | network | ops | violations found | verdict |\n| --- | --- | ---: | --- | --- |\n")
		for _, c := range controls {
			var found []string
			for _, k := range sortedKeys(c.Found) {
				found = append(found, fmt.Sprintf("%s %d", k, c.Found[k]))
			}
			verdict := "caught"
			if !c.Caught {
				verdict = "**MISSED**"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", c.Bug, orNone(c.Network), thousands(c.Ops), orNone(strings.Join(found, ", ")), verdict)
		}
	}
	caught := 0
	for _, c := range controls {
		if c.Caught {
			caught++
		}
	}
	var runTime float64
	for _, r := range runs {
		runTime += r.Seconds
	}
	fmt.Fprintf(&b, "\n%d runs, %s operations checked, %d violations, %d failed runs; %d of %d controls caught. The runs took %s of machine time, one after another; the soak took %s of wall time.\n",
		total.Runs, thousands(total.Ops), total.Violations, total.Failed, caught, len(controls),
		minutes(runTime), minutes(meta.WallSeconds))
	return b.String()
}

// SoakPassed reports whether a soak holds up: no failed safety run (no
// violation, no harness trouble) and every control caught.
func SoakPassed(runs []SoakRun) bool {
	_, total, controls := Soak(runs)
	return total.Failed == 0 && total.Violations == 0 && !slices.ContainsFunc(controls, func(c SoakControl) bool { return !c.Caught })
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// spread is "p50 / p99 / max" of millisecond values, in seconds, with the
// count; "-" when there are none.
func spread(ms []float64) string {
	if len(ms) == 0 {
		return "-"
	}
	s := slices.Clone(ms)
	sort.Float64s(s)
	q := func(p float64) float64 {
		rank := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(rank, 0), len(s)-1)]
	}
	return fmt.Sprintf("%.2f / %.2f / %.2f s (%d)", q(0.5)/1000, q(0.99)/1000, s[len(s)-1]/1000, len(s))
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func minutes(sec float64) string {
	return fmt.Sprintf("%.0f min", math.Round(sec/60))
}
