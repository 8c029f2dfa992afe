// Package netnstest holds what the fault suite's own tests share.
package netnstest

import (
	"os"
	"testing"

	"github.com/intentledger/intentd/jepsen/netns"
)

// Require skips the test under -short (network namespaces and real
// processes are the integration tier) and when the machine cannot run
// the suite (no root, no namespaces), except in CI (CI=true), where that
// is a failure.
func Require(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("network namespaces and real processes: integration tier")
	}
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the fault suite cannot run in CI: %v", err)
		}
		t.Skipf("skipping (set CI=true to make this a failure): %v", err)
	}
}
