// Package gossipforge sends forged gossip: what a member holding only the
// cluster's gossip key can send. An alive message for another live member,
// with a higher incarnation and a meta of the forger's choice, and that
// member's leave, encoded and encrypted as memberlist does. The cluster's
// tests and the fault suite's gossip-forgery nemesis use it to show that
// gossip alone removes, demotes or re-addresses no server.
package gossipforge

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"net"
	"strconv"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// memberlist's message types (memberlist/net.go; part of its protocol).
const (
	gossipAliveMsg = 4
	gossipDeadMsg  = 5
)

// aliveMessage and deadMessage are memberlist's messages, field for field.
type aliveMessage struct {
	Incarnation uint32
	Node        string
	Addr        []byte
	Port        uint16
	Meta        []byte
	Vsn         []uint8
}

type deadMessage struct {
	Incarnation uint32
	Node        string
	From        string
}

// Forger sends forged gossip, encrypted with the cluster's gossip key
// (memberlist's encryption version 1), to members.
type Forger struct {
	// Key is the gossip key (16, 24 or 32 bytes).
	Key []byte
}

// Alive tells every member at to that node (whose real gossip address is
// addr, host:port) is alive with incarnation and meta. A member that
// knows node at another address refuses it, so addr must be the node's
// own.
func (f Forger) Alive(to []string, node, addr string, incarnation uint32, meta []byte) error {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("forged gossip: %w", err)
	}
	ip := net.ParseIP(host)
	if ip4 := ip.To4(); ip4 != nil {
		ip = ip4
	}
	port, err := strconv.Atoi(portText)
	if err != nil || ip == nil {
		return fmt.Errorf("forged gossip: address %q is not ip:port", addr)
	}
	return f.send(to, gossipAliveMsg, &aliveMessage{Incarnation: incarnation, Node: node, Addr: ip, Port: uint16(port), Meta: meta,
		Vsn: []uint8{1, 5, 2, 0, 0, 0}})
}

// Leave tells every member at to that node left (a dead message from the
// node itself), with incarnation.
func (f Forger) Leave(to []string, node string, incarnation uint32) error {
	return f.send(to, gossipDeadMsg, &deadMessage{Incarnation: incarnation, Node: node, From: node})
}

func (f Forger) send(to []string, kind byte, msg any) error {
	var plain bytes.Buffer
	plain.WriteByte(kind)
	if err := codec.NewEncoder(&plain, &codec.MsgpackHandle{}).Encode(msg); err != nil {
		return fmt.Errorf("forged gossip: encode: %w", err)
	}
	packet, err := f.seal(plain.Bytes())
	if err != nil {
		return err
	}
	var errs []error
	for _, addr := range to {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := conn.Write(packet); err != nil {
			errs = append(errs, err)
		}
		_ = conn.Close()
	}
	if len(errs) == len(to) && len(to) > 0 {
		return fmt.Errorf("forged gossip: send: %w", errs[0])
	}
	return nil
}

// seal encrypts a packet as memberlist's encryption version 1 does:
// version byte, 12-byte nonce, AES-GCM with no label.
func (f Forger) seal(msg []byte) ([]byte, error) {
	block, err := aes.NewCipher(f.Key)
	if err != nil {
		return nil, fmt.Errorf("forged gossip: key: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("forged gossip: %w", err)
	}
	out := make([]byte, 1+12, 1+12+len(msg)+gcm.Overhead())
	out[0] = 1
	if _, err := rand.Read(out[1:13]); err != nil {
		return nil, fmt.Errorf("forged gossip: nonce: %w", err)
	}
	return gcm.Seal(out, out[1:13], msg, nil), nil
}
