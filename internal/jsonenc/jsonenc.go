// Package jsonenc writes JSON values by hand exactly as encoding/json
// does, for the few documents on hot paths where reflection is most of
// the cost (the audit log events every replica hashes, the claim answer).
// Callers pin their output to encoding/json's with property tests.
package jsonenc

import (
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// safe and htmlSafe mark the ASCII bytes written as they are.
var safe, htmlSafe = func() (s, h [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		s[c] = c != '"' && c != '\\'
		h[c] = s[c] && c != '<' && c != '>' && c != '&'
	}
	return s, h
}()

// AppendString appends s as a JSON string the way encoding/json does:
// \" \\ \b \f \n \r \t, \u00XX for the other control bytes (and, with
// escapeHTML, for < > &), \ufffd for each byte of invalid UTF-8, and
// U+2028 and U+2029 escaped.
func AppendString(dst []byte, s string, escapeHTML bool) []byte {
	dst = append(dst, '"')
	table := &safe
	if escapeHTML {
		table = &htmlSafe
	}
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if table[c] {
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

// Object appends the members of one JSON object; the zero value writes
// nothing until the first member. It mirrors a struct's encoding: call
// the methods in field order, skipping omitempty fields yourself.
type Object struct {
	B          []byte
	EscapeHTML bool
	n          int
}

// Key writes a member's name; the caller appends its value to B (an
// array or a nested object).
func (o *Object) Key(name string) {
	if o.n == 0 {
		o.B = append(o.B, '{')
	} else {
		o.B = append(o.B, ',')
	}
	o.n++
	o.B = append(o.B, '"')
	o.B = append(o.B, name...) // names are plain ASCII
	o.B = append(o.B, '"', ':')
}

// String writes a string member.
func (o *Object) String(name, v string) {
	o.Key(name)
	o.B = AppendString(o.B, v, o.EscapeHTML)
}

// Uint writes an unsigned number member.
func (o *Object) Uint(name string, v uint64) {
	o.Key(name)
	o.B = strconv.AppendUint(o.B, v, 10)
}

// Int writes a signed number member.
func (o *Object) Int(name string, v int64) {
	o.Key(name)
	o.B = strconv.AppendInt(o.B, v, 10)
}

// Bool writes a boolean member.
func (o *Object) Bool(name string, v bool) {
	o.Key(name)
	o.B = strconv.AppendBool(o.B, v)
}

// Raw writes a member whose value is already JSON (compact, as
// encoding/json would write a json.RawMessage that is compact).
func (o *Object) Raw(name string, v []byte) {
	o.Key(name)
	o.B = append(o.B, v...)
}

// Null writes a null member.
func (o *Object) Null(name string) {
	o.Key(name)
	o.B = append(o.B, "null"...)
}

// End closes the object ({} when it has no member) and returns the bytes.
func (o *Object) End() []byte {
	if o.n == 0 {
		o.B = append(o.B, '{')
	}
	return append(o.B, '}')
}
