package cluster

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A follower refuses a pipelined AppendEntries and Raft's decoder stops
// reading the pipeline, as raft's pipelineDecode does: the sender's next
// sends must still return, so Raft's loop can see its decoder's end and
// close the pipeline. The transport's own pipeline wedges there
// (hashicorp/raft#612): the control shows this scenario reproduces it.
func TestPipelineSurvivesARefusedAppend(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrap   func(raft.AppendPipeline) raft.AppendPipeline
		wedged bool
	}{
		{"the transport's own pipeline (control)", func(p raft.AppendPipeline) raft.AppendPipeline { return p }, true},
		{"drained", func(p raft.AppendPipeline) raft.AppendPipeline { return newDrainedPipeline(p) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			follower, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 10*time.Second, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer follower.Close()
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case rpc := <-follower.Consumer():
						rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: false}, nil)
					case <-stop:
						return
					}
				}
			}()
			leader, err := raft.NewTCPTransportWithConfig("127.0.0.1:0", nil, &raft.NetworkTransportConfig{
				MaxPool: 1, MaxRPCsInFlight: pipelineInFlight, Timeout: 10 * time.Second, Logger: hclog.NewNullLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer leader.Close()
			raw, err := leader.AppendEntriesPipeline("f", follower.LocalAddr())
			if err != nil {
				t.Fatal(err)
			}
			p := tc.wrap(raw)

			sent := make(chan int, 1)
			go func() {
				n := 0
				for ; n < 4*pipelineInFlight; n++ {
					req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}, Term: 1, PrevLogEntry: uint64(n)}
					if _, err := p.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
						break
					}
				}
				sent <- n
			}()
			// Raft's decoder: the first answer is a refusal, and it stops.
			select {
			case f := <-p.Consumer():
				if f.Response().Success {
					t.Fatal("the follower's refusal arrived as a success")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no answer through the pipeline")
			}
			// The hang guard is long against the sends' few milliseconds;
			// the control waits it out once.
			guard := 10 * time.Second
			if tc.wedged {
				guard = 2 * time.Second
			}
			select {
			case n := <-sent:
				if tc.wedged {
					t.Fatalf("the transport's own pipeline sent all %d: this test no longer reproduces hashicorp/raft#612", n)
				}
			case <-time.After(guard):
				if !tc.wedged {
					t.Fatal("the sender parked after the decoder stopped: hashicorp/raft#612")
				}
			}
			closed := make(chan error, 1)
			go func() { closed <- p.Close() }()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("closing the pipeline hung")
			}
			if tc.wedged {
				<-sent // Close frees the parked sender
			}
		})
	}
}

// On the wan profile Raft replicates through the drained pipeline; on
// lan it does not pipeline at all.
func TestRaftsPipelineIsDrainedOnWAN(t *testing.T) {
	for _, network := range []string{NetworkLAN, NetworkWAN} {
		t.Run(network, func(t *testing.T) {
			tc := newTestCluster(t, func(c *Config) { c.Network = network })
			other, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			n := tc.start("n1", 1)
			tc.leader()
			p, err := n.raftTrans.AppendEntriesPipeline("n2", other.LocalAddr())
			if network == NetworkLAN {
				if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
					t.Fatalf("lan pipelines replication: %T, %v", p, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("no pipeline: %v", err)
			}
			defer p.Close()
			if _, ok := p.(*drainedPipeline); !ok {
				t.Fatalf("raft's pipeline is %T, want *drainedPipeline (hashicorp/raft#612)", p)
			}
		})
	}
}
