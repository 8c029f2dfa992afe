package wan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Shaper hands out the delay of each link from the current matrix. Set
// changes the matrix for everything read after it, on connections already
// open too. It is safe for concurrent use.
type Shaper struct {
	cur atomic.Pointer[Matrix]
	mu  sync.Mutex // guards rng
	rng *rand.Rand
}

// NewShaper starts with matrix m; seed seeds the jitter.
func NewShaper(m Matrix, seed int64) *Shaper {
	s := &Shaper{rng: rand.New(rand.NewSource(seed))}
	s.cur.Store(&m)
	return s
}

// Matrix is the current matrix.
func (s *Shaper) Matrix() Matrix { return *s.cur.Load() }

// Set replaces the matrix.
func (s *Shaper) Set(m Matrix) { s.cur.Store(&m) }

// Delay draws the delay of one piece of data on the link from → to: the
// link's one-way delay d, varied uniformly within d·(1±jitter).
func (s *Shaper) Delay(from, to int) time.Duration {
	m := s.cur.Load()
	d := m.OneWay(from, to)
	if d <= 0 || m.Jitter <= 0 {
		return max(d, 0)
	}
	s.mu.Lock()
	u := s.rng.Float64()
	s.mu.Unlock()
	return time.Duration(float64(d) * (1 + m.Jitter*(2*u-1)))
}

// RelayConfig says where a relay forwards and how it delays.
type RelayConfig struct {
	// To is the node the relay stands in front of.
	To int
	// Backend is the address of the node's own listener.
	Backend string
	// Source names the node an address belongs to (0: outside the
	// cluster, never delayed).
	Source func(net.Addr) int
	// Dial opens a connection to the backend (default net.Dialer); the
	// harness dials inside the node's network namespace.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// DialTimeout bounds a dial to the backend (default 5s).
	DialTimeout time.Duration
	// Shaper gives the delays.
	Shaper *Shaper
}

// Link is a directed link between two nodes (0: the outside).
type Link struct{ From, To int }

// LinkStats counts what a link carried through relays.
type LinkStats struct {
	Conns     int64 // TCP connections opened from the link's From
	Bytes     int64 // TCP bytes carried in the link's direction
	Datagrams int64 // UDP datagrams carried in the link's direction
}

// Relay forwards TCP connections and UDP datagrams addressed to one node
// to that node's own listener, holding every piece of data for its link's
// delay: From→To on the way in, To→From for the answers on a connection.
// Order within a connection is kept (a later piece never overtakes an
// earlier one, whatever the jitter); a TCP handshake costs one round trip
// (the first bytes are held until a round trip after the accept); a
// half-close travels as data does; a reset, a failed dial to the backend
// or a closed relay resets both sides. Datagrams are delayed each on its
// own and may be reordered by jitter, as on a network.
type Relay struct {
	cfg  RelayConfig
	done chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners []io.Closer
	conns     map[net.Conn]struct{}
	stats     map[Link]*LinkStats
}

// NewRelay makes a relay; ServeTCP and ServeUDP give it listeners.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Shaper == nil || cfg.Backend == "" || cfg.Source == nil {
		return nil, errors.New("wan: a relay needs a Shaper, a Backend and a Source")
	}
	if cfg.Dial == nil {
		cfg.Dial = (&net.Dialer{}).DialContext
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	return &Relay{cfg: cfg, done: make(chan struct{}), conns: map[net.Conn]struct{}{}, stats: map[Link]*LinkStats{}}, nil
}

// Stats returns what each link carried so far.
func (r *Relay) Stats() map[Link]LinkStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[Link]LinkStats, len(r.stats))
	for l, s := range r.stats {
		out[l] = *s
	}
	return out
}

func (r *Relay) count(l Link, f func(*LinkStats)) {
	r.mu.Lock()
	s := r.stats[l]
	if s == nil {
		s = &LinkStats{}
		r.stats[l] = s
	}
	f(s)
	r.mu.Unlock()
}

// track registers a listener or connection to close with the relay; it
// reports false (and closes c) when the relay is already closed.
func (r *Relay) track(c io.Closer, conn net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		_ = c.Close()
		return false
	}
	if conn != nil {
		r.conns[conn] = struct{}{}
	} else {
		r.listeners = append(r.listeners, c)
	}
	return true
}

func (r *Relay) untrack(conn net.Conn) {
	r.mu.Lock()
	delete(r.conns, conn)
	r.mu.Unlock()
}

// Close stops the listeners, resets every relayed connection, drops the
// datagrams still held and waits for the relay's goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.done)
	var errs []error
	for _, l := range r.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for c := range r.conns {
		reset(c)
	}
	r.mu.Unlock()
	r.wg.Wait()
	return errors.Join(errs...)
}

// reset closes c so that its peer sees a reset rather than an orderly end.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// ServeTCP accepts connections on ln until it is closed (Close closes
// it), relaying each to the backend. It returns at once.
func (r *Relay) ServeTCP(ln net.Listener) {
	if !r.track(ln, nil) {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return
			}
			if !r.track(c, c) {
				continue
			}
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.relay(c)
			}()
		}
	}()
}

// queueLen bounds the pieces held per direction of a connection: past it
// the relay stops reading, and TCP's own flow control slows the sender.
const (
	queueLen  = 1024
	chunkSize = 32 << 10
)

// piece is data read from one side, to be written to the other at a time.
type piece struct {
	data []byte
	at   time.Time
	end  error // io.EOF: a half-close; another error: a reset
}

func (r *Relay) relay(in net.Conn) {
	accepted := time.Now()
	from := r.cfg.Source(in.RemoteAddr())
	to := r.cfg.To
	defer r.untrack(in)
	r.count(Link{from, to}, func(s *LinkStats) { s.Conns++ })
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.DialTimeout)
	go func() { // a relay closed mid-dial stops waiting
		select {
		case <-r.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	out, err := r.cfg.Dial(ctx, "tcp", r.cfg.Backend)
	cancel()
	if err != nil || !r.track(out, out) {
		// As a refused connection would: the client sees a reset.
		reset(in)
		return
	}
	defer r.untrack(out)
	// The first bytes wait for the handshake's round trip.
	ready := accepted.Add(r.cfg.Shaper.Delay(from, to) + r.cfg.Shaper.Delay(to, from))
	abort := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(abort); reset(in); reset(out) }) }
	var halves sync.WaitGroup
	halves.Add(2)
	go func() { defer halves.Done(); r.pipe(in, out, Link{from, to}, ready, abort, stop) }()
	go func() { defer halves.Done(); r.pipe(out, in, Link{to, from}, time.Time{}, abort, stop) }()
	halves.Wait()
	// Both directions ended in order (or one reset both): close.
	_ = in.Close()
	_ = out.Close()
}

// pipe carries src → dst on link l, each piece held until its time.
func (r *Relay) pipe(src, dst net.Conn, l Link, notBefore time.Time, abort chan struct{}, stop func()) {
	q := make(chan piece, queueLen)
	var reader sync.WaitGroup
	defer reader.Wait() // it ends at its source's end, or once abort has reset both sides
	reader.Add(1)
	go func() { // the reader: stamps each piece with its delivery time
		defer reader.Done()
		defer close(q)
		var last time.Time
		buf := make([]byte, chunkSize)
		for {
			n, err := src.Read(buf)
			at := time.Now()
			if at.Before(notBefore) {
				at = notBefore
			}
			at = at.Add(r.cfg.Shaper.Delay(l.From, l.To))
			if at.Before(last) {
				at = last // never overtake an earlier piece
			}
			last = at
			p := piece{at: at}
			if n > 0 {
				p.data = append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				p.end = err
			}
			select {
			case q <- p:
			case <-abort:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for p := range q {
		if d := time.Until(p.at); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-abort:
				return
			case <-r.done:
				stop()
				return
			}
		}
		if len(p.data) > 0 {
			if _, err := dst.Write(p.data); err != nil {
				stop()
				return
			}
			r.count(l, func(s *LinkStats) { s.Bytes += int64(len(p.data)) })
		}
		switch {
		case p.end == nil:
		case errors.Is(p.end, io.EOF):
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				if err := cw.CloseWrite(); err != nil {
					stop()
				}
				return
			}
			stop()
			return
		default:
			stop()
			return
		}
	}
}

// ServeUDP relays the datagrams that arrive on pc to the backend, each
// after its link's delay, sending them from pc. Datagrams from the
// backend itself are dropped (a node never sends to its own advertised
// address; relaying them would loop). It returns at once.
func (r *Relay) ServeUDP(pc net.PacketConn) error {
	backend, err := net.ResolveUDPAddr("udp", r.cfg.Backend)
	if err != nil {
		return fmt.Errorf("wan: relay backend %s: %w", r.cfg.Backend, err)
	}
	if !r.track(pc, nil) {
		return net.ErrClosed
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return
			}
			if ua, ok := addr.(*net.UDPAddr); ok && ua.IP.Equal(backend.IP) && ua.Port == backend.Port {
				continue
			}
			l := Link{r.cfg.Source(addr), r.cfg.To}
			data := append([]byte(nil), buf[:n]...)
			d := r.cfg.Shaper.Delay(l.From, l.To)
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-t.C:
				case <-r.done:
					return
				}
				if _, err := pc.WriteTo(data, backend); err == nil {
					r.count(l, func(s *LinkStats) { s.Datagrams++ })
				}
			}()
		}
	}()
	return nil
}
