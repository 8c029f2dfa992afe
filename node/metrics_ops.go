package node

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// timedReplicator measures how long proposals take to commit and apply;
// reads and the change feed pass through to the node.
type timedReplicator struct {
	ledger.Replicator
	apply *prometheus.HistogramVec
}

// Propose implements ledger.Replicator.
func (t timedReplicator) Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	start := time.Now()
	r, err := t.Replicator.Propose(ctx, cmd)
	t.apply.WithLabelValues(applyOutcome(err)).Observe(time.Since(start).Seconds())
	return r, err
}

// applyOutcome names a proposal's outcome for the apply histogram.
func applyOutcome(err error) string {
	var nl *ledger.NotLeaderError
	switch {
	case err == nil:
		return "applied"
	case errors.As(err, &nl), errors.Is(err, ledger.ErrNotLeader):
		return "not_leader"
	case errors.Is(err, ledger.ErrOutcomeUnknown):
		return "unknown"
	case errors.Is(err, ledger.ErrNoLeader), errors.Is(err, ledger.ErrShuttingDown):
		return "unavailable"
	}
	return "error"
}

// instrument registers the node's operational metrics and returns the
// replicator the ledger service should use (proposals timed).
func (n *Node) instrument(node *cluster.Node) ledger.Replicator {
	apply := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "intentd_raft_apply_duration_seconds",
		Help:    "Time from proposing a command on this node to the state machine's answer, by outcome (applied, not_leader, unknown, unavailable, error).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"outcome"})
	n.registry.MustRegister(apply, newOpsCollector(node))
	return timedReplicator{Replicator: node, apply: apply}
}

// opsCollector exports Raft, snapshot and gossip numbers on every scrape.
type opsCollector struct {
	node                                                *cluster.Node
	state, lastIndex, snapIndex, snapBytes, snapsOnDisk *prometheus.Desc
	gossip                                              *prometheus.Desc
	forwarded, forwardsServed                           *prometheus.Desc
}

func newOpsCollector(n *cluster.Node) *opsCollector {
	return &opsCollector{
		node:        n,
		state:       prometheus.NewDesc("intentd_raft_state", "1 for this node's Raft state (leader, follower, candidate, shutdown), 0 for the others.", []string{"state"}, nil),
		lastIndex:   prometheus.NewDesc("intentd_raft_last_index", "Index of the last entry in the local Raft log.", nil, nil),
		snapIndex:   prometheus.NewDesc("intentd_raft_last_snapshot_index", "Raft index of the newest snapshot on disk (0: none).", nil, nil),
		snapBytes:   prometheus.NewDesc("intentd_raft_snapshot_size_bytes", "Size of the newest snapshot on disk.", nil, nil),
		snapsOnDisk: prometheus.NewDesc("intentd_raft_snapshots", "Snapshots retained on disk.", nil, nil),
		gossip:      prometheus.NewDesc("intentd_gossip_members", "Members memberlist knows alive (this node included).", nil, nil),
		forwarded: prometheus.NewDesc("intentd_forwarded_commands_total",
			"Commands this node forwarded to the leader (writes it received as a follower).", nil, nil),
		forwardsServed: prometheus.NewDesc("intentd_forwarded_commands_served_total",
			"Commands followers forwarded to this node to apply as the leader.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.lastIndex, c.snapIndex, c.snapBytes, c.snapsOnDisk, c.gossip, c.forwarded, c.forwardsServed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *opsCollector) Collect(ch chan<- prometheus.Metric) {
	cur := c.node.Status().State
	for _, s := range []string{"leader", "follower", "candidate", "shutdown"} {
		v := 0.0
		if s == cur {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, s)
	}
	st := c.node.Stats()
	ch <- prometheus.MustNewConstMetric(c.lastIndex, prometheus.GaugeValue, float64(st.LastLogIndex))
	ch <- prometheus.MustNewConstMetric(c.snapIndex, prometheus.GaugeValue, float64(st.LastSnapshotIndex))
	ch <- prometheus.MustNewConstMetric(c.snapBytes, prometheus.GaugeValue, float64(st.LastSnapshotBytes))
	ch <- prometheus.MustNewConstMetric(c.snapsOnDisk, prometheus.GaugeValue, float64(st.Snapshots))
	ch <- prometheus.MustNewConstMetric(c.gossip, prometheus.GaugeValue, float64(st.GossipMembers))
	ch <- prometheus.MustNewConstMetric(c.forwarded, prometheus.CounterValue, float64(st.Forwarded))
	ch <- prometheus.MustNewConstMetric(c.forwardsServed, prometheus.CounterValue, float64(st.ForwardsServed))
}

// newLogWriteHistogram times the Raft log store's appends (write and
// fsync; cluster.Config.ObserveLogWrite).
func newLogWriteHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "intentd_raft_log_write_duration_seconds",
		Help:    "Time to append a batch of entries to the Raft log store, the fsync that makes them durable included: the disk's share of commit latency.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
}

// diskCollector exports the free and total bytes of the file system
// holding the data dir, read on every scrape.
type diskCollector struct {
	dir        string
	free, size *prometheus.Desc
}

func newDiskCollector(dir string) *diskCollector {
	return &diskCollector{
		dir:  dir,
		free: prometheus.NewDesc("intentd_data_dir_free_bytes", "Bytes an unprivileged process may still write on the file system holding --data-dir.", nil, nil),
		size: prometheus.NewDesc("intentd_data_dir_size_bytes", "Size of the file system holding --data-dir.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.free
	ch <- c.size
}

// Collect implements prometheus.Collector. A failed statfs exports
// neither series (the alert on a missing series fires) rather than a
// made-up zero or a failed scrape.
func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	free, size, err := diskSpace(c.dir)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(free))
	ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(size))
}
