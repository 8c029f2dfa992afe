package fsm

import "github.com/intentledger/intentd/internal/jsonenc"

// appendChainBody appends the JSON of b exactly as json.Marshal writes it
// (fields in declaration order, omitempty, HTML-safe string escaping): the
// bytes of an audit log event are hashed into the chain on every replica,
// so they must not depend on how they are produced. Writing them here,
// rather than by reflection, takes a third of the time on the apply path
// of every replica and no longer ties the chain's bytes to the Go
// release's encoding/json (TestChainBodyMatchesEncodingJSON pins both).
func appendChainBody(dst []byte, b *ChainBody) []byte {
	o := jsonenc.Object{B: dst, EscapeHTML: true}
	o.Uint("seq", b.Seq)
	o.String("ns", b.Namespace)
	if b.Key != "" {
		o.String("key", b.Key)
	}
	o.String("prev", b.Prev)
	ev := &b.AuditEvent
	o.Uint("index", ev.Index)
	o.Int("at", ev.At)
	o.String("op", ev.Op)
	o.String("status", string(ev.Status))
	o.String("state", string(ev.State))
	optional := func(name, v string) {
		if v != "" {
			o.String(name, v)
		}
	}
	optional("owner", ev.Owner)
	optional("actor", ev.Actor)
	optional("fingerprint", ev.Fingerprint)
	if ev.FencingToken != 0 {
		o.Uint("fencing_token", ev.FencingToken)
	}
	optional("outcome", string(ev.Outcome))
	optional("reason", ev.Reason)
	return o.End()
}
