package cluster

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Raft gets a transport whose heartbeats reach its main goroutine like
// every other RPC: raft v1.7's fast path answers them on the transport's
// goroutine, racing the main one (hashicorp/raft#695), which the fault
// suite saw diverge two replicas' state machines.
func TestHeartbeatsReachRaftsMainGoroutine(t *testing.T) {
	recv, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Close()
	send, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()

	fastPath := make(chan raft.RPC, 1)
	var trans raft.Transport = serialTransport{NetworkTransport: recv}
	trans.SetHeartbeatHandler(func(rpc raft.RPC) { fastPath <- rpc })

	heartbeat := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("leader"), Addr: []byte(send.LocalAddr())},
		Term:      7,
	}
	done := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		done <- send.AppendEntries("follower", recv.LocalAddr(), heartbeat, &resp)
	}()
	select {
	case rpc := <-trans.Consumer():
		if hb, ok := rpc.Command.(*raft.AppendEntriesRequest); !ok || hb.Term != 7 {
			t.Fatalf("the main goroutine got %T %+v, want the heartbeat", rpc.Command, rpc.Command)
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7}, nil)
	case <-fastPath:
		t.Fatal("a heartbeat went to the fast path, off Raft's main goroutine (hashicorp/raft#695)")
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat arrived nowhere")
	}
	if err := <-done; err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
}

// The node hands Raft that transport.
func TestNodeGivesRaftTheSerialTransport(t *testing.T) {
	tc := newTestCluster(t, nil)
	n := tc.start("n1", 1)
	if _, ok := n.raftTrans.(serialTransport); !ok {
		t.Fatalf("raft runs on %T, want serialTransport (no heartbeat fast path)", n.raftTrans)
	}
}
