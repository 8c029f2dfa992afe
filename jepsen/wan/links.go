package wan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/intentledger/intentd/jepsen/netns"
)

// Port is one port the relays serve on every node's address: Listen is
// the port the node advertises to its peers, Backend the port of the
// node's own listener on the same address.
type Port struct {
	Name    string // for reports: "raft", "gossip", "http"
	Listen  int
	Backend int
	UDP     bool // relay datagrams on Listen too (memberlist's packets)
}

// Links is the delay layer of a netns.Net: one relay per node and port,
// listening in the node's namespace, so that a node's peers reach it only
// through its relays.
type Links struct {
	shaper *Shaper
	relays []*Relay
	names  []string // the port name of each relay
	ports  []Port
}

// Start opens the relays for every node of nw and every port: a TCP (and,
// for a UDP port, a UDP) listener on the node's address, inside its
// namespace; the relay dials the node's own listener from inside the
// namespace too. A connection's source is named by its address: node i's
// address is node i, anything else (the harness) is the outside and is
// not delayed. On failure every relay opened so far is closed.
func Start(nw *netns.Net, sh *Shaper, ports []Port) (*Links, error) {
	if sh.Matrix().Nodes() != nw.Nodes() {
		return nil, fmt.Errorf("wan: the matrix covers %d nodes, the network has %d", sh.Matrix().Nodes(), nw.Nodes())
	}
	byIP := make(map[string]int, nw.Nodes())
	for i := 1; i <= nw.Nodes(); i++ {
		byIP[nw.NodeIP(i)] = i
	}
	source := func(a net.Addr) int {
		host, _, err := net.SplitHostPort(a.String())
		if err != nil {
			return 0
		}
		return byIP[host]
	}
	l := &Links{shaper: sh, ports: ports}
	for i := 1; i <= nw.Nodes(); i++ {
		ip := nw.NodeIP(i)
		dial := func(ctx context.Context, network, address string) (net.Conn, error) {
			var c net.Conn
			err := nw.Do(i, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, address)
				return err
			})
			return c, err
		}
		for _, p := range ports {
			r, err := NewRelay(RelayConfig{To: i, Backend: net.JoinHostPort(ip, strconv.Itoa(p.Backend)),
				Source: source, Dial: dial, Shaper: sh})
			if err != nil {
				return nil, errors.Join(err, l.Close())
			}
			l.relays = append(l.relays, r)
			l.names = append(l.names, p.Name)
			addr := net.JoinHostPort(ip, strconv.Itoa(p.Listen))
			var ln net.Listener
			var pc net.PacketConn
			err = nw.Do(i, func() error {
				var err error
				if ln, err = net.Listen("tcp", addr); err != nil {
					return err
				}
				if p.UDP {
					pc, err = net.ListenPacket("udp", addr)
				}
				return err
			})
			if err != nil {
				if ln != nil {
					_ = ln.Close()
				}
				return nil, errors.Join(fmt.Errorf("wan: relay for %s on %s: %w", p.Name, addr, err), l.Close())
			}
			r.ServeTCP(ln)
			if pc != nil {
				if err := r.ServeUDP(pc); err != nil {
					return nil, errors.Join(err, l.Close())
				}
			}
		}
	}
	return l, nil
}

// Shaper is the shaper the relays ask for delays.
func (l *Links) Shaper() *Shaper { return l.shaper }

// Stats sums what every relay carried, per directed link.
func (l *Links) Stats() map[Link]LinkStats {
	out := map[Link]LinkStats{}
	for _, r := range l.relays {
		for k, s := range r.Stats() {
			t := out[k]
			t.Conns += s.Conns
			t.Bytes += s.Bytes
			t.Datagrams += s.Datagrams
			out[k] = t
		}
	}
	return out
}

// Summary says in one line what went through the relays: connections,
// bytes and datagrams between nodes, how many directed links between
// nodes carried anything, and those that carried nothing.
func (l *Links) Summary() string {
	st := l.Stats()
	perPort := map[string]int64{}
	for k, r := range l.relays {
		for link, s := range r.Stats() {
			if link.From != 0 && link.To != 0 {
				perPort[l.names[k]] += s.Conns
			}
		}
	}
	var byPort []string
	for _, p := range l.ports {
		byPort = append(byPort, fmt.Sprintf("%s %d", p.Name, perPort[p.Name]))
	}
	var conns, bytes, grams int64
	used := map[Link]bool{}
	for k, s := range st {
		if k.From == 0 || k.To == 0 {
			continue
		}
		conns, bytes, grams = conns+s.Conns, bytes+s.Bytes, grams+s.Datagrams
		if s.Bytes > 0 || s.Datagrams > 0 {
			used[k] = true
		}
	}
	n := l.shaper.Matrix().Nodes()
	var idle []string
	for i := 1; i <= n; i++ {
		for j := 1; j <= n; j++ {
			if i != j && !used[Link{i, j}] {
				idle = append(idle, fmt.Sprintf("n%d>n%d", i, j))
			}
		}
	}
	sort.Strings(idle)
	s := fmt.Sprintf("relayed between nodes: %d TCP connections (%s), %.1f MB, %d datagrams; %d of %d directed links carried traffic",
		conns, strings.Join(byPort, ", "), float64(bytes)/1e6, grams, len(used), n*(n-1))
	if len(idle) > 0 {
		s += " (idle: " + strings.Join(idle, ", ") + ")"
	}
	return s
}

// Close closes every relay: listeners stop, relayed connections reset.
func (l *Links) Close() error {
	var errs []error
	for _, r := range l.relays {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
