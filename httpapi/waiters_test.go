package httpapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/namespace"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// signalledMemory is the in-memory ledger with its reads signalled.
type signalledMemory struct {
	*ledgertest.Memory
	ledgertest.ReadSignal
}

func (m *signalledMemory) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	defer m.Signal()
	return m.Memory.Read(ctx, c, fn)
}

// signalledFollower is a follower with its reads signalled.
type signalledFollower struct {
	*followerReplicator
	ledgertest.ReadSignal
}

func (f *signalledFollower) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	defer f.Signal()
	return f.followerReplicator.Read(ctx, c, fn)
}

// envWithLimits is one API node whose Service has limits; the Service is
// closed first at cleanup, so no long-poll outlives the test.
func envWithLimits(t *testing.T, limits ledger.Limits, opts ...envOption) (*testEnv, *signalledMemory, *ledger.Service) {
	t.Helper()
	mem := ledgertest.NewMemory(epoch)
	r := &signalledMemory{Memory: mem}
	svc := ledgertest.NewService(t, r, ledger.Config{Limits: limits})
	e := newEnvOver(t, mem, r, append(opts, func(c *Config) { c.Service = svc })...)
	t.Cleanup(svc.Close)
	return e, r, svc
}

// getAsync sends a GET in the background; its reply arrives on the channel.
func getAsync(t *testing.T, base, path string) <-chan reply {
	ch := make(chan reply, 1)
	go func() {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Error(err)
			ch <- reply{}
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			ch <- reply{}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Error(err)
		}
		ch <- reply{status: resp.StatusCode, header: resp.Header, body: body}
	}()
	return ch
}

func replyOf(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second): // a hang guard
		t.Fatal("the long-poll did not answer")
		return reply{}
	}
}

func TestLongPollPastTheCapIs429(t *testing.T) {
	e, r, svc := envWithLimits(t, ledger.Limits{MaxWaiters: 2, MaxWaitersPerKey: 1})
	g := e.claimOK(t, "k", "o")
	v := g.Intent.Version
	waitK := fmt.Sprintf("%s?wait=30s&after_version=%d", keyPath("k"), v)

	reads := r.Count()
	first := getAsync(t, e.srv.URL, waitK)
	r.Await(t, reads+1)

	// The key's only slot is taken.
	rep := e.do(t, http.MethodGet, waitK, nil)
	p := problemOf(t, rep, http.StatusTooManyRequests, CodeTooManyWaiters)
	if rep.header.Get("Retry-After") != "1" || p.RetryAfterMS != 1000 {
		t.Errorf("Retry-After = %q, retry_after_ms = %d, want 1 s", rep.header.Get("Retry-After"), p.RetryAfterMS)
	}
	// A poll whose answer is already there is answered, cap or not.
	if in := intentAnswer(t, e.do(t, http.MethodGet, keyPath("k")+"?wait=30s", nil)); in.Version != v {
		t.Errorf("answered poll = %+v", in)
	}

	// The node's last slot, then nothing on any key.
	reads = r.Count()
	absent := getAsync(t, e.srv.URL, keyPath("absent")+"?wait=30s")
	r.Await(t, reads+1)
	problemOf(t, e.do(t, http.MethodGet, keyPath("other")+"?wait=30s", nil), http.StatusTooManyRequests, CodeTooManyWaiters)

	// A change answers the first poll and frees its slot.
	answer(t, e.do(t, http.MethodPost, keyPath("k", "complete"), map[string]any{
		"owner": "o", "fencing_token": g.FencingToken, "outcome": "executed"}), http.StatusOK)
	if in := intentAnswer(t, replyOf(t, first)); in.State != "executed" {
		t.Errorf("woke with %+v", in)
	}
	if svc.Waiting() != 1 {
		t.Fatalf("Waiting() = %d after the first poll answered, want 1", svc.Waiting())
	}
	reads = r.Count()
	again := getAsync(t, e.srv.URL, keyPath("k")+"?wait=30s&after_version=999999")
	r.Await(t, reads+1)

	// Close answers every poll at once with what it has.
	svc.Close()
	problemOf(t, replyOf(t, absent), http.StatusNotFound, string(fsm.StatusNotFound))
	if in := intentAnswer(t, replyOf(t, again)); in.State != "executed" {
		t.Errorf("closed poll answered %+v", in)
	}
	if svc.Waiting() != 0 {
		t.Fatalf("Waiting() = %d after Close", svc.Waiting())
	}
}

// A follower forwards a linearizable long-poll to the leader, even when its
// own registry is full, and the leader's registry wakes it; a stale
// long-poll waits on the follower's own registry.
func TestLongPollsOnAFollowerUseTheRightRegistry(t *testing.T) {
	leader, lr, lsvc := envWithLimits(t, ledger.Limits{})
	fmem := ledgertest.NewMemory(epoch)
	fr := &signalledFollower{followerReplicator: &followerReplicator{local: fmem}}
	fr.setLeader("n1", leader.hostPort())
	fsvc := ledgertest.NewService(t, fr, ledger.Config{Limits: ledger.Limits{MaxWaiters: 1}})
	follower := newEnvOver(t, fmem, fr, withNodeID("n2"), func(c *Config) { c.Service = fsvc })
	t.Cleanup(fsvc.Close)

	g := leader.claimOK(t, "k", "o")

	// The stale poll takes the follower's only slot.
	reads := fr.Count()
	stale := getAsync(t, follower.srv.URL, keyPath("s")+"?wait=30s&consistency=stale")
	fr.Await(t, reads+1)
	if fsvc.Waiting() != 1 {
		t.Fatalf("follower Waiting() = %d, want 1", fsvc.Waiting())
	}

	// The linearizable one is forwarded and waits on the leader.
	reads = lr.Count()
	forwarded := getAsync(t, follower.srv.URL, fmt.Sprintf("%s?wait=30s&after_version=%d", keyPath("k"), g.Intent.Version))
	lr.Await(t, reads+1)
	if by := <-leader.forwardedBy; by != "n2" {
		t.Fatalf("the leader saw the poll forwarded by %q", by)
	}
	answer(t, leader.do(t, http.MethodPost, keyPath("k", "complete"), map[string]any{
		"owner": "o", "fencing_token": g.FencingToken, "outcome": "executed"}), http.StatusOK)
	if in := intentAnswer(t, replyOf(t, forwarded)); in.State != "executed" {
		t.Errorf("forwarded poll woke with %+v", in)
	}

	// The follower's replica gets "s": the stale poll answers from it.
	fmem.Seed(&fsm.Claim{Namespace: namespace.Default, Key: "s", Tool: "t", Owner: "o", Payload: []byte(`{}`),
		Fingerprint: fingerprintHex(t, "t", `{}`), LeaseMS: 30_000})
	if in := intentAnswer(t, replyOf(t, stale)); in.Key != "s" {
		t.Errorf("stale poll answered %+v", in)
	}
	if fsvc.Waiting() != 0 || lsvc.Waiting() != 0 {
		t.Fatalf("left waiting: follower %d, leader %d", fsvc.Waiting(), lsvc.Waiting())
	}
}

func fingerprintHex(t *testing.T, tool, payload string) string {
	t.Helper()
	_, fp, err := fsm.Fingerprint(tool, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// BenchmarkIdleLongPolls measures what one idle long-poll costs the node
// over HTTP: its connection, request, goroutines and registration. The
// clients are bare TCP connections, cheap next to what the server holds.
func BenchmarkIdleLongPolls(b *testing.B) {
	const n = 4096
	for range b.N {
		mem := ledgertest.NewMemory(epoch)
		svc := ledgertest.NewService(b, mem, ledger.Config{})
		e := newEnvOver(b, mem, mem, func(c *Config) { c.Service = svc })
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		conns := make([]net.Conn, 0, n)
		for i := range n {
			conn, err := net.Dial("tcp", e.hostPort())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := fmt.Fprintf(conn, "GET %s?wait=60s HTTP/1.1\r\nHost: node\r\n\r\n", keyPath(fmt.Sprintf("key-%d", i%1024))); err != nil {
				b.Fatal(err)
			}
			conns = append(conns, conn)
		}
		for svc.Waiting() < n {
			runtime.Gosched()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64((after.HeapAlloc+after.StackInuse)-(before.HeapAlloc+before.StackInuse))/n, "B/poll")
		svc.Close()
		for _, conn := range conns {
			_, _ = io.Copy(io.Discard, io.LimitReader(conn, 1)) // the answer has started
			_ = conn.Close()
		}
	}
}

func TestWaitTimesOutWithTheIntentAsItIs(t *testing.T) {
	e := newEnv(t)
	g := e.claimOK(t, "k", "o")
	start := time.Now()
	in := intentAnswer(t, e.do(t, http.MethodGet, fmt.Sprintf("%s?wait=200ms&after_version=%d", keyPath("k"), g.Intent.Version), nil))
	if in.Version != g.Intent.Version || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("wait answered %+v after %v", in, time.Since(start))
	}
	problemOf(t, e.do(t, http.MethodGet, keyPath("absent")+"?wait=50ms", nil), http.StatusNotFound, string(fsm.StatusNotFound))
	for _, bad := range []string{"?wait=forever", "?wait=2m", "?wait=-1s", "?wait=1s&after_version=x"} {
		problemOf(t, e.do(t, http.MethodGet, keyPath("k")+bad, nil), http.StatusBadRequest, CodeBadRequest)
	}
	// A change wakes every waiter: the change comes once all three wait.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := intentAnswer(t, e.do(t, http.MethodGet, fmt.Sprintf("%s?wait=30s&after_version=%d", keyPath("k"), g.Intent.Version), nil))
			if in.State != "executed" {
				t.Errorf("woke with %s", in.State)
			}
		}()
	}
	ledgertest.AwaitWaiting(t, e.api.svc, 3)
	answer(t, e.do(t, http.MethodPost, keyPath("k", "complete"), map[string]any{"owner": "o", "fencing_token": g.FencingToken, "outcome": "executed"}), http.StatusOK)
	wg.Wait()
}
