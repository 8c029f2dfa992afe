// Package probetest reads Prometheus series back in tests.
package probetest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// SampleCount is the sample count of the histogram series of name in g
// whose labels include labels (0 when there is none).
func SampleCount(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) uint64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return s.GetHistogram().GetSampleCount()
		}
	}
	return 0
}
