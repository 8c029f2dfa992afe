package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/intentledger/intentd/internal/peerauth"
)

// HeaderForwardAuth carries a forwarding node's proof (PeerAuth.Sign).
const HeaderForwardAuth = peerauth.HeaderForwardAuth

// PeerAuth proves that a forwarded request comes from a node of the
// cluster. A forwarded request is trusted for what only a node may say:
// that the per-key limit was already counted where it entered the
// cluster, and which client it came from (X-Forwarded-For).
type PeerAuth interface {
	// Sign marks out, a request this node forwards to the leader.
	Sign(out *http.Request)
	// Verify reports whether r was forwarded by a node of the cluster.
	Verify(r *http.Request) bool
}

var _ PeerAuth = (*peerauth.Auth)(nil)

// forwardHeaders are what a forwarding node adds; from anyone else they
// are dropped.
var forwardHeaders = []string{HeaderForwardedBy, HeaderForwardAuth, "X-Forwarded-For"}

// trustForwarding drops the forwarding headers of a request that no node
// signed (PeerAuth), before anything reads them: a client that sends
// X-Intentd-Forwarded-By itself is a client like any other. The request
// still counts as one that claims to be forwarded (claimsForwarded), so it
// is never forwarded again: that guards against loops between nodes that
// cannot sign (no shared secret, in development) and costs a stranger who
// sets the header nothing but a not_leader answer.
func (s *Server) trustForwarding(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if forwarded(r) && (s.peers == nil || !s.peers.Verify(r)) {
			for _, h := range forwardHeaders {
				r.Header.Del(h)
			}
			s.metrics.untrustedForwards.Inc()
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), unsignedForwardKey{}, true)))
		}
		return next(c)
	}
}

type unsignedForwardKey struct{}

// claimsForwarded reports whether r says it was forwarded by a node,
// signed or not: such a request is never forwarded again.
func claimsForwarded(r *http.Request) bool {
	return forwarded(r) || r.Context().Value(unsignedForwardKey{}) != nil
}
