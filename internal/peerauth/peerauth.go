// Package peerauth proves, between the nodes of one cluster, that an HTTP
// request forwarded to the leader comes from one of them. A forwarded
// request is trusted for what only a node may say (the per-key rate limit
// was counted where it entered, the client's address), so a client must
// not be able to pass for a node.
//
// Two proofs, each used when the deployment has its credential: an HMAC
// over the forwarding node's ID, the method, the request URI and the time,
// keyed from the cluster's shared secret (the gossip key), valid for
// MaxSkew; and, with TLS, a client certificate that carries the forwarding
// node's identity (tlsutil.NodeIdentity). With both, both must hold; with
// neither, no request is trusted.
package peerauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/hkdf"
)

// Headers a forwarding node sets.
const (
	// HeaderForwardedBy names the forwarding node. A request carrying it
	// is never forwarded again.
	HeaderForwardedBy = "X-Intentd-Forwarded-By"
	// HeaderForwardAuth carries "<unix seconds>.<base64url HMAC>".
	HeaderForwardAuth = "X-Intentd-Forward-Auth"
)

// MaxSkew bounds how old (or how far ahead) a signature may be.
const MaxSkew = 60 * time.Second

// Auth signs the requests one node forwards and verifies the ones it
// receives. The zero value trusts nothing.
type Auth struct {
	nodeID string
	key    []byte // HMAC key; nil: no shared secret
	// identity returns the node ID a verified TLS client certificate
	// carries; nil: TLS is off.
	identity func(*tls.ConnectionState) (string, bool)
	now      func() time.Time
}

// New returns the Auth of node nodeID. secret is the cluster's shared
// secret (nil: none); identity, when TLS is on, returns the node ID of a
// request's verified client certificate.
func New(nodeID string, secret []byte, identity func(*tls.ConnectionState) (string, bool)) *Auth {
	a := &Auth{nodeID: nodeID, identity: identity, now: time.Now}
	if len(secret) > 0 {
		a.key = make([]byte, 32)
		// HKDF separates this key from the gossip encryption that uses the
		// same secret.
		if _, err := io.ReadFull(hkdf.New(sha256.New, secret, nil, []byte("intentd forward auth v1")), a.key); err != nil {
			panic("peerauth: hkdf: " + err.Error()) // cannot fail for 32 bytes
		}
	}
	return a
}

// Enabled reports whether the node can prove anything: a request it signs
// can be verified by its peers.
func (a *Auth) Enabled() bool { return a != nil && (a.key != nil || a.identity != nil) }

// Sign marks out as forwarded by this node.
func (a *Auth) Sign(out *http.Request) {
	out.Header.Set(HeaderForwardedBy, a.nodeID)
	if a.key == nil {
		return
	}
	ts := a.now().Unix()
	out.Header.Set(HeaderForwardAuth, strconv.FormatInt(ts, 10)+"."+a.mac(a.nodeID, out.Method, out.URL.RequestURI(), ts))
}

// Verify reports whether r was forwarded by a node of the cluster.
func (a *Auth) Verify(r *http.Request) bool {
	if !a.Enabled() {
		return false
	}
	by := r.Header.Get(HeaderForwardedBy)
	if by == "" {
		return false
	}
	if a.identity != nil {
		if r.TLS == nil {
			return false
		}
		id, ok := a.identity(r.TLS)
		if !ok || id != by {
			return false
		}
	}
	if a.key != nil {
		tsText, mac, ok := strings.Cut(r.Header.Get(HeaderForwardAuth), ".")
		if !ok {
			return false
		}
		ts, err := strconv.ParseInt(tsText, 10, 64)
		if err != nil {
			return false
		}
		if d := a.now().Sub(time.Unix(ts, 0)); d > MaxSkew || d < -MaxSkew {
			return false
		}
		want := a.mac(by, r.Method, r.URL.RequestURI(), ts)
		if !hmac.Equal([]byte(mac), []byte(want)) {
			return false
		}
	}
	return true
}

func (a *Auth) mac(by, method, uri string, ts int64) string {
	h := hmac.New(sha256.New, a.key)
	for _, part := range []string{by, method, uri, strconv.FormatInt(ts, 10)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
