package nemesis

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
)

// kill-stop-restart kills one follower, stops the other, starts the
// stopped one again before it returns and the killed one on heal; a
// stopped node that finds no ready leader when it is back fails the start
// (and the heal still restarts the killed one).
func TestKillStopRestart(t *testing.T) {
	start := func(t *testing.T, failOn string) (f *fake, detail string, targets []string, heal func() error, err error) {
		t.Helper()
		f = newFake(3)
		f.failOn = failOn
		nem, nerr := ByName("kill-stop-restart")
		if nerr != nil {
			t.Fatal(nerr)
		}
		env := &Env{Rand: rand.New(rand.NewSource(1)), net: f, cluster: f}
		detail, targets, h, err := nem.Start(t.Context(), env)
		f.failOn = ""
		return f, detail, targets, func() error { return h(t.Context()) }, err
	}
	f, detail, targets, heal, err := start(t, "")
	if err != nil {
		t.Fatal(err)
	}
	calls := f.snapshot()
	killed, stopped := strings.TrimPrefix(calls[0], "kill "), strings.TrimPrefix(calls[1], "stop ")
	if len(calls) != 3 || !strings.HasPrefix(calls[0], "kill ") || !strings.HasPrefix(calls[1], "stop ") ||
		calls[2] != "restart "+stopped || killed == "n1" || stopped == "n1" || killed == stopped {
		t.Fatalf("calls %q: want one follower (not the leader n1) killed, the other stopped and restarted", calls)
	}
	if !slices.Equal(targets, []string{killed, stopped}) || !strings.Contains(detail, "SIGTERM follower "+stopped) {
		t.Fatalf("detail %q, targets %v", detail, targets)
	}
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	if calls := f.snapshot(); calls[len(calls)-1] != "restart "+killed {
		t.Fatalf("heal called %q, want %s restarted", calls, killed)
	}

	// The same seed, and the stopped node finds no leader when it is back.
	f, _, _, heal, err = start(t, "restart "+stopped)
	if err == nil || !strings.Contains(err.Error(), "no ready leader") {
		t.Fatalf("start error %v, want no ready leader", err)
	}
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	if calls := f.snapshot(); calls[len(calls)-1] != "restart "+killed {
		t.Fatalf("heal after a failed start called %q, want %s restarted", calls, killed)
	}
}
