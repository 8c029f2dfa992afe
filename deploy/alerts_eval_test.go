package deploy_test

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestAlertExpressionsFireOnTheirCondition evaluates alert expressions
// from the rules file with Prometheus's query engine on made-up series:
// each fires on its condition and stays silent on the control beside it.
// An expected result of nothing means the alert does not fire.
func TestAlertExpressionsFireOnTheirCondition(t *testing.T) {
	exprs := map[string]string{}
	for _, r := range loadRules(t) {
		exprs[r.Alert] = strings.Join(strings.Fields(r.Expr), " ")
	}
	cases := []struct {
		name, alert, load, at, want string
	}{
		{"no node leads", "IntentdNoLeader",
			`intentd_raft_leader{job="intentd",instance="a"} 0x10
			 intentd_raft_leader{job="intentd",instance="b"} 0x10`, "10m", `{job="intentd"} 0`},
		{"one node leads (control)", "IntentdNoLeader",
			`intentd_raft_leader{job="intentd",instance="a"} 1x10
			 intentd_raft_leader{job="intentd",instance="b"} 0x10`, "10m", ``},
		{"five elections in 15 minutes", "IntentdLeadershipChurn",
			`intentd_raft_term{job="intentd",instance="a"} 1 1 2 2 3 3 4 4 5 5 5 5 5 5 5 5`, "15m", `{job="intentd"} 4`},
		{"one election (control)", "IntentdLeadershipChurn",
			`intentd_raft_term{job="intentd",instance="a"} 1 1 2 2 2 2 2 2 2 2 2 2 2 2 2 2`, "15m", ``},
		{"approvals pending, none decided", "IntentdApprovalsStalled",
			`intentd_intents{job="intentd",instance="a",state="pending_approval"} 2x40
			 intentd_http_requests_total{job="intentd",instance="a",route="/v1/intents/:key/approve",method="POST",code="200"} 5x40`, "40m", `{job="intentd"} 2`},
		{"approvals pending, one approved in the window (control)", "IntentdApprovalsStalled",
			`intentd_intents{job="intentd",instance="a",state="pending_approval"} 2x40
			 intentd_http_requests_total{job="intentd",instance="a",route="/v1/intents/:key/approve",method="POST",code="200"} 5x30 6x10`, "40m", ``},
		{"pending drained a moment ago (control)", "IntentdApprovalsStalled",
			`intentd_intents{job="intentd",instance="a",state="pending_approval"} 2x20 0 2x19`, "40m", ``},
		{"in_doubt grew", "IntentdInDoubtGrowing",
			`intentd_intents{job="intentd",instance="a",state="in_doubt"} 0x10 3x10`, "20m", `{job="intentd"} 3`},
		{"in_doubt steady (control)", "IntentdInDoubtGrowing",
			`intentd_intents{job="intentd",instance="a",state="in_doubt"} 3x20`, "20m", ``},
		{"room for two snapshots", "IntentdSnapshotHeadroomLow",
			`intentd_data_dir_free_bytes{job="intentd",instance="a"} 200x10
			 intentd_raft_snapshot_size_bytes{job="intentd",instance="a"} 100x10`, "10m", `intentd_data_dir_free_bytes{job="intentd",instance="a"} 200`},
		{"no snapshot yet (control)", "IntentdSnapshotHeadroomLow",
			`intentd_data_dir_free_bytes{job="intentd",instance="a"} 200x10
			 intentd_raft_snapshot_size_bytes{job="intentd",instance="a"} 0x10`, "10m", ``},
		{"5% free", "IntentdDataDirSpaceLow",
			`intentd_data_dir_free_bytes{job="intentd",instance="a"} 5x10
			 intentd_data_dir_size_bytes{job="intentd",instance="a"} 100x10`, "10m", `{job="intentd",instance="a"} 0.05`},
		{"the leader refuses for memory", "IntentdLedgerFull",
			`intentd_capacity_refusing{job="intentd",instance="a",resource="memory"} 0x5 1x5`, "10m",
			`intentd_capacity_refusing{job="intentd",instance="a",resource="memory"} 1`},
		{"room again (control)", "IntentdLedgerFull",
			`intentd_capacity_refusing{job="intentd",instance="a",resource="memory"} 1x5 0x5`, "10m", ``},
		{"5% of the memory high water left", "IntentdCapacityHeadroomLow",
			`intentd_capacity_headroom_bytes{job="intentd",instance="a",resource="memory"} 5x20
			 intentd_capacity_limit_bytes{job="intentd",instance="a",resource="memory"} 100x20`, "20m", `{job="intentd",instance="a",resource="memory"} 0.05`},
		{"half left (control)", "IntentdCapacityHeadroomLow",
			`intentd_capacity_headroom_bytes{job="intentd",instance="a",resource="disk"} 50x20
			 intentd_capacity_limit_bytes{job="intentd",instance="a",resource="disk"} 100x20`, "20m", ``},
		{"a lease lost through intent-proxy", "IntentProxyLeaseLost",
			`intent_proxy_lease_lost_total{job="proxy",instance="p",route="charge"} 0x10 1x10`, "20m", `{job="proxy",instance="p",route="charge"} 1`},
	}
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			expr, ok := exprs[tt.alert]
			if !ok {
				t.Fatalf("no alert %s in the rules file", tt.alert)
			}
			var load strings.Builder
			for _, line := range strings.Split(tt.load, "\n") {
				load.WriteString("  " + strings.TrimSpace(line) + "\n")
			}
			script := "load 1m\n" + load.String() + "\neval instant at " + tt.at + " " + expr + "\n"
			if tt.want != "" {
				script += "  " + tt.want + "\n"
			}
			promqltest.RunTest(t, script, engine)
		})
	}
}
