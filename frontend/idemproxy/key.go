package idemproxy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/intentledger/intentd/client"
)

// HeaderIdempotencyKey is the request header that carries the key.
const HeaderIdempotencyKey = "Idempotency-Key"

// MaxIdempotencyKeyBytes is the longest Idempotency-Key accepted, counted
// after its sf-string escapes are undone.
const MaxIdempotencyKeyBytes = 255

// Errors of ParseIdempotencyKey.
var (
	// ErrMissingKey: no Idempotency-Key header, or an empty one.
	ErrMissingKey = errors.New("missing Idempotency-Key")
	// ErrInvalidKey: the header is not an RFC 8941 sf-string (nor a bare
	// token), or is too long.
	ErrInvalidKey = errors.New("invalid Idempotency-Key")
)

// ParseIdempotencyKey returns the key carried by the field lines of the
// Idempotency-Key header. The standard form is an RFC 8941 String Item
// (`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, with \" and \\ escapes),
// optionally with parameters, which are ignored. For leniency a bare
// value is accepted too: one or more visible ASCII characters other than
// '"', '\\', ',' and ';' (so sf-tokens, UUIDs and base64 all pass). The
// quoted and the bare spelling of the same characters are the same key.
// Several field lines form a list, which is not an Item: invalid.
func ParseIdempotencyKey(values []string) (string, error) {
	if len(values) == 0 {
		return "", ErrMissingKey
	}
	field := strings.Trim(strings.Join(values, ","), " \t")
	if field == "" {
		return "", ErrMissingKey
	}
	p := sfParser{s: field}
	key, err := p.bareItem()
	if err != nil {
		return "", err
	}
	if err := p.parameters(); err != nil {
		return "", err
	}
	if p.i != len(p.s) {
		return "", fmt.Errorf("%w: unexpected %q after the key (one String Item is allowed)", ErrInvalidKey, p.s[p.i:])
	}
	switch {
	case key == "":
		return "", ErrMissingKey
	case len(key) > MaxIdempotencyKeyBytes:
		return "", fmt.Errorf("%w: %d bytes is over the limit of %d", ErrInvalidKey, len(key), MaxIdempotencyKeyBytes)
	}
	return key, nil
}

// sfParser reads a structured field value from position i.
type sfParser struct {
	s string
	i int
}

func (p *sfParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// bareItem reads the key: a String, or the lenient bare form.
func (p *sfParser) bareItem() (string, error) {
	if p.peek() == '"' {
		return p.str()
	}
	start := p.i
	for p.i < len(p.s) && bareKeyChar(p.s[p.i]) {
		p.i++
	}
	if p.i == start {
		return "", fmt.Errorf("%w: %q is neither a quoted string nor a token", ErrInvalidKey, p.s)
	}
	return p.s[start:p.i], nil
}

// bareKeyChar reports whether c may appear in an unquoted key.
func bareKeyChar(c byte) bool {
	return c > 0x20 && c < 0x7f && c != '"' && c != '\\' && c != ',' && c != ';'
}

// str reads an RFC 8941 String (section 4.2.5): printable ASCII between
// double quotes, with \" and \\ the only escapes.
func (p *sfParser) str() (string, error) {
	p.i++ // the opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.i >= len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return "", fmt.Errorf("%w: only \\\" and \\\\ may be escaped in a string", ErrInvalidKey)
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("%w: byte 0x%02x is not allowed in a string (printable ASCII only)", ErrInvalidKey, c)
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("%w: the string has no closing quote", ErrInvalidKey)
}

// parameters reads and ignores RFC 8941 parameters: *( ";" *SP key [ "="
// bare-item ] ), where a value is a string, token, number, boolean or
// byte sequence.
func (p *sfParser) parameters() error {
	for p.peek() == ';' {
		p.i++
		for p.peek() == ' ' {
			p.i++
		}
		if c := p.peek(); !(c >= 'a' && c <= 'z' || c == '*') {
			return fmt.Errorf("%w: a parameter key must start with a lower-case letter or '*'", ErrInvalidKey)
		}
		for c := p.peek(); c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*'; c = p.peek() {
			p.i++
		}
		if p.peek() != '=' {
			continue // a boolean true parameter
		}
		p.i++
		if err := p.paramValue(); err != nil {
			return err
		}
	}
	return nil
}

// paramValue reads one parameter value.
func (p *sfParser) paramValue() error {
	c := p.peek()
	switch {
	case c == '"':
		_, err := p.str()
		return err
	case c == '?':
		p.i++
		if c := p.peek(); c != '0' && c != '1' {
			return fmt.Errorf("%w: a boolean parameter is ?0 or ?1", ErrInvalidKey)
		}
		p.i++
	case c == ':':
		end := strings.IndexByte(p.s[p.i+1:], ':')
		if end < 0 {
			return fmt.Errorf("%w: unterminated byte sequence parameter", ErrInvalidKey)
		}
		p.i += end + 2
	case c == '-' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '*':
		for c := p.peek(); c != 0 && c != ';' && c > 0x20 && c < 0x7f && c != '"' && c != ','; c = p.peek() {
			p.i++
		}
	default:
		return fmt.Errorf("%w: a parameter value must be a string, token, number, boolean or byte sequence", ErrInvalidKey)
	}
	return nil
}

// ledgerKeyPrefix is the first part of every ledger key the proxy makes,
// so its intents list together (GET /v1/intents?prefix=idem:).
const ledgerKeyPrefix = "idem"

// LedgerKeyPrefix starts every ledger key the proxy claims. The ledger's
// keys file reserves it to the proxy's own API key ("key_prefixes":
// ["idem:"]), so no other key can claim (and so complete) a key whose
// recorded answer the proxy replays.
const LedgerKeyPrefix = ledgerKeyPrefix + client.KeySeparator

// LedgerKey derives the ledger key of an Idempotency-Key on a route:
// client.KeyOf("idem", scope, tenant, key), where tenant is ScopeDigest of
// the route's scope headers (by default the caller's credentials,
// DefaultScopeHeaders), or client.KeyOf("idem", scope, key) on a
// single_caller route (tenant ""). KeyOf escapes ':' and '%' inside each part
// (so parts never run into each other) and, when the result is over the
// ledger's 256 bytes, keeps its start and replaces the rest by "~" and 32
// hex digits of its SHA-256: always a valid, stable and distinct ledger
// key.
func LedgerKey(scope, tenant, key string) string {
	if tenant == "" {
		return client.KeyOf(ledgerKeyPrefix, scope, key)
	}
	return client.KeyOf(ledgerKeyPrefix, scope, tenant, key)
}

// ScopeDigest is the tenant part of a ledger key on a route with scope
// headers (every route but a single_caller one): 32 hex digits of the SHA-256 of the named headers'
// values ("" when the route names none). A header the request lacks counts
// as empty, so every client without it shares one scope.
func ScopeDigest(h http.Header, names []string) string {
	if len(names) == 0 {
		return ""
	}
	sum := sha256.New()
	for _, n := range names {
		fmt.Fprintf(sum, "%s\x00", strings.ToLower(n))
		for _, v := range h.Values(n) {
			fmt.Fprintf(sum, "%d:%s\x00", len(v), v)
		}
		sum.Write([]byte{0xff})
	}
	return hex.EncodeToString(sum.Sum(nil))[:32]
}
