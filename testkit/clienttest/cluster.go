package clienttest

import (
	"context"
	"testing"
	"time"

	"github.com/intentledger/intentd/testkit/localcluster"
)

// startLimit bounds how long StartCluster waits for the cluster to form: a
// hang guard, not a performance threshold.
const startLimit = 90 * time.Second

// Cluster is a real intentd cluster of in-process nodes (see
// testkit/localcluster).
type Cluster = localcluster.Cluster

// Node is one member of a Cluster.
type Node = localcluster.Node

// StartCluster starts size nodes that bootstrap together in the test's
// temporary directory and waits until every one is ready. The nodes are
// killed when the test ends. Under -short (the unit tier) the test is
// skipped instead. Set INTENTD_TEST_LOGS=1 to see their logs.
func StartCluster(tb testing.TB, size int) *Cluster {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts a cluster: integration tier")
	}
	ctx, cancel := context.WithTimeout(context.Background(), startLimit)
	defer cancel()
	c, err := localcluster.Start(ctx, size, tb.TempDir())
	if err != nil {
		tb.Fatalf("clienttest: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}
