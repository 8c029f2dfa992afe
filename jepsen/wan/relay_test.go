package wan

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every test here runs real TCP and UDP on loopback: the relay stands in
// front of node 2, and every connection comes from node 1 (Source says
// so), unless a test says otherwise. Delays are asserted from below only:
// a loaded machine adds delay, it never removes any.

// asymmetric is a two-node matrix with one-way delays 1→2 and 2→1.
func asymmetric(up, down time.Duration, jitter float64) Matrix {
	m := NewMatrix(OnePerNode(2), RTT{}, jitter)
	m = m.Change([]int{1}, []int{2}, func(time.Duration) time.Duration { return up })
	return m.Change([]int{2}, []int{1}, func(time.Duration) time.Duration { return down })
}

// stamped is a line a backend received and when.
type stamped struct {
	line string
	at   time.Time
}

// echoBackend answers every line with the same line and records when each
// arrived; it reports each connection's end (nil for an orderly EOF).
type echoBackend struct {
	ln    net.Listener
	lines chan stamped
	ends  chan error
	conns chan net.Conn
}

func newEchoBackend(t *testing.T) *echoBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &echoBackend{ln: ln, lines: make(chan stamped, 1000), ends: make(chan error, 10), conns: make(chan net.Conn, 10)}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.conns <- c
			go func() {
				rd := bufio.NewReader(c)
				for {
					line, err := rd.ReadString('\n')
					if err != nil {
						if errors.Is(err, io.EOF) {
							err = nil
						}
						b.ends <- err
						return
					}
					b.lines <- stamped{strings.TrimSpace(line), time.Now()}
					if line == "bye\n" {
						// Answer, then close our side too.
						_, _ = c.Write([]byte("bye\n"))
						_ = c.(*net.TCPConn).CloseWrite()
						continue
					}
					if _, err := c.Write([]byte(line)); err != nil {
						b.ends <- err
						return
					}
				}
			}()
		}
	}()
	return b
}

func startRelay(t *testing.T, backend string, sh *Shaper, source int) (*Relay, string) {
	t.Helper()
	r, err := NewRelay(RelayConfig{To: 2, Backend: backend, Shaper: sh, Source: func(net.Addr) int { return source }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.ServeTCP(ln)
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r, ln.Addr().String()
}

func recv[T any](t *testing.T, ch chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		var zero T
		return zero
	}
}

// roundTrip sends a line and returns when it was sent, when the backend
// got it and when its echo came back.
func roundTrip(t *testing.T, c net.Conn, rd *bufio.Reader, b *echoBackend, line string) (sent, arrived, back time.Time) {
	t.Helper()
	sent = time.Now()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	got := recv(t, b.lines, "line at the backend")
	if got.line != line {
		t.Fatalf("backend got %q, want %q", got.line, line)
	}
	echo, err := rd.ReadString('\n')
	if err != nil || strings.TrimSpace(echo) != line {
		t.Fatalf("echo %q, %v", echo, err)
	}
	return sent, got.at, time.Now()
}

func atLeast(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if got < want {
		t.Errorf("%s took %v, want at least %v", what, got, want)
	}
}

// Each direction of a connection gets its own link's delay, and the first
// bytes also wait for the handshake's round trip.
func TestRelayDelaysEachDirection(t *testing.T) {
	const up, down = 60 * time.Millisecond, 25 * time.Millisecond
	b := newEchoBackend(t)
	r, addr := startRelay(t, b.ln.Addr().String(), NewShaper(asymmetric(up, down, 0), 1), 1)
	dialed := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	_, arrived, back := roundTrip(t, c, rd, b, "first")
	atLeast(t, "the first line from the dial (handshake + 1→2)", arrived.Sub(dialed), up+down+up)
	atLeast(t, "its echo (2→1)", back.Sub(arrived), down)
	for i := range 3 {
		var sent time.Time
		sent, arrived, back = roundTrip(t, c, rd, b, "line"+strconv.Itoa(i))
		atLeast(t, "a line 1→2", arrived.Sub(sent), up)
		atLeast(t, "an echo 2→1", back.Sub(arrived), down)
	}
	st := r.Stats()
	if st[Link{1, 2}].Conns != 1 || st[Link{1, 2}].Bytes == 0 || st[Link{2, 1}].Bytes == 0 {
		t.Errorf("stats %+v", st)
	}
}

// Jitter varies each delay within d·(1±j), never below the bound, and a
// later piece never overtakes an earlier one.
func TestRelayJitterBoundsAndOrder(t *testing.T) {
	const d, j = 40 * time.Millisecond, 0.5
	sh := NewShaper(asymmetric(d, d, j), 7)
	lo, hi := time.Duration(float64(d)*(1-j)), time.Duration(float64(d)*(1+j))
	seen := map[bool]bool{}
	for range 2000 {
		x := sh.Delay(1, 2)
		if x < lo || x > hi {
			t.Fatalf("Delay = %v, outside [%v, %v]", x, lo, hi)
		}
		seen[x < d] = true
	}
	if !seen[true] || !seen[false] {
		t.Errorf("2000 draws all fell on one side of %v", d)
	}
	if got := sh.Delay(0, 2); got != 0 {
		t.Errorf("the outside's delay = %v, want 0", got)
	}

	b := newEchoBackend(t)
	_, addr := startRelay(t, b.ln.Addr().String(), sh, 1)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	roundTrip(t, c, rd, b, "warm") // past the handshake
	const n = 100
	sent := make([]time.Time, n)
	for i := range n {
		sent[i] = time.Now()
		if _, err := c.Write([]byte(strconv.Itoa(i) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		got := recv(t, b.lines, "line")
		if got.line != strconv.Itoa(i) {
			t.Fatalf("line %d arrived as %q: reordered", i, got.line)
		}
		atLeast(t, "line "+got.line, got.at.Sub(sent[i]), lo)
	}
}

// A new matrix applies to connections already open, from the next piece
// on.
func TestRelayMatrixChangesMidStream(t *testing.T) {
	const before, after = 10 * time.Millisecond, 120 * time.Millisecond
	sh := NewShaper(asymmetric(before, before, 0), 1)
	b := newEchoBackend(t)
	_, addr := startRelay(t, b.ln.Addr().String(), sh, 1)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	roundTrip(t, c, rd, b, "warm")
	sh.Set(asymmetric(after, before, 0))
	sent, arrived, _ := roundTrip(t, c, rd, b, "slow")
	atLeast(t, "a line after the change", arrived.Sub(sent), after)
	// Back to fast: the connection still delivers in order.
	sh.Set(asymmetric(before, before, 0))
	for _, l := range []string{"a", "b", "c"} {
		sent, arrived, _ = roundTrip(t, c, rd, b, l)
		atLeast(t, "a line after the change back", arrived.Sub(sent), before)
	}
}

// A half-close crosses the relay after the data before it and its delay;
// the backend's answer and its own close come back; a backend's reset
// resets the client.
func TestRelayPropagatesCloses(t *testing.T) {
	const d = 30 * time.Millisecond
	b := newEchoBackend(t)
	_, addr := startRelay(t, b.ln.Addr().String(), NewShaper(asymmetric(d, d, 0), 1), 1)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	roundTrip(t, c, rd, b, "hello")
	// "bye" makes the backend answer and close its side.
	if _, err := c.Write([]byte("bye\n")); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, b.lines, "bye"); got.line != "bye" {
		t.Fatalf("got %q", got.line)
	}
	if l, err := rd.ReadString('\n'); l != "bye\n" || err != nil {
		t.Fatalf("answer %q, %v", l, err)
	}
	if _, err := rd.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Fatalf("after the backend's close: %v, want EOF", err)
	}
	closed := time.Now()
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, b.ends, "the backend's end"); err != nil {
		t.Fatalf("backend saw %v, want an orderly EOF", err)
	}
	atLeast(t, "the half-close 1→2", time.Since(closed), d)

	// A backend that resets: the client sees its connection end.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	recv(t, b.lines, "x")
	recv(t, b.conns, "the backend's first connection")
	server := recv(t, b.conns, "the backend's second connection")
	if err := c2.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// The echo crosses the relay's delay: read it before the reset, which
	// would otherwise overtake it (a reset discards what is in flight).
	rd2 := bufio.NewReader(c2)
	if l, err := rd2.ReadString('\n'); l != "x\n" || err != nil {
		t.Fatalf("echo before the reset: %q, %v", l, err)
	}
	_ = server.(*net.TCPConn).SetLinger(0)
	_ = server.Close()
	if _, err := rd2.ReadString('\n'); err == nil || isTimeout(err) {
		t.Fatalf("after the backend's reset: %v, want the connection ended", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A backend that is not listening: the client's connection is reset, as a
// refused one would be.
func TestRelayResetsWhenTheBackendIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	_ = ln.Close()
	_, addr := startRelay(t, down, NewShaper(asymmetric(0, 0, 0), 1), 1)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return // reset before the dial returned
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read: %v, want the connection ended", err)
	}
}

// Close resets relayed connections, also with data held, and returns.
func TestRelayCloseResetsConnections(t *testing.T) {
	b := newEchoBackend(t)
	r, err := NewRelay(RelayConfig{To: 2, Backend: b.ln.Addr().String(), Shaper: NewShaper(asymmetric(time.Hour, 0, 0), 1),
		Source: func(net.Addr) int { return 1 }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.ServeTCP(ln)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("held for an hour\n")); err != nil {
		t.Fatal(err)
	}
	recv(t, b.conns, "the relay's connection to the backend")
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	if err := recv(t, closed, "Close"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read after Close: %v, want the connection ended", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the relay still accepts after Close")
	}
}

// Datagrams are delayed by their link, sent on from the relay's socket;
// the backend's own datagrams are not relayed back to it.
func TestRelayDelaysDatagrams(t *testing.T) {
	const d = 50 * time.Millisecond
	backend, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	// Node 3 (the backend's own address) has no delay to node 2: were its
	// datagram relayed, it would arrive well before the client's.
	m := NewMatrix(OnePerNode(3), RTT{}, 0).Change([]int{1}, []int{2}, func(time.Duration) time.Duration { return d })
	source := func(a net.Addr) int {
		if a.String() == backend.LocalAddr().String() {
			return 3
		}
		return 1
	}
	r, err := NewRelay(RelayConfig{To: 2, Backend: backend.LocalAddr().String(), Shaper: NewShaper(m, 1), Source: source})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.ServeUDP(pc); err != nil {
		t.Fatal(err)
	}
	client, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	got := make(chan stamped, 10)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := backend.ReadFrom(buf)
			if err != nil {
				return
			}
			got <- stamped{string(buf[:n]) + " from " + from.String(), time.Now()}
		}
	}()
	if _, err := backend.WriteTo([]byte("loop"), pc.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if _, err := client.WriteTo([]byte("ping"), pc.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	g := recv(t, got, "the datagram")
	if want := "ping from " + pc.LocalAddr().String(); g.line != want {
		t.Fatalf("backend got %q first, want %q", g.line, want)
	}
	atLeast(t, "a datagram 1→2", g.at.Sub(sent), d)
	waitFor(t, func() bool { return r.Stats()[Link{1, 2}].Datagrams == 1 })
	if st := r.Stats(); st[Link{3, 2}].Datagrams != 0 {
		t.Errorf("the backend's own datagram was relayed: %+v", st)
	}
}

// waitFor polls cond until it holds (bounded).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not met within 10s")
		case <-time.After(5 * time.Millisecond):
		}
	}
}
