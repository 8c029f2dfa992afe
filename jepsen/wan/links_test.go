package wan

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/jepsen/netns"
	"github.com/intentledger/intentd/jepsen/netns/netnstest"
)

// The relays in real namespaces: node 1 reaches node 2's service only
// through node 2's relay, delayed; an iptables partition still cuts the
// link; the harness (the root namespace) is relayed undelayed; datagrams
// are relayed too.
func TestLinksInNamespaces(t *testing.T) {
	netnstest.Require(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	nw, err := netns.Create(ctx, "ijwan-", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nw.Close() })
	const rtt = 100 * time.Millisecond
	l := OnePerNode(2)
	r, err := ParseRTT(rtt.String(), l)
	if err != nil {
		t.Fatal(err)
	}
	links, err := Start(nw, NewShaper(NewMatrix(l, r, 0), 1), []Port{{Name: "echo", Listen: 9200, Backend: 9201, UDP: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = links.Close() })

	// Node 2's own service on the backend port: an echo over TCP, and UDP
	// datagrams reported with their source.
	var ln net.Listener
	var pc net.PacketConn
	err = nw.Do(2, func() error {
		var err error
		if ln, err = net.Listen("tcp", nw.NodeIP(2)+":9201"); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", nw.NodeIP(2)+":9201")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close(); _ = pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				rd := bufio.NewReader(c)
				for {
					line, err := rd.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	datagrams := make(chan string, 10)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			datagrams <- string(buf[:n]) + " from " + from.String()
		}
	}()

	relay := nw.NodeIP(2) + ":9200"
	echo := func(from int, timeout time.Duration) (time.Duration, error) {
		var took time.Duration
		do := func() error {
			start := time.Now()
			c, err := net.DialTimeout("tcp", relay, timeout)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(timeout))
			if _, err := c.Write([]byte("hi\n")); err != nil {
				return err
			}
			if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
				return err
			}
			took = time.Since(start)
			return nil
		}
		if from == 0 {
			return took, do()
		}
		return took, nw.Do(from, do)
	}
	took, err := echo(1, 10*time.Second)
	if err != nil {
		t.Fatalf("node 1 → node 2 through the relay: %v", err)
	}
	// The handshake's round trip, then the line and its echo: two.
	if took < 2*rtt {
		t.Errorf("an echo from node 1 took %v, want at least %v", took, 2*rtt)
	}
	if _, err := echo(0, 10*time.Second); err != nil {
		t.Fatalf("the harness → node 2 through the relay: %v", err)
	}

	if err := nw.Partition([][]int{{1}, {2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := echo(1, time.Second); err == nil {
		t.Error("node 1 reached node 2 through a partition")
	}
	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	if _, err := echo(1, 10*time.Second); err != nil {
		t.Fatalf("after healing: %v", err)
	}

	err = nw.Do(1, func() error {
		c, err := net.Dial("udp", relay)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("ping"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-datagrams:
		if want := "ping from " + relay; d != want {
			t.Errorf("node 2 got %q, want %q", d, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the datagram never arrived")
	}
	// The relay counts a datagram once its write returned, which may be
	// after node 2 read it: wait for the count.
	waitFor(t, func() bool { return links.Stats()[Link{1, 2}].Datagrams == 1 })
	st := links.Stats()
	if st[Link{1, 2}].Conns < 2 || st[Link{0, 2}].Conns != 1 || st[Link{1, 2}].Datagrams != 1 {
		t.Errorf("stats %+v", st)
	}
	if s := links.Summary(); !strings.Contains(s, "echo ") || !strings.Contains(s, "2 of 2 directed links") || strings.Contains(s, "idle") {
		t.Errorf("summary %q", s)
	}
}
