package node

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// clusterCollector exports the node's Raft view on every scrape.
type clusterCollector struct {
	node                                   *cluster.Node
	leader, term, commit, applied, members *prometheus.Desc
	ready, intents, info                   *prometheus.Desc
}

func newClusterCollector(n *cluster.Node) *clusterCollector {
	return &clusterCollector{
		node:    n,
		leader:  prometheus.NewDesc("intentd_raft_leader", "1 when this node is the Raft leader.", nil, nil),
		term:    prometheus.NewDesc("intentd_raft_term", "Current Raft term.", nil, nil),
		commit:  prometheus.NewDesc("intentd_raft_commit_index", "Raft commit index.", nil, nil),
		applied: prometheus.NewDesc("intentd_raft_applied_index", "Index the ledger state machine has applied.", nil, nil),
		members: prometheus.NewDesc("intentd_cluster_members", "Members by gossip state.", []string{"gossip"}, nil),
		ready:   prometheus.NewDesc("intentd_ready", "1 when the node is ready to serve.", nil, nil),
		intents: prometheus.NewDesc("intentd_intents", "Intents in this replica by state (in_doubt needs reconciliation).", []string{"state"}, nil),
		info: prometheus.NewDesc("intentd_node_info", "Always 1; its labels say where the node runs (region), its role (voter or replica) "+
			"and its timing profile (network): join other series on the instance to group them by region.", []string{"region", "role", "network"}, nil),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.leader, c.term, c.commit, c.applied, c.members, c.ready, c.intents, c.info} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.node.Status()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, b(st.State == "leader"))
	ch <- prometheus.MustNewConstMetric(c.term, prometheus.GaugeValue, float64(st.Term))
	ch <- prometheus.MustNewConstMetric(c.commit, prometheus.GaugeValue, float64(st.CommitIndex))
	ch <- prometheus.MustNewConstMetric(c.applied, prometheus.GaugeValue, float64(st.AppliedIndex))
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, b(st.Ready))
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, st.Region, st.Role, st.Network)
	var byState map[fsm.State]int
	_ = c.node.Read(context.Background(), ledger.Stale, func(l *fsm.Ledger) { byState = l.Counts() })
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(c.intents, prometheus.GaugeValue, float64(n), string(state))
	}
	counts := map[string]int{}
	for _, n := range st.Nodes {
		counts[n.Gossip]++
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.members, prometheus.GaugeValue, float64(n), state)
	}
}
