package node

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestKillReleasesEverything: a killed node leaves nothing running in
// the test process, as one shut down leaves nothing: its addresses can be
// bound again, and the open files and goroutines are back to what they
// were, the ledger's note loops included (the local duplicates' loop,
// which every start runs here, and the refusal notes' loop, which the
// refusal answered from the leader's state starts).
func TestKillReleasesEverything(t *testing.T) {
	cfg, addrs := startTestConfig(t)
	files, goroutines := openFiles(), runtime.NumGoroutine()
	n := New(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	nodetest.WaitFor(t, 30*time.Second, "the node to lead", n.Cluster().IsLeader)
	req := ledger.ClaimRequest{Key: "k", Tool: "pay.charge", Owner: "a", Payload: json.RawMessage(`{"a":1}`)}
	for i, want := range []fsm.Status{fsm.StatusGranted, fsm.StatusInFlight, fsm.StatusInFlight} {
		if i > 0 {
			req.Owner = "b"
		}
		r, err := n.svc.Claim(ctx, req)
		if err != nil || r.Status != want {
			t.Fatalf("claim %d: %+v, %v; want %s", i, r, err, want)
		}
	}
	if st := n.svc.RefusalStats(); st.Answered != 1 {
		t.Fatalf("no refusal answered from the state (the notes' loop did not start): %+v", st)
	}
	n.Kill()
	released(t, addrs, files, goroutines)
	runtime.KeepAlive(n)
}
