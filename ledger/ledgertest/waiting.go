package ledgertest

import (
	"testing"
	"time"

	"github.com/intentledger/intentd/ledger"
)

// AwaitWaiting waits until at least n long-polls are waiting on s
// (Service.Waiting), failing t after 30 s (a hang guard, not a threshold).
// A test that makes its change only then knows each long-poll was waiting
// when the change came: one that answered without waiting never counts,
// so the test fails instead of passing on a change that landed first.
func AwaitWaiting(t testing.TB, s *ledger.Service, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.Waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d long-polls waiting, want %d", s.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
