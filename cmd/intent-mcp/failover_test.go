package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestGateLeaderKilled SIGKILLs the ledger's leader between a call's grant
// and its complete: the upstream has acted and holds its answer while the
// leader dies. The gate records the result on the new leader, the caller
// gets it once, a retry with the same key replays it, and the effects file
// holds one effect. The world is its own: nodes die here.
func TestGateLeaderKilled(t *testing.T) {
	w := startWorld(t)
	h := w.launch(t)
	ctx := context.Background()

	cases := []struct {
		name, tool, ledgerTool, effects, order string
		// elected waits for a new leader before the upstream answers, so
		// the lease's renewals (and not only the complete) go through the
		// failover.
		elected bool
	}{
		{name: "the complete is sent during the election", tool: "web__charge", ledgerTool: "web.charge", effects: w.effWeb, order: "fo-web"},
		{name: "the call runs on under the new leader", tool: "pay__charge", ledgerTool: "pay.charge", effects: w.effPay, order: "fo-pay", elected: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"order": tc.order, "amount": 5, "mode": "block"}
			key := explicitKey(tc.order)
			type answer struct {
				res string
				id  any
				err error
				ok  bool
			}
			done := make(chan answer, 1)
			go func() {
				res, err := h.call(t, tc.tool, args, key)
				if err != nil {
					done <- answer{err: err}
					return
				}
				done <- answer{res: describe(res), id: sc(t, res)["charge_id"], ok: !res.IsError && !isReplay(res)}
			}()
			// Granted: the upstream made its effect and waits to answer.
			nodetest.WaitFor(t, 30*time.Second, "the effect", func() bool { return effects(t, tc.effects, "charge", tc.order) == 1 })

			killed := leaderProc(t, w)
			killed.Kill()
			if tc.elected {
				nodetest.WaitFor(t, 30*time.Second, "a new leader", func() bool {
					for _, n := range w.nodes {
						if n != killed {
							if l := nodetest.LeaderHTTP(n.HTTP, ""); l != "" && l != killed.HTTP {
								return true
							}
						}
					}
					return false
				})
			}
			if err := os.WriteFile(tc.effects+".release", nil, 0o600); err != nil {
				t.Fatal(err)
			}
			first := <-done
			if first.err != nil || !first.ok || first.id != "ch_"+tc.order+"_1" {
				t.Fatalf("the call across the failover: %v %s", first.err, first.res)
			}
			again := h.mustCall(t, tc.tool, args, key)
			if !isReplay(again) || again.IsError || sc(t, again)["charge_id"] != first.id {
				t.Errorf("retry after the failover: %s, want a replay of %s", describe(again), first.res)
			}
			in, err := w.ledger.Get(ctx, "mcp:test:k:"+tc.ledgerTool+":"+tc.order, client.GetOptions{})
			if err != nil || (in.State != client.StateExecuted && in.State != client.StateCommitted) {
				t.Errorf("intent after the failover: %+v, %v", in, err)
			}
			if n := effects(t, tc.effects, "charge", tc.order); n != 1 {
				t.Errorf("%d effects, want exactly 1", n)
			}

			// The killed node comes back on its ports and data; the next case
			// starts from three nodes again.
			killed.Start(t)
			nodetest.WaitFor(t, 60*time.Second, "the restarted node to be ready", func() bool { return nodetest.Ready(killed.HTTP) })
		})
	}

	t.Run("a gate started after both failovers replays both", func(t *testing.T) {
		other := w.serveHTTP(t)
		for _, tc := range cases {
			res := other.mustCall(t, tc.tool, map[string]any{"order": tc.order, "amount": 5, "mode": "block"}, explicitKey(tc.order))
			if !isReplay(res) || sc(t, res)["charge_id"] != "ch_"+tc.order+"_1" {
				t.Errorf("%s: %s", tc.tool, describe(res))
			}
			if n := effects(t, tc.effects, "charge", tc.order); n != 1 {
				t.Errorf("%s: %d effects, want exactly 1", tc.tool, n)
			}
		}
	})
}

// leaderProc returns the node process that leads the world's cluster.
func leaderProc(t *testing.T, w *world) *nodetest.Proc {
	t.Helper()
	var leader *nodetest.Proc
	nodetest.WaitFor(t, 30*time.Second, "a known leader", func() bool {
		for _, n := range w.nodes {
			if !nodetest.Ready(n.HTTP) {
				continue
			}
			l := nodetest.LeaderHTTP(n.HTTP, "")
			for _, m := range w.nodes {
				if m.HTTP == l {
					leader = m
					return true
				}
			}
		}
		return false
	})
	return leader
}
