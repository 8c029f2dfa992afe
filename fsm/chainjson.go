package fsm

import (
	"strconv"

	"github.com/intentledger/intentd/internal/jsonenc"
)

// appendJSONString is a string as json.Marshal writes it (HTML-safe).
func appendJSONString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s, true) }

// appendChainBody appends the JSON of b exactly as json.Marshal writes it
// (fields in declaration order, omitempty, HTML-safe string escaping): the
// bytes of an audit log event are hashed into the chain on every replica,
// so they must not depend on how they are produced. Writing them here,
// rather than by reflection, takes a third of the time on the apply path
// of every replica and no longer ties the chain's bytes to the Go
// release's encoding/json (TestChainBodyMatchesEncodingJSON pins both).
func appendChainBody(dst []byte, b *ChainBody) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendUint(dst, b.Seq, 10)
	dst = append(dst, `,"ns":`...)
	dst = appendJSONString(dst, b.Namespace)
	if b.Key != "" {
		dst = append(dst, `,"key":`...)
		dst = appendJSONString(dst, b.Key)
	}
	dst = append(dst, `,"prev":`...)
	dst = appendJSONString(dst, b.Prev)
	ev := &b.AuditEvent
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendUint(dst, ev.Index, 10)
	dst = append(dst, `,"at":`...)
	dst = strconv.AppendInt(dst, ev.At, 10)
	dst = append(dst, `,"op":`...)
	dst = appendJSONString(dst, ev.Op)
	dst = append(dst, `,"status":`...)
	dst = appendJSONString(dst, string(ev.Status))
	dst = append(dst, `,"state":`...)
	dst = appendJSONString(dst, string(ev.State))
	for _, f := range [...]struct{ name, v string }{
		{`,"owner":`, ev.Owner}, {`,"actor":`, ev.Actor}, {`,"fingerprint":`, ev.Fingerprint},
	} {
		if f.v != "" {
			dst = append(dst, f.name...)
			dst = appendJSONString(dst, f.v)
		}
	}
	if ev.FencingToken != 0 {
		dst = append(dst, `,"fencing_token":`...)
		dst = strconv.AppendUint(dst, ev.FencingToken, 10)
	}
	if ev.Outcome != "" {
		dst = append(dst, `,"outcome":`...)
		dst = appendJSONString(dst, string(ev.Outcome))
	}
	if ev.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = appendJSONString(dst, ev.Reason)
	}
	return append(dst, '}')
}
