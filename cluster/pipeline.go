package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// pipelineInFlight is how many AppendEntries a leader keeps in flight to
// one follower on the wan profile: an entry goes out while the previous
// batch's answer is still on its way, instead of a round trip later.
const pipelineInFlight = 4

// AppendEntriesPipeline gives Raft the transport's pipeline with a
// consumer that is always drained (drainedPipeline).
func (t serialTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainedPipeline(p), nil
}

// drainedPipeline works around hashicorp/raft#612. Raft's pipeline decoder
// (pipelineDecode) stops reading the pipeline's answers when a follower
// answers Success=false or a newer term, and the transport's pipeline
// hands answers over unbuffered channels: its decoder then parks handing
// over the next answer, and the sender parks handing the decoder its next
// request, before it ever sees that Raft's decoder stopped. Neither
// returns, the pipeline is never closed, that follower never gets another
// entry, and Raft's Shutdown waits for ever. Here a goroutine takes every
// answer as soon as the transport has it and queues it, in order, for
// Raft; the transport's decoder never parks, the sender's next send
// returns, and Raft's loop sees its decoder's end and closes the pipeline
// (which drops whatever is still queued: Raft falls back to plain
// AppendEntries and finds the follower's log again).
type drainedPipeline struct {
	raft.AppendPipeline
	out  chan raft.AppendFuture
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newDrainedPipeline(p raft.AppendPipeline) *drainedPipeline {
	d := &drainedPipeline{AppendPipeline: p, out: make(chan raft.AppendFuture),
		stop: make(chan struct{}), done: make(chan struct{})}
	go d.drain()
	return d
}

func (d *drainedPipeline) drain() {
	defer close(d.done)
	in := d.AppendPipeline.Consumer()
	var queue []raft.AppendFuture
	for {
		var out chan raft.AppendFuture
		var next raft.AppendFuture
		if len(queue) > 0 {
			out, next = d.out, queue[0]
		}
		select {
		case f := <-in:
			queue = append(queue, f)
		case out <- next:
			queue[0] = nil
			queue = queue[1:]
		case <-d.stop:
			return
		}
	}
}

// Consumer returns the answers in the order the transport decoded them.
func (d *drainedPipeline) Consumer() <-chan raft.AppendFuture { return d.out }

// Close closes the transport's pipeline and stops the drain.
func (d *drainedPipeline) Close() error {
	err := d.AppendPipeline.Close()
	d.once.Do(func() { close(d.stop) })
	<-d.done
	return err
}
