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
	_ = c.node.Read(context.Background(), ledger.Stale, func(l *fsm.Machine) { byState = l.Counts() })
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

// localDuplicateCollector exports the counts of duplicates the node
// answered from its own copy (--local-duplicates) and of their notes.
type localDuplicateCollector struct {
	svc                        *ledger.Service
	answers, notes, notesQueue *prometheus.Desc
}

func newLocalDuplicateCollector(svc *ledger.Service) *localDuplicateCollector {
	return &localDuplicateCollector{
		svc: svc,
		answers: prometheus.NewDesc("intentd_local_duplicate_claims_total",
			"Duplicate claims this node answered from its own copy (answered), or sent to the leader because the note queue was full (queue_full).",
			[]string{"outcome"}, nil),
		notes: prometheus.NewDesc("intentd_local_duplicate_notes_total",
			"Notes of locally answered duplicates: recorded by the leader (noted) or given up (lost: the duplicate is missing from the key's audit trail).",
			[]string{"outcome"}, nil),
		notesQueue: prometheus.NewDesc("intentd_local_duplicate_notes_queued", "Notes waiting to reach the leader.", nil, nil),
	}
}

func (c *localDuplicateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.answers
	ch <- c.notes
	ch <- c.notesQueue
}

func (c *localDuplicateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.LocalDuplicateStats()
	ch <- prometheus.MustNewConstMetric(c.answers, prometheus.CounterValue, float64(st.Answered), "answered")
	ch <- prometheus.MustNewConstMetric(c.answers, prometheus.CounterValue, float64(st.QueueFull), "queue_full")
	ch <- prometheus.MustNewConstMetric(c.notes, prometheus.CounterValue, float64(st.Noted), "noted")
	ch <- prometheus.MustNewConstMetric(c.notes, prometheus.CounterValue, float64(st.Lost), "lost")
	ch <- prometheus.MustNewConstMetric(c.notesQueue, prometheus.GaugeValue, float64(st.Queued))
}
