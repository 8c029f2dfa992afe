package cluster

import (
	"bytes"
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// recordingSink records what a state machine reports.
type recordingSink struct {
	mu      sync.Mutex
	batches [][]fsm.Ref
	all     int
}

func (r *recordingSink) KeysChanged(keys []fsm.Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, slices.Clone(keys)) // keys is only valid during the call
}

func (r *recordingSink) AllChanged() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all++
}

func (r *recordingSink) take() (batches [][]fsm.Ref, all int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	batches, all = r.batches, r.all
	r.batches, r.all = nil, 0
	return batches, all
}

func ref(key string) fsm.Ref { return fsm.Ref{Namespace: "default", Key: key} }

func TestStateMachineReportsTheKeysEachBatchTouched(t *testing.T) {
	sm := newStateMachine()
	rec := &recordingSink{}
	unsubscribe := sm.subscribe(rec)
	index := uint64(0)
	entry := func(cmd fsm.Command) *raft.Log {
		index++
		data, err := fsm.Encode(int64(index)*int64(time.Second), cmd)
		if err != nil {
			t.Fatal(err)
		}
		return &raft.Log{Type: raft.LogCommand, Index: index, Data: data}
	}
	noop := func() *raft.Log { index++; return &raft.Log{Type: raft.LogNoop, Index: index} }

	// One report per batch, after it is applied, naming each key once per
	// command; entries that are not commands, and commands that change no
	// intent, name nothing.
	out := sm.ApplyBatch([]*raft.Log{entry(claim("a", "o")), noop(), entry(claim("b", "o")),
		entry(&fsm.SetSettings{Settings: fsm.Settings{}})})
	if r, ok := out[0].(*fsm.Result); !ok || r.Status != fsm.StatusGranted {
		t.Fatalf("claim answered %+v", out[0])
	}
	batches, all := rec.take()
	if all != 0 || len(batches) != 1 || !slices.Equal(batches[0], []fsm.Ref{ref("a"), ref("b")}) {
		t.Fatalf("reported %v (all %d), want one batch of a and b", batches, all)
	}
	sm.ApplyBatch([]*raft.Log{noop(), entry(&fsm.SetSettings{})})
	if batches, all := rec.take(); len(batches) != 0 || all != 0 {
		t.Fatalf("a batch that changes no intent reported %v (all %d)", batches, all)
	}
	// A sweep names every key it sweeps.
	sm.Apply(entry(&fsm.Expire{Keys: []fsm.Ref{ref("c"), ref("a")}}))
	if batches, _ := rec.take(); len(batches) != 1 || !slices.Equal(batches[0], []fsm.Ref{ref("c"), ref("a")}) {
		t.Fatalf("sweep reported %v", batches)
	}

	// A restore replaces everything.
	var snap bytes.Buffer
	sm.read(func(l *fsm.Machine) {
		if err := l.Clone().WriteSnapshot(&snap); err != nil {
			t.Fatal(err)
		}
	})
	if err := sm.Restore(io.NopCloser(&snap)); err != nil {
		t.Fatal(err)
	}
	if batches, all := rec.take(); len(batches) != 0 || all != 1 {
		t.Fatalf("restore reported %v (all %d), want all once", batches, all)
	}

	unsubscribe()
	unsubscribe()
	sm.Apply(entry(claim("d", "o")))
	if batches, all := rec.take(); len(batches) != 0 || all != 0 {
		t.Fatalf("reported %v (all %d) after unsubscribing", batches, all)
	}
}

// countingReads is a node whose reads are counted, so a test can tell how
// often a long-poll read again. It embeds the node, so it is a
// replication.Replicator (SubscribeChanges) like the node.
type countingReads struct {
	*Node
	ledgertest.ReadSignal
}

func counting(n *Node) *countingReads { return &countingReads{Node: n} }

func (c *countingReads) Read(ctx context.Context, cons ledger.Consistency, fn func(*fsm.Machine)) error {
	defer c.Signal()
	return c.Node.Read(ctx, cons, fn)
}

type polled struct {
	in  *fsm.Intent
	err error
}

func longPoll(ctx context.Context, s *ledger.Service, key string, c ledger.Consistency) <-chan polled {
	ch := make(chan polled, 1)
	go func() {
		in, err := s.Wait(ctx, "", key, 0, time.Minute, c)
		ch <- polled{in, err}
	}()
	return ch
}

func answered(t *testing.T, ch <-chan polled, key string) {
	t.Helper()
	select {
	case p := <-ch:
		if p.err != nil || p.in == nil || p.in.Key != key {
			t.Fatalf("long-poll on %s answered %+v, %v", key, p.in, p.err)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatalf("long-poll on %s did not answer", key)
	}
}

// A claim on key a wakes the long-polls of a, linearizable on the leader
// and stale on a follower (as its replica applies it), and not one of b.
func TestClaimWakesOnlyTheLongPollsOfItsKey(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	leader := tc.leader()
	follower := tc.follower(leader)
	ctx := ctxT(t)
	ra, rb, rf := counting(leader), counting(leader), counting(follower)
	var svcs []*ledger.Service
	for _, r := range []*countingReads{ra, rb, rf} {
		s := ledgertest.NewService(t, r, ledger.Config{})
		t.Cleanup(s.Close)
		svcs = append(svcs, s)
	}
	pa := longPoll(ctx, svcs[0], "a", ledger.Linearizable)
	pb := longPoll(ctx, svcs[1], "b", ledger.Linearizable)
	pf := longPoll(ctx, svcs[2], "a", ledger.Stale)
	ra.Await(t, 1)
	rb.Await(t, 1)
	rf.Await(t, 1)

	tc.propose(ctx, claim("a", "o"))
	answered(t, pa, "a")
	answered(t, pf, "a")
	tc.propose(ctx, claim("b", "o"))
	answered(t, pb, "b")
	// Each read once on arrival and once when its key changed: the claim
	// on a did not wake the long-poll of b.
	for name, r := range map[string]*countingReads{"leader a": ra, "leader b": rb, "follower a": rf} {
		if got := r.Count(); got != 2 {
			t.Errorf("%s: the long-poll read %d times, want 2", name, got)
		}
	}
	for _, s := range svcs {
		if s.Waiting() != 0 {
			t.Errorf("%d long-polls still registered", s.Waiting())
		}
	}
}
