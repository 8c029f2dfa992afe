package node

import "github.com/intentledger/intentd/cluster"

// FastTimings sets the timings of in-process clusters on loopback (tests,
// the local cluster, the canary): cluster.FastTimings, elections and
// failure detection in about a second instead of the production defaults'
// several, so a test that kills a leader waits less. Loopback has no
// network delay to absorb, so they are safe there and nowhere else.
func FastTimings(c *Config) { c.Timings = cluster.FastTimings() }
