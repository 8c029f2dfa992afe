package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/intentledger/intentd/jepsen/nodes"
)

// wedgeTimeout bounds, in kill-stop-restart, how long after the stopped
// node starts again the cluster may take to have a ready leader: the
// node's start, an election and its readiness. The wedge this nemesis
// repeats lasted until the crashed node came back, however long that was.
const wedgeTimeout = 30 * time.Second

// killStopRestart repeats issue 28's wedge sequence: SIGKILL one follower,
// SIGTERM another (with --leave-on-terminate it asks the leader to remove
// it, which the leader must refuse: the voters left would not include a
// live majority), start the second again, then, on heal, the first. Once
// the second is back a majority is up again, and the cluster must have a
// leader: Start measures how long it took (in the run's log) and fails, so
// the run fails, when there is none within wedgeTimeout. The fault is
// recorded from the moment the second node is back, so the availability
// checkers measure the time to the first write with the first node still
// down.
func killStopRestart(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	l, c, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	r, err := env.rng()
	if err != nil {
		return "", nil, nil, err
	}
	followers := others(c.Nodes(), l)
	if len(followers) < 2 {
		return "", nil, nil, fmt.Errorf("kill-stop-restart needs two followers, the cluster has %d", len(followers))
	}
	p := r.Perm(len(followers))
	crashed, stopped := followers[p[0]], followers[p[1]]
	restartCrashed := func(ctx context.Context) error { return c.Restart(ctx, crashed) }
	if err := c.Kill(crashed); err != nil {
		return "", nil, nil, err
	}
	// An election timeout, so the leader has seen its AppendEntries to the
	// killed node fail (within a heartbeat) before the stop asks to leave:
	// the leader's live-majority check counts a voter live until then.
	if !sleepCtx(ctx, c.ElectionTimeout()) {
		return "", nil, restartCrashed, ctx.Err()
	}
	if err := c.Stop(ctx, stopped); err != nil {
		return "", nil, func(ctx context.Context) error {
			return errors.Join(c.Restart(ctx, stopped), restartCrashed(ctx))
		}, err
	}
	back := time.Now()
	wctx, cancel := context.WithTimeout(ctx, wedgeTimeout)
	defer cancel()
	err = c.Restart(wctx, stopped) // waits until it is ready: it knows a leader
	var leader int
	if err == nil {
		leader, err = c.WaitLeader(wctx)
	}
	took := time.Since(back).Round(time.Millisecond)
	if err != nil {
		return "", nil, restartCrashed, fmt.Errorf("no ready leader %v after %s started again with a majority up (%s down since its kill -9): %w",
			took, nodes.Name(stopped), nodes.Name(crashed), err)
	}
	env.logf("nemesis kill-stop-restart: leader %s %v after %s started again", nodes.Name(leader), took, nodes.Name(stopped))
	// The detail stays a function of the seed (the time is in the log).
	return fmt.Sprintf("kill -9 follower %s, SIGTERM follower %s, restart %s (a leader again), restart %s on heal",
			nodes.Name(crashed), nodes.Name(stopped), nodes.Name(stopped), nodes.Name(crashed)),
		names([]int{crashed, stopped}), restartCrashed, nil
}

// sleepCtx waits d or until ctx ends; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
