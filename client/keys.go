package client

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKeyBytes is the longest key the ledger accepts.
const MaxKeyBytes = 256

// KeySeparator separates the parts of a key made by Key and KeyOf.
const KeySeparator = ":"

// keyHashHex is how many hex digits of SHA-256 stand for the tail of a key
// that would be too long.
const keyHashHex = 32

// Key derives the idempotency key of one logical effect from the tool that
// performs it, the business entity it acts on and, when one entity sees
// several effects of the same tool, the step:
//
//	Key("stripe.charge", "order-91", "step-1") == "stripe.charge:order-91:step-1"
//	Key("stripe.charge", "order-91", "")       == "stripe.charge:order-91"
//
// A key names the effect, not the attempt: build it only from values that
// are the same on every delivery and retry of the same logical call (an
// order ID, a ticket number, a workflow step), never from a random value,
// a timestamp or an attempt counter. A fresh key per attempt turns every
// retry into a new effect, which is exactly the double charge the ledger
// exists to prevent.
//
// Key is a pure function: the same parts always give the same key, which is
// always valid for the ledger (1..256 bytes of printable UTF-8) unless
// every part is empty. Inside a part, '%', ':' and anything that is not
// printable UTF-8 are percent-escaped, so different parts never give the
// same key. A key longer than MaxKeyBytes keeps its beginning and replaces
// the rest by "~" and 32 hex digits of the SHA-256 of the whole key, so it
// stays stable and distinct.
func Key(tool, entity, step string) string {
	if step == "" {
		return KeyOf(tool, entity)
	}
	return KeyOf(tool, entity, step)
}

// KeyOf joins any number of parts into a key the way Key does: escaped,
// separated by ':', and shortened with a hash when too long. The same
// rules apply: derive the parts from the logical call, never from the
// attempt.
func KeyOf(parts ...string) string {
	escaped := make([]string, len(parts))
	for i, p := range parts {
		escaped[i] = escapeKeyPart(p)
	}
	return shortenKey(strings.Join(escaped, KeySeparator))
}

// escapeKeyPart percent-escapes '%', the separator and every byte that is
// not part of a printable UTF-8 character.
func escapeKeyPart(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '%' || r == ':':
			fmt.Fprintf(&b, "%%%02X", s[i])
		case r == utf8.RuneError && size <= 1, !unicode.IsPrint(r):
			for j := 0; j < size; j++ {
				fmt.Fprintf(&b, "%%%02X", s[i+j])
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// shortenKey keeps a key of at most MaxKeyBytes as it is and replaces the
// tail of a longer one by a hash of the whole.
func shortenKey(k string) string {
	if len(k) <= MaxKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	keep := MaxKeyBytes - 1 - keyHashHex
	for keep > 0 && !utf8.RuneStart(k[keep]) {
		keep--
	}
	return k[:keep] + "~" + hex.EncodeToString(sum[:])[:keyHashHex]
}

// ValidateKey reports whether the ledger accepts key: 1..256 bytes of
// printable UTF-8. The error wraps ErrBadRequest.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("client: %w: key is empty", ErrBadRequest)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("client: %w: key is %d bytes, over the limit of %d", ErrBadRequest, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("client: %w: key is not valid UTF-8", ErrBadRequest)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("client: %w: key holds the unprintable character %U", ErrBadRequest, r)
		}
	}
	return nil
}
