package fsm

import (
	"strconv"
	"unicode/utf8"
)

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

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json does
// with HTML escaping on: \" \\ \b \f \n \r \t, \u00XX for the other
// control bytes and for < > &, \ufffd for each byte of invalid UTF-8, and
// \u2028 \u2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
