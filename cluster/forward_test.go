package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// TestFollowersForwardProposals: a follower's proposal is applied by the
// leader and answered with the leader's Result, the same intent the
// follower's replica holds once it applied that index; many proposals
// forwarded at once share the connection and each gets its own answer.
func TestFollowersForwardProposals(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)
	var followers []*Node
	for _, n := range tc.nodes {
		if n != leader {
			tc.knowsLeader(n, leader)
			followers = append(followers, n)
		}
	}
	first, err := followers[0].Propose(ctx, claim("fwd-1", "o1"))
	if err != nil {
		t.Fatalf("propose on a follower: %v", err)
	}
	if first.Status != fsm.StatusGranted || !first.Created || first.Intent.FencingToken != first.Index {
		t.Fatalf("forwarded claim = %+v", first)
	}
	// The same claim through the other follower: the grant again.
	again, err := followers[1].Propose(ctx, claim("fwd-1", "o1"))
	if err != nil {
		t.Fatalf("repeat on the other follower: %v", err)
	}
	if again.Status != fsm.StatusGranted || again.Created || again.Intent.FencingToken != first.Index {
		t.Fatalf("repeated claim = %+v", again)
	}
	for _, f := range followers {
		if err := f.WaitApplied(ctx, again.Index); err != nil {
			t.Fatalf("%s: WaitApplied: %v", f.ID(), err)
		}
		var in *fsm.Intent
		_ = f.Read(ctx, ledger.Stale, func(l *fsm.Machine) { in = l.Get("default", "fwd-1") })
		if !reflect.DeepEqual(in, again.Intent) {
			t.Fatalf("%s holds\n%+v\nthe leader answered\n%+v", f.ID(), in, again.Intent)
		}
	}

	const concurrent = 100
	results := make([]*fsm.Result, concurrent)
	errs := make([]error, concurrent)
	var wg sync.WaitGroup
	for i := range concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = followers[0].Propose(ctx, claim(fmt.Sprintf("fwd-c%d", i), "o1"))
		}()
	}
	wg.Wait()
	fences := map[uint64]bool{}
	for i := range concurrent {
		if errs[i] != nil {
			t.Fatalf("concurrent forward %d: %v", i, errs[i])
		}
		r := results[i]
		if r.Status != fsm.StatusGranted || r.Intent.Key != fmt.Sprintf("fwd-c%d", i) || fences[r.Index] {
			t.Fatalf("concurrent forward %d answered %+v", i, r)
		}
		fences[r.Index] = true
	}
	if got := followers[0].Stats().Forwarded; got < concurrent+1 {
		t.Fatalf("follower forwarded %d commands, want at least %d", got, concurrent+1)
	}
	if got := leader.Stats().ForwardsServed; got < concurrent+2 {
		t.Fatalf("leader served %d forwarded commands, want at least %d", got, concurrent+2)
	}
}

// TestForwardingDefiniteFailuresWereNotApplied: while a follower forwards
// claims, the leader is killed. Every claim answered granted is in the
// new leader's ledger, and every claim answered with a definite failure
// is not: only an unknown outcome may have gone either way.
func TestForwardingDefiniteFailuresWereNotApplied(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	leader := tc.leader()
	via := tc.follower(leader)
	ctx := ctxT(t)

	type outcome struct {
		key string
		err error
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		granted  int
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	// A failed wait below must not leave the workers running: each one
	// records every outcome, and with the test gone they would fill the
	// memory (a CI run was OOM-killed so).
	t.Cleanup(halt)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("kill-%d-%d", w, i)
				r, err := via.Propose(ctx, claim(key, "o1"))
				if err == nil && r.Status != fsm.StatusGranted {
					err = fmt.Errorf("status %s", r.Status)
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{key, err})
				if err == nil {
					granted++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond) // a client's backoff
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return granted }
	waitFor(t, 30*time.Second, "forwarded grants before the kill", func() bool { return count() >= 50 })
	if err := leader.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	before := count()
	waitFor(t, 60*time.Second, "forwarded grants after the kill", func() bool { return count() >= before+50 })
	halt()

	now := tc.leader()
	var unknown, definite int
	for _, o := range outcomes {
		var in *fsm.Intent
		if err := now.Read(ctx, ledger.Linearizable, func(l *fsm.Machine) { in = l.Get("default", o.key) }); err != nil {
			t.Fatalf("read %s: %v", o.key, err)
		}
		switch {
		case o.err == nil:
			if in == nil {
				t.Fatalf("%s was granted and is not in the ledger", o.key)
			}
		case errors.Is(o.err, ledger.ErrOutcomeUnknown):
			unknown++
		default:
			definite++
			if in != nil {
				t.Fatalf("%s failed definitely (%v) but was applied", o.key, o.err)
			}
		}
	}
	t.Logf("%d outcomes: %d granted, %d unknown, %d definite failures", len(outcomes), count(), unknown, definite)
}

// TestForwardingOverTLSIsForNodesOnly: over mutual TLS a follower forwards
// as usual, and a peer that is not a server of the configuration (a
// client certificate of the node CA, plaintext) gets no greeting when it
// opens a forwarding connection on the leader's Raft port.
func TestForwardingOverTLSIsForNodesOnly(t *testing.T) {
	pki := devPKI(t)
	tc := tlsCluster(t, pki)
	tc.startN(3)
	leader := tc.leader()
	ctx := ctxT(t)
	r, err := tc.follower(leader).Propose(ctx, claim("tls-fwd", "o1"))
	if err != nil || r.Status != fsm.StatusGranted {
		t.Fatalf("forwarded claim over TLS: %+v, %v", r, err)
	}
	for _, tt := range []struct {
		name string
		tls  *tls.Config
	}{
		{"plaintext", nil},
		{"client certificate of the node CA", pki.clientTLS(t)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var conn net.Conn
			var err error
			d := &net.Dialer{Timeout: 5 * time.Second}
			if tt.tls == nil {
				conn, err = d.Dial("tcp", leader.RaftAddr())
			} else {
				conf := tt.tls.Clone()
				conf.InsecureSkipVerify = true
				conn, err = tls.DialWithDialer(d, "tcp", leader.RaftAddr(), conf)
			}
			if err != nil {
				return // refused at the handshake: nothing to forward over
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(2 * time.Second)) // a hang guard
			if _, err := conn.Write([]byte{forwardMagic, forwardVersion}); err != nil {
				return
			}
			var back [2]byte
			if _, err := io.ReadFull(conn, back[:]); err == nil {
				t.Fatalf("a stranger got the greeting %x", back)
			}
		})
	}
}

// fakeLeader accepts one forwarding connection, greets it (unless
// silent) and answers each command with answer(id, entry); nil closes
// the connection.
func fakeLeader(t *testing.T, silent bool, answer func(id uint64, entry []byte) []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		var hello [2]byte
		if _, err := io.ReadFull(conn, hello[:]); err != nil || silent {
			return
		}
		if _, err := conn.Write(hello[:]); err != nil {
			return
		}
		br := bufio.NewReader(conn)
		for {
			body, err := readFrame(br, nil)
			if err != nil {
				return
			}
			id, k := binary.Uvarint(body)
			a := answer(id, body[k:])
			if a == nil {
				return
			}
			if _, err := conn.Write(a); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}

// TestForwardAnswers: what a follower makes of each answer, or silence,
// from the node it forwarded to. Only an answer that says the command was
// not appended, or a connection that failed before the command was sent,
// is definite.
func TestForwardAnswers(t *testing.T) {
	granted := &fsm.Result{Status: fsm.StatusGranted, Index: 9, Created: true, Intent: &fsm.Intent{Namespace: "default",
		Key: "k", Tool: "t", Fingerprint: "f", State: fsm.StateDeclared, Owner: "o", FencingToken: 9, Version: 9}}
	ok, err := fsm.AppendResult(nil, granted)
	if err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	with := func(code byte, body []byte) func(uint64, []byte) []byte {
		return func(id uint64, _ []byte) []byte { return appendAnswer(nil, id, code, body) }
	}
	tests := []struct {
		name    string
		silent  bool
		answer  func(uint64, []byte) []byte
		want    error // nil: the result
		notSent bool  // definite: not forwarded
	}{
		{"result", false, with(fwdOK, ok), nil, false},
		{"not the leader", false, with(fwdNotLeader, []byte("stepped down")), errNotForwarded, true},
		{"no leader", false, with(fwdNoLeader, []byte("enqueue timeout")), ledger.ErrNoLeader, false},
		{"unknown", false, with(fwdUnknown, []byte("leadership lost")), ledger.ErrOutcomeUnknown, false},
		{"result that does not decode", false, with(fwdOK, []byte{0xff}), ledger.ErrOutcomeUnknown, false},
		{"connection closed with the command sent", false, func(uint64, []byte) []byte { return nil }, ledger.ErrOutcomeUnknown, false},
		{"no answer in time", false, func(uint64, []byte) []byte { <-hang; return nil }, ledger.ErrOutcomeUnknown, false},
		{"no greeting", true, nil, errNotForwarded, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := fakeLeader(t, tt.silent, tt.answer)
			f := &forwarder{n: &Node{stream: &streamLayer{}}, timeout: 200 * time.Millisecond}
			t.Cleanup(f.close)
			entry, err := fsm.Encode(0, claim("k", "o"))
			if err != nil {
				t.Fatal(err)
			}
			r, err := f.call(context.Background(), addr, "leader", entry)
			switch {
			case tt.want == nil:
				if err != nil || !reflect.DeepEqual(r, granted) {
					t.Fatalf("got %+v, %v; want %+v", r, err, granted)
				}
			case !errors.Is(err, tt.want):
				t.Fatalf("got %+v, %v; want %v", r, err, tt.want)
			}
			if errors.Is(err, errNotForwarded) != tt.notSent {
				t.Fatalf("not forwarded: %t, want %t (%v)", errors.Is(err, errNotForwarded), tt.notSent, err)
			}
			if errors.Is(err, ledger.ErrOutcomeUnknown) && errors.Is(err, errNotForwarded) {
				t.Fatalf("an error both unknown and definite: %v", err)
			}
		})
	}
}

// A node still starting (raft restoring its snapshot, n.raft not set yet)
// refuses forwarded commands by closing the connection, before anything
// was written: the follower retries. It once dereferenced the nil raft
// and crashed on every restart (found by the short fault profile).
func TestForwardRefusedWhileRaftStarts(t *testing.T) {
	n := &Node{}
	client, server := net.Pipe()
	defer client.Close()
	n.acceptForward(server)
	if _, err := client.Read(make([]byte, 1)); err == nil {
		t.Fatal("a node whose raft has not started served a forwarded connection")
	}
	n.fwdServer.wg.Wait()
}
