package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// maxExactInteger is 2^53: integers beyond it do not survive a trip
// through an IEEE double, and the ledger refuses to fingerprint them.
const maxExactInteger = 1 << 53

// CanonicalArguments returns the canonical form of a call's arguments:
// object keys sorted, no insignificant whitespace, every number written as
// the shortest spelling of its double (1299, 1299.0 and 1.299e3 are one
// number), strings as encoding/json writes them without HTML escaping.
// Equal arguments in another key order, spacing or number spelling give
// the same bytes, so they derive the same key and the ledger sees the same
// fingerprint. Absent or null arguments are the empty object.
//
// exact is false when a number's magnitude is beyond 2^53 (an ID sent as
// a number, say) or out of a double's range: such a number keeps its
// digits as sent, and the claim payload carries the canonical text as a
// string, since the ledger refuses integers it cannot fingerprint
// exactly.
func CanonicalArguments(raw json.RawMessage) (canonical []byte, exact bool, err error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("{}"), true, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, fmt.Errorf("arguments are not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false, errors.New("arguments are not one JSON value")
	}
	if v == nil {
		return []byte("{}"), true, nil
	}
	exact = true
	v = normalizeNumbers(v, &exact)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, false, fmt.Errorf("encode arguments: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), exact, nil
}

// normalizeNumbers replaces every json.Number in v by its double when the
// double holds it exactly; other numbers stay json.Number (written as
// sent) and clear *exact. Maps are written with sorted keys by
// encoding/json.
func normalizeNumbers(v any, exact *bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = normalizeNumbers(e, exact)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = normalizeNumbers(e, exact)
		}
		return t
	case json.Number:
		f, ok := exactDouble(string(t))
		if !ok {
			*exact = false
			return t
		}
		return f
	}
	return v
}

// exactDouble parses a JSON number and reports whether the gate writes it
// as its double: any number whose magnitude is at most 2^53 (a decimal
// fraction is a double's approximation for any JSON reader). A larger one
// (an ID, say) would be written with digits the ledger reads as another
// integer, so it is kept as sent and marks the arguments inexact.
func exactDouble(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.Abs(f) > maxExactInteger {
		return 0, false
	}
	if !strings.ContainsAny(s, ".eE") {
		// An integer literal within range parses exactly; check the digits
		// anyway (a literal such as 9007199254740993 rounds down to 2^53).
		i, ok := new(big.Int).SetString(s, 10)
		if !ok || i.CmpAbs(big.NewInt(maxExactInteger)) > 0 {
			return 0, false
		}
	}
	return f, true
}
