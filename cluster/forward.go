package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/internal/faults"
	"github.com/intentledger/intentd/replication"
)

// Forwarding: a follower proposes through the leader (see DESIGN.md,
// "Followers forward encoded commands").
//
// The node that receives a request does its work (decoding, validation,
// the fingerprint, the command's encoding, the answer and the execution
// token's signature); a follower sends only the encoded command to the
// leader, which stamps it with its time, appends it and answers with the
// state machine's Result. The commands travel over one persistent
// connection per leader on the Raft port, pipelined: a follower writes
// every queued command in one write and the leader every ready answer in
// one write, and answers carry the id of their command.
//
// A connection opens with forwardMagic and forwardVersion, which the leader
// echoes once it accepted the connection (over TLS: a node certificate of a
// server of its configuration, as for Raft). Then frames both ways, each a
// uvarint length and a body:
//
//	command: id (uvarint), the entry as fsm.Encode writes it (time 0)
//	answer:  id (uvarint), a code byte, then the fsm.AppendResult
//	         encoding (fwdOK) or a message
const (
	// forwardMagic is the first byte of a forwarding connection; Raft's
	// own connections start with an RPC type (0 to 4).
	forwardMagic byte = 0xF1
	// forwardVersion is the protocol's version, echoed by the leader.
	forwardVersion byte = 1
	// forwardVersionTraced is version 1 with a trace block (tracing.go)
	// between a command's id and its entry; a node with a TracerProvider
	// speaks it, and every leader accepts both.
	forwardVersionTraced byte = 2
	// maxForwardFrame bounds a frame either way.
	maxForwardFrame = 16 << 20
	// forwardDialTimeout bounds dialling the leader and its greeting.
	forwardDialTimeout = 2 * time.Second
	// DefaultForwardTimeout bounds one forwarded command, from its queueing
	// to the leader's answer, when Config.ForwardTimeout is not set.
	DefaultForwardTimeout = 10 * time.Second
)

// A version 2 command frame: id (uvarint), traceparent and tracestate
// (each a uvarint length and its text, empty when the command has no
// trace), then the entry.

// Answer codes.
const (
	fwdOK        byte = iota // the Result follows
	fwdNotLeader             // the node does not lead: not appended
	fwdNoLeader              // not appended (enqueue timeout, transfer, shutting down)
	fwdUnknown               // may have been appended: the outcome is unknown
	fwdRefused               // the entry does not decode: not appended
)

// errNotForwarded is a command that certainly did not reach the log: the
// connection failed before it was written, or the node dialled no longer
// leads. Propose tries the leader it knows once more.
var errNotForwarded = errors.New("cluster: the command was not forwarded")

// stamp returns the time a proposal is stamped with: the leader's clock,
// never earlier than its previous stamp.
func (n *Node) stamp() int64 {
	now := n.cfg.Clock().UnixNano()
	for {
		last := n.lastStamp.Load()
		if now <= last {
			return last
		}
		if n.lastStamp.CompareAndSwap(last, now) {
			return now
		}
	}
}

// proposeVia sends cmd to the leader and returns its state machine's
// answer. Errors are definite or unknown as Propose's are: a command that
// may have been written to the connection and got no answer is unknown.
func (n *Node) proposeVia(ctx context.Context, cmd fsm.Command) (r *fsm.Result, err error) {
	entry, err := fsm.Encode(0, cmd) // the leader stamps it
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ctx, span := n.startSpan(ctx, SpanForward, trace.SpanKindClient, attribute.String("intentd.node", n.cfg.ID), commandAttr(cmd.Type()))
	defer func() { endSpan(span, err) }()
	for attempt := 0; ; attempt++ {
		addr, id := n.raft.LeaderWithID()
		if id == "" || string(id) == n.cfg.ID {
			// No leader, or this node is becoming it (raft's state lags).
			return nil, replication.ErrNoLeader
		}
		if span.IsRecording() {
			span.SetAttributes(attribute.String("intentd.leader", string(id)))
		}
		r, err = n.fwd.call(ctx, string(addr), string(id), entry)
		if errors.Is(err, errNotForwarded) {
			if attempt == 0 {
				continue
			}
			return nil, fmt.Errorf("%w: %w", replication.ErrNoLeader, err)
		}
		return r, err
	}
}

// forwarder holds this node's connection to the leader.
type forwarder struct {
	n       *Node
	timeout time.Duration
	// version is the protocol this node speaks: forwardVersionTraced when
	// it traces, else forwardVersion.
	version byte

	mu     sync.Mutex
	conn   *fwdConn // to the leader last used; nil before the first
	closed bool

	sent atomic.Uint64 // commands forwarded
}

// call forwards entry to the leader id at addr and waits for its answer.
func (f *forwarder) call(ctx context.Context, addr, id string, entry []byte) (*fsm.Result, error) {
	c, err := f.connTo(ctx, addr, id)
	if err != nil {
		return nil, err
	}
	f.sent.Add(1)
	if c.version == forwardVersionTraced {
		entry = append(appendTraceBlock(make([]byte, 0, 128+len(entry)), ctx), entry...)
	}
	return c.call(ctx, entry, f.timeout)
}

// connTo returns the connection to the leader id at addr, dialling it if
// there is none or the last one failed. A connection to a node that no
// longer leads is closed: what it has in flight is unknown.
func (f *forwarder) connTo(ctx context.Context, addr, id string) (*fwdConn, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, replication.ErrShuttingDown
	}
	c := f.conn
	if c == nil || c.addr != addr || c.id != id || c.failed() {
		old := c
		c = &fwdConn{addr: addr, id: id, version: f.version, ready: make(chan struct{}), dead: make(chan struct{}),
			pending: map[uint64]*fwdCall{}, wake: make(chan struct{}, 1),
			lostIsFailure: f.n.cfg.Faults.Has(faults.LeadershipLostIsFailure)}
		f.conn = c
		f.mu.Unlock()
		if old != nil {
			old.fail(errors.New("the leader changed"))
		}
		go c.dial(f.n)
	} else {
		f.mu.Unlock()
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for the connection to the leader: %w", replication.ErrNoLeader, ctx.Err())
	}
	if c.dialErr != nil {
		return nil, fmt.Errorf("%w: %w", errNotForwarded, c.dialErr)
	}
	return c, nil
}

// leaderIs closes the connection unless it is to id, the node this one
// now knows as the leader ("" for none): the commands it has in flight
// are unknown, and saying so at once lets their clients retry rather than
// wait out ForwardTimeout for answers a deposed leader may never send.
func (f *forwarder) leaderIs(id string) {
	f.mu.Lock()
	c := f.conn
	if c != nil && c.id != id {
		f.conn = nil
	} else {
		c = nil
	}
	f.mu.Unlock()
	if c != nil {
		c.fail(errors.New("the leader changed"))
	}
}

// followLeader tells the forwarder of every change of leader raft
// observes, until the node stops.
func (n *Node) followLeader() {
	defer n.wg.Done()
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		select {
		case o := <-ch:
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				n.fwd.leaderIs(string(lo.LeaderID))
			}
		case <-n.ctx.Done():
			return
		}
	}
}

// close fails the connection: its commands in flight are unknown.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	c := f.conn
	f.mu.Unlock()
	if c != nil {
		c.fail(replication.ErrShuttingDown)
	}
}

// fwdConn is one connection to the leader.
type fwdConn struct {
	addr, id string
	version  byte          // the protocol it speaks (forwarder.version)
	ready    chan struct{} // closed once dialled (or failed to)
	dialErr  error         // set before ready is closed
	conn     net.Conn
	dead     chan struct{} // closed by fail

	mu      sync.Mutex
	err     error // why it failed; nil while it works
	nextID  uint64
	pending map[uint64]*fwdCall // sent or queued, not answered
	queue   []*fwdCall          // not yet written
	wake    chan struct{}       // the writer has work

	// lostIsFailure is the seeded bug faults.LeadershipLostIsFailure on
	// the forwarding path: a command sent to a leader whose connection
	// then failed (it lost leadership, or another node leads now) is
	// reported as a definite failure. Never set in the product build.
	lostIsFailure bool
}

// fwdCall is one forwarded command.
type fwdCall struct {
	id      uint64
	entry   []byte
	written bool // handed to the connection: it may reach the leader
	done    chan fwdAnswer
}

// fwdAnswer is the leader's answer, or the connection's failure.
type fwdAnswer struct {
	code byte
	body []byte
	err  error // the connection failed
	sent bool  // with err: the command had been written
}

// dial connects to the leader and exchanges the greeting, then starts the
// reader and the writer.
func (c *fwdConn) dial(n *Node) {
	defer close(c.ready)
	conn, err := n.stream.dialNode(c.addr, c.id, forwardDialTimeout)
	if err != nil {
		c.dialErr = err
		c.fail(err)
		return
	}
	_ = conn.SetDeadline(time.Now().Add(forwardDialTimeout))
	hello := [2]byte{forwardMagic, c.version}
	if _, err = conn.Write(hello[:]); err == nil {
		var back [2]byte
		if _, err = io.ReadFull(conn, back[:]); err == nil && back != hello {
			err = fmt.Errorf("unexpected greeting %x", back)
		}
	}
	if err != nil {
		_ = conn.Close()
		c.dialErr = fmt.Errorf("forwarding to %s at %s: %w", c.id, c.addr, err)
		c.fail(c.dialErr)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	c.mu.Lock()
	if c.err != nil { // failed while dialling (the node is stopping)
		c.mu.Unlock()
		_ = conn.Close()
		return
	}
	c.conn = conn
	c.mu.Unlock()
	go c.write()
	go c.read()
}

// failed reports whether the connection failed.
func (c *fwdConn) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// fail closes the connection once: its written commands are answered
// unknown, the others not forwarded.
func (c *fwdConn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.dead)
	for id, call := range c.pending {
		call.done <- fwdAnswer{sent: call.written, err: err}
		delete(c.pending, id)
	}
	c.queue = nil
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// call queues entry, wakes the writer and waits for the answer, at most
// timeout (0: no bound beyond ctx).
func (c *fwdConn) call(ctx context.Context, entry []byte, timeout time.Duration) (*fsm.Result, error) {
	call := &fwdCall{entry: entry, done: make(chan fwdAnswer, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", errNotForwarded, err)
	}
	c.nextID++
	call.id = c.nextID
	c.pending[call.id] = call
	c.queue = append(c.queue, call)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case a := <-call.done:
		return c.answer(a)
	case <-ctx.Done():
		c.abandon(call)
		return nil, fmt.Errorf("%w: %w while the leader %s had the command", replication.ErrOutcomeUnknown, ctx.Err(), c.id)
	case <-expired:
		c.abandon(call)
		return nil, fmt.Errorf("%w: the leader %s did not answer within %s", replication.ErrOutcomeUnknown, c.id, timeout)
	}
}

// abandon forgets a call nobody waits for any more.
func (c *fwdConn) abandon(call *fwdCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, call.id)
	for i, q := range c.queue {
		if q == call {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			break
		}
	}
}

// answer turns the leader's answer into Propose's.
func (c *fwdConn) answer(a fwdAnswer) (*fsm.Result, error) {
	if a.err != nil {
		if a.sent && c.lostIsFailure {
			return nil, fmt.Errorf("%w: %w", replication.ErrNoLeader, a.err) // seeded bug: unknown reported as definite
		}
		if a.sent {
			return nil, fmt.Errorf("%w: the connection to the leader %s failed with the command sent: %w", replication.ErrOutcomeUnknown, c.id, a.err)
		}
		return nil, fmt.Errorf("%w: %w", errNotForwarded, a.err)
	}
	msg := func() string { return string(a.body) }
	switch a.code {
	case fwdOK:
		r, err := fsm.DecodeResult(a.body)
		if err != nil {
			// Applied, but this node cannot read the answer: a retry
			// learns it.
			return nil, fmt.Errorf("%w: the leader's answer does not decode: %w", replication.ErrOutcomeUnknown, err)
		}
		return r, nil
	case fwdNotLeader:
		return nil, fmt.Errorf("%w: %s no longer leads: %s", errNotForwarded, c.id, msg())
	case fwdNoLeader:
		return nil, fmt.Errorf("%w: the leader %s: %s", replication.ErrNoLeader, c.id, msg())
	case fwdRefused:
		return nil, fmt.Errorf("cluster: the leader %s refused the command: %s", c.id, msg())
	}
	return nil, fmt.Errorf("%w: the leader %s: %s", replication.ErrOutcomeUnknown, c.id, msg())
}

// write sends the queued commands, all that are queued in one write.
func (c *fwdConn) write() {
	bw := bufio.NewWriterSize(c.conn, 64<<10)
	var head []byte
	for {
		select {
		case <-c.wake:
		case <-c.dead:
			return
		}
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		for _, call := range batch {
			call.written = true
		}
		c.mu.Unlock()
		for _, call := range batch {
			head = binary.AppendUvarint(head[:0], uint64(uvarintLen(call.id)+len(call.entry)))
			head = binary.AppendUvarint(head, call.id)
			_, _ = bw.Write(head)
			_, _ = bw.Write(call.entry)
		}
		if err := bw.Flush(); err != nil {
			c.fail(err)
			return
		}
	}
}

// read delivers the leader's answers.
func (c *fwdConn) read() {
	br := bufio.NewReaderSize(c.conn, 64<<10)
	for {
		body, err := readFrame(br, nil)
		if err != nil {
			c.fail(err)
			return
		}
		id, k := binary.Uvarint(body)
		if k <= 0 || len(body) == k {
			c.fail(errors.New("malformed answer from the leader"))
			return
		}
		c.mu.Lock()
		call := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if call != nil {
			call.done <- fwdAnswer{code: body[k], body: body[k+1:]}
		}
	}
}

// readFrame reads one frame's body into buf (grown as needed; nil
// allocates a new one).
func readFrame(br *bufio.Reader, buf []byte) ([]byte, error) {
	size, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, err
	}
	if size > maxForwardFrame {
		return nil, fmt.Errorf("frame of %d bytes is over the limit of %d", size, maxForwardFrame)
	}
	if uint64(cap(buf)) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

func uvarintLen(v uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], v)
}

// forwardServer serves the followers' forwarding connections.
type forwardServer struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // connections and the commands they wait on

	served atomic.Uint64 // commands received
}

// accept takes a connection whose first byte was forwardMagic (the stream
// layer read it) and serves it in the background; after stop it closes
// it.
func (n *Node) acceptForward(conn net.Conn) {
	s := &n.fwdServer
	s.mu.Lock()
	if s.closed || !n.raftStarted.Load() {
		// Stopping, or still starting: the stream layer accepts while
		// raft restores its snapshot, before n.raft is set. A follower
		// whose connection closes before its command was written tries
		// again (definite, not unknown).
		s.mu.Unlock()
		_ = conn.Close()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		n.serveForward(conn)
	}()
}

// stop refuses new connections; close the inbound ones, and let Raft's
// shutdown answer their commands, to end the rest (wait).
func (s *forwardServer) stop() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// wait waits for the connections to end, or ctx.
func (s *forwardServer) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serveForward answers one follower's commands: each is restamped and
// applied, and its answer queued for the writer as soon as the state
// machine answers it. It returns when the connection ends.
func (n *Node) serveForward(conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(forwardDialTimeout))
	version := make([]byte, 1)
	if _, err := io.ReadFull(conn, version); err != nil || version[0] != forwardVersion && version[0] != forwardVersionTraced {
		_ = conn.Close()
		return // the magic byte was read by the stream layer
	}
	traced := version[0] == forwardVersionTraced
	if _, err := conn.Write([]byte{forwardMagic, version[0]}); err != nil {
		_ = conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})

	ctx, cancel := context.WithCancel(n.ctx)
	answers := make(chan []byte, 1024)
	var inflight sync.WaitGroup
	defer func() {
		// The follower fails what it has in flight here as unknown: the
		// answers still to come have nowhere to go.
		cancel()
		_ = conn.Close()
		inflight.Wait()
	}()
	go func() {
		n.writeAnswers(ctx, conn, answers)
		cancel()
		_ = conn.Close()
	}()
	send := func(a []byte) {
		select {
		case answers <- a:
		case <-ctx.Done():
		}
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	var buf []byte
	for {
		body, err := readFrame(br, buf)
		if err != nil {
			return
		}
		buf = body
		id, k := binary.Uvarint(body)
		if k <= 0 {
			return
		}
		n.fwdServer.served.Add(1)
		entry, tctx := body[k:], context.Background()
		if traced {
			var err error
			if tctx, entry, err = readTraceBlock(entry); err != nil {
				send(appendAnswer(nil, id, fwdRefused, []byte(err.Error())))
				continue
			}
		}
		var span trace.Span
		if traced && len(entry) > 0 {
			_, span = n.startSpan(tctx, SpanCommit, trace.SpanKindInternal, attribute.String("intentd.node", n.cfg.ID),
				commandAttr(fsm.CommandType(entry[0])))
		} else {
			_, span = n.startSpan(tctx, SpanCommit, trace.SpanKindInternal, attribute.String("intentd.node", n.cfg.ID))
		}
		code, f, msg := n.applyForwarded(entry)
		if f == nil {
			endSpan(span, errors.New(msg))
			send(appendAnswer(nil, id, code, []byte(msg)))
			continue
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			a, err := n.forwardedAnswer(id, f)
			if err == nil && span.IsRecording() {
				span.SetAttributes(attribute.Int64("raft.log.index", int64(f.Index())))
			}
			endSpan(span, err)
			send(a)
		}()
	}
}

// applyForwarded restamps and applies a forwarded entry; when it cannot
// (this node does not lead, the entry does not decode) it returns why
// instead of a future.
func (n *Node) applyForwarded(entry []byte) (code byte, f raft.ApplyFuture, msg string) {
	if n.stopping.Load() {
		return fwdNoLeader, nil, replication.ErrShuttingDown.Error()
	}
	if n.raft.State() != raft.Leader {
		return fwdNotLeader, nil, "this node is not the leader"
	}
	data, err := fsm.Restamp(entry, n.stamp())
	if err != nil {
		return fwdRefused, nil, err.Error()
	}
	return fwdOK, n.raft.Apply(data, n.cfg.ApplyTimeout), ""
}

// forwardedAnswer waits for a forwarded command's apply and encodes the
// answer.
// err is why it failed (nil when the command applied).
func (n *Node) forwardedAnswer(id uint64, f raft.ApplyFuture) ([]byte, error) {
	if err := n.awaitApply(context.Background(), f); err != nil {
		err = n.mapApplyError(err)
		var nl *replication.NotLeaderError
		code := fwdUnknown
		switch {
		case errors.As(err, &nl), errors.Is(err, replication.ErrNotLeader):
			code = fwdNotLeader
		case errors.Is(err, replication.ErrOutcomeUnknown):
		case errors.Is(err, replication.ErrNoLeader), errors.Is(err, replication.ErrShuttingDown):
			code = fwdNoLeader
		}
		return appendAnswer(nil, id, code, []byte(err.Error())), err
	}
	r, ok := f.Response().(*fsm.Result)
	if !ok {
		err := fmt.Errorf("the state machine answered %T", f.Response())
		return appendAnswer(nil, id, fwdUnknown, []byte(err.Error())), err
	}
	b := appendAnswerHead(make([]byte, 0, 512), id, fwdOK)
	b, err := fsm.AppendResult(b, r)
	if err != nil {
		return appendAnswer(nil, id, fwdUnknown, []byte(err.Error())), err
	}
	return frame(b), nil
}

// writeAnswers writes answers as they come, every one that is ready in
// one write, until ctx ends or a write fails.
func (n *Node) writeAnswers(ctx context.Context, conn net.Conn, answers <-chan []byte) {
	bw := bufio.NewWriterSize(conn, 64<<10)
	for {
		select {
		case a := <-answers:
			_, _ = bw.Write(a)
		case <-ctx.Done():
			return
		}
		for len(answers) > 0 {
			_, _ = bw.Write(<-answers)
		}
		if err := bw.Flush(); err != nil {
			return
		}
	}
}

// appendAnswerHead starts an answer's body: room for the frame's length,
// the id and the code (frame fills the length in).
func appendAnswerHead(b []byte, id uint64, code byte) []byte {
	b = append(b, make([]byte, binary.MaxVarintLen64)...)
	b = binary.AppendUvarint(b, id)
	return append(b, code)
}

// appendAnswer returns the framed answer id, code, body.
func appendAnswer(b []byte, id uint64, code byte, body []byte) []byte {
	return frame(append(appendAnswerHead(b, id, code), body...))
}

// frame fills in the length of a body appendAnswerHead started, and
// returns the frame (a suffix of b).
func frame(b []byte) []byte {
	body := len(b) - binary.MaxVarintLen64
	k := uvarintLen(uint64(body))
	start := binary.MaxVarintLen64 - k
	binary.PutUvarint(b[start:], uint64(body))
	return b[start:]
}
