package client

import (
	"errors"
	"net"
	"strings"
)

// clientCertAlerts are the TLS alerts a server sends when it refuses the
// client's certificate, or its lack of one (crypto/tls's texts).
var clientCertAlerts = []string{
	"tls: certificate required",
	"tls: bad certificate",
	"tls: unknown certificate authority",
	"tls: unsupported certificate",
	"tls: certificate revoked",
	"tls: certificate expired",
	"tls: access denied",
	// A TLS 1.2 server refusing a client without a certificate (RFC 5246
	// 7.4.6; crypto/tls does so). Between Go peers, as intentctl and
	// intentd are, it means nothing else: they always share a version
	// and a cipher suite.
	"tls: handshake failure",
}

// ClientCertRefused reports whether err is a server's TLS refusal of the
// client's certificate, or of its lack of one: a credential problem like a
// 401 (present a certificate of the node's client CA), which retrying
// cannot cure. The client neither retries it nor tries another node, and
// its error wraps ErrUnauthorized. Go
// reports a received alert as a *net.OpError "remote error" whose error
// is the alert (an unexported type), so its text is all there is to read.
func ClientCertRefused(err error) bool {
	for e := err; e != nil; {
		var op *net.OpError
		if !errors.As(e, &op) {
			return false
		}
		if op.Op == "remote error" && op.Err != nil {
			msg := op.Err.Error()
			for _, a := range clientCertAlerts {
				if strings.Contains(msg, a) {
					return true
				}
			}
		}
		e = op.Err
	}
	return false
}
