package cluster

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/ledger"
)

// A peer that starts sending an InstallSnapshot and then stalls (a leader
// paused or cut off mid-stream, or a stranger on the Raft port) holds the
// receiver's Raft goroutine, which reads the stream with no deadline, even
// to refuse a stale one. Before the fix Shutdown waited for that goroutine
// forever: the fault suite's membership nemesis saw a node hang for 30 s
// after SIGTERM and lost the whole run.
func TestShutdownIsBoundedWhileAPeerStallsASnapshot(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	leader := tc.leader()
	follower := tc.follower(leader)

	sender, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 30*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	stalled, unstall := io.Pipe()
	defer unstall.Close()
	sent := make(chan error, 1)
	go func() {
		req := &raft.InstallSnapshotRequest{
			RPCHeader:          raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte(sender.LocalAddr())},
			SnapshotVersion:    raft.SnapshotVersionMax,
			Term:               1, // stale: refused, but the stream is drained first
			Leader:             []byte(sender.LocalAddr()),
			LastLogIndex:       1,
			LastLogTerm:        1,
			Size:               1 << 20,
			ConfigurationIndex: 1,
		}
		var resp raft.InstallSnapshotResponse
		sent <- sender.InstallSnapshot(raft.ServerID(follower.ID()), raft.ServerAddress(follower.RaftAddr()), req, &resp, stalled)
	}()
	// The follower's Raft goroutine is stuck once it falls ever further
	// behind the log the others keep committing (heartbeats are answered
	// off that goroutine, so they do not tell).
	for i := 0; ; i++ {
		if i == 500 {
			t.Fatal("the follower kept up: the stalled snapshot stream never held its Raft goroutine")
		}
		r := tc.propose(ctxT(t), claim("k"+strconv.Itoa(i), "o"))
		if r.Index > follower.raft.LastIndex()+20 {
			break
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- follower.Shutdown(ctx) }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("shutdown while a peer stalls a snapshot: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("shutdown hung while a peer stalled a snapshot stream (the bound was 10 s)")
	}
	unstall.Close()
	<-sent
	// The rest of the cluster goes on without it.
	if _, err := tc.leader().Propose(ctxT(t), claim("after", "o")); err != nil {
		t.Fatalf("propose after the follower left: %v", err)
	}
}

// unansweredFuture is a command Raft took into its apply queue and never
// answered: hashicorp/raft (with BatchApplyCh) leaves a command in that
// queue unanswered when it shuts down.
type unansweredFuture struct {
	raft.ApplyFuture
	release chan struct{}
}

func (f unansweredFuture) Error() error { <-f.release; return nil }

// A command Raft never answers ends its wait when Raft's shutdown ends,
// as an unknown outcome: the leader's Kill waited for ever on a command a
// follower had forwarded just before (the forwarding test hung one run in
// about forty).
func TestAWaitForAnApplyEndsWithRaftsShutdown(t *testing.T) {
	n := &Node{raftStopped: make(chan struct{})}
	f := unansweredFuture{release: make(chan struct{})}
	defer close(f.release)
	done := make(chan error, 1)
	go func() { done <- n.awaitApply(context.Background(), f) }()
	select {
	case err := <-done:
		t.Fatalf("the wait ended before Raft stopped: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(n.raftStopped)
	select {
	case err := <-done:
		if !errors.Is(err, ledger.ErrOutcomeUnknown) {
			t.Fatalf("got %v, want an unknown outcome", err)
		}
		if got := n.mapApplyError(err); !errors.Is(got, ledger.ErrOutcomeUnknown) || strings.Count(got.Error(), "unknown") != 1 {
			t.Fatalf("mapped to %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait outlived Raft's shutdown")
	}
}
