package report

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/intentledger/intentd/jepsen/checker"
)

// Summary is the one-screen text summary of a run: the verdict (valid or
// INVALID) in the first line, ops by type and outcome, each checker's
// verdict, the first violations with their op IDs, the info rate per
// nemesis, unavailability after leader loss, leader changes and the
// command line that reproduces the run.
func Summary(run Run, res checker.Result) string {
	var b strings.Builder
	verdict := "valid"
	if !res.Valid {
		verdict = fmt.Sprintf("INVALID (%d violations)", len(res.Violations))
	}
	if run.Harness != "" {
		verdict += " but HARNESS TROUBLE"
	}
	fmt.Fprintf(&b, "intentd fault run: %s: seed %d, %d nodes, %v, nemeses %s, workloads %s\n", verdict, run.Seed,
		run.Nodes, run.Duration.Round(time.Second), listOrNone(run.Nemeses), listOrNone(run.Workloads))
	if run.Harness != "" {
		fmt.Fprintf(&b, "harness: %s\n(the schedule stopped there; everything was healed and the checkers judged the history up to it)\n", run.Harness)
	}
	if run.Network != "" {
		fmt.Fprintf(&b, "network: %s\n", run.Network)
	}
	for _, n := range run.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}

	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tok\tfail\tinfo\ttotal\t")
	types := make([]string, 0, len(res.OpsByTypeOutcome))
	for t := range res.OpsByTypeOutcome {
		types = append(types, t)
	}
	sort.Strings(types)
	var sum [4]int
	for _, t := range types {
		m := res.OpsByTypeOutcome[t]
		total := m["ok"] + m["fail"] + m["info"]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", t, m["ok"], m["fail"], m["info"], total)
		sum[0], sum[1], sum[2], sum[3] = sum[0]+m["ok"], sum[1]+m["fail"], sum[2]+m["info"], sum[3]+total
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%d\t\n", sum[0], sum[1], sum[2], sum[3])
	_ = tw.Flush() // writes to a strings.Builder never fail

	b.WriteString("\ncheckers:")
	for _, c := range res.Checkers {
		if c.Violations == 0 {
			fmt.Fprintf(&b, " %s ok;", c.Name)
		} else {
			fmt.Fprintf(&b, " %s %d VIOLATIONS;", c.Name, c.Violations)
		}
	}
	b.WriteString("\n")
	lin := res.Linearizability
	fmt.Fprintf(&b, "linearizability: porcupine %s, %d ops over %d keys (%d with unknown answers, %d more left out as no-ops) in %v\n",
		orNone(lin.Result), lin.Ops, lin.Keys, lin.InfoOps, lin.InfoDropped, round(lin.Duration))
	fmt.Fprintf(&b, "acknowledged writes checked against final reads: %d (%d not checked: no later ok read)\n",
		res.Acks.Checked, res.Acks.Unchecked)
	if len(res.ServerErrors) > 0 {
		keys := make([]string, 0, len(res.ServerErrors))
		for k := range res.ServerErrors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("server errors:")
		for _, k := range keys {
			fmt.Fprintf(&b, " %s %d;", k, res.ServerErrors[k])
		}
		b.WriteString(" (507 ledger_full: refused, nothing written)\n")
	}

	if n := len(res.Violations); n > 0 {
		shown := min(n, maxViolationsSummary)
		fmt.Fprintf(&b, "\nviolations (first %d of %d):\n", shown, n)
		for _, v := range res.Violations[:shown] {
			fmt.Fprintf(&b, "  %s\n", v)
		}
	}

	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "during\tfaults\tops\tok\tfail\tinfo\tinfo rate")
	for _, n := range res.Nemeses {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.1f%%\n", n.Name, n.Faults, n.Ops, n.OK, n.Fail, n.Info, 100*n.InfoRate)
	}
	q := res.NoFault
	fmt.Fprintf(tw, "(no fault)\t-\t%d\t%d\t%d\t%d\t%.1f%%\n", q.Ops, q.OK, q.Fail, q.Info, 100*q.InfoRate)
	_ = tw.Flush()

	u := res.Unavailability
	fmt.Fprintf(&b, "\nunavailability after leader-targeted faults (fault start to first ok write): %d faults, %d recovered",
		u.Faults, u.Recovered)
	if u.Recovered > 0 {
		fmt.Fprintf(&b, ": p50 %v, p99 %v, max %v", round(u.P50), round(u.P99), round(u.Max))
	}
	b.WriteString("\n")
	if f := res.Failover; f.Faults > 0 {
		fmt.Fprintf(&b, "failover (leader's region lost to first ok write through another region): %d faults, %d recovered", f.Faults, f.Recovered)
		if f.Recovered > 0 {
			fmt.Fprintf(&b, ": p50 %v, p99 %v, max %v", round(f.P50), round(f.P99), round(f.Max))
		}
		var each []string
		for _, w := range f.Windows {
			if w.Recovered {
				each = append(each, round(w.Length).String())
			} else {
				each = append(each, "not recovered")
			}
		}
		fmt.Fprintf(&b, " (each: %s)\n", strings.Join(each, ", "))
	}
	fmt.Fprintf(&b, "leader changes: %d\n", res.LeaderChanges)
	if len(res.Latency) > 0 {
		b.WriteString("\nclaim latency by the region of the node asked, while no fault was active:\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "region\tgrants\tp50\tp99\tduplicates\tvia leader p50\tp99\tanswered locally\tp50\tp99")
		for _, l := range res.Latency {
			fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%d\t%v\t%v\t%d\t%v\t%v\n", l.Region, l.Grants, round(l.GrantP50), round(l.GrantP99),
				l.Duplicates, round(l.DuplicateP50), round(l.DuplicateP99), l.Local, round(l.LocalP50), round(l.LocalP99))
		}
		_ = tw.Flush()
	}
	fmt.Fprintf(&b, "\nreproduce: %s\n", orNone(run.Command))
	return b.String()
}

func round(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}
